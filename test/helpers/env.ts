/**
 * Test settings and real dependencies: a fresh DynamoDB table per test file on the run's DynamoDB
 * Local, fresh secrets, temp directories. Nothing here is a mock.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inject } from 'vitest';
import { loadSettings, type Settings } from '../../shared/config.ts';
import { createDb, ensureTable, type Db } from '../../shared/db/client.ts';
import { deploymentEnv } from './deployment-env.ts';

export { REPO, uniqueTable } from './deployment-env.ts';

/** A temp directory removed by the returned cleanup. */
export function tempDir(prefix = 'svc-test-'): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Environment of a test deployment: the run's DynamoDB Local, a fresh table, fresh secrets. */
export function testEnv(overrides: Record<string, string> = {}): Record<string, string> {
  return deploymentEnv(inject('dynamoEndpoint'), overrides);
}

/** Settings plus a ready table. */
export async function testDeployment(overrides: Record<string, string> = {}): Promise<{ env: Record<string, string>; settings: Settings; db: Db }> {
  const env = testEnv(overrides);
  const settings = loadSettings(env);
  const db = createDb(settings);
  await ensureTable(db);
  return { env, settings, db };
}
