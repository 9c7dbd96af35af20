/**
 * Test settings and real dependencies: a fresh DynamoDB table per test file on the run's DynamoDB
 * Local, fresh secrets, temp directories. Nothing here is a mock.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { inject } from 'vitest';
import { loadSettings, type Settings } from '../../shared/config.ts';
import { createDb, ensureTable, type Db } from '../../shared/db/client.ts';

/** The repository root. */
export const REPO = resolve(import.meta.dirname, '../..');

/** A unique DynamoDB table name for one test file. */
export function uniqueTable(prefix = 't'): string {
  return `${prefix}_${randomBytes(6).toString('hex')}`;
}

/** A temp directory removed by the returned cleanup. */
export function tempDir(prefix = 'svc-test-'): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Environment of a test deployment: real DynamoDB Local, a fresh table, fresh secrets. */
export function testEnv(overrides: Record<string, string> = {}): Record<string, string> {
  return {
    SVCD_DYNAMODB_ENDPOINT: inject('dynamoEndpoint'),
    SVCD_TABLE: uniqueTable(),
    SVCD_AWS_ACCESS_KEY_ID: 'local',
    SVCD_AWS_SECRET_ACCESS_KEY: 'local',
    SVCD_SESSION_SECRET: randomBytes(32).toString('hex'),
    SVCD_KEY_PEPPER: randomBytes(32).toString('hex'),
    SVCD_INTERNAL_SECRET: randomBytes(32).toString('hex'),
    SVCD_SECRETS_KEYS: `k1:${randomBytes(32).toString('base64')}`,
    SVCD_ENGINE_BIN: join(REPO, 'bin/svc-engine'),
    SVCD_AGENT_PORT: '0',
    SVCD_DATAPLANE_PORT: '0',
    SVCD_PORT: '0',
    ...overrides,
  };
}

/** Settings plus a ready table. */
export async function testDeployment(overrides: Record<string, string> = {}): Promise<{ env: Record<string, string>; settings: Settings; db: Db }> {
  const env = testEnv(overrides);
  const settings = loadSettings(env);
  const db = createDb(settings);
  await ensureTable(db);
  return { env, settings, db };
}
