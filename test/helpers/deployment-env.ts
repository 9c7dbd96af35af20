/**
 * The environment of a throwaway deployment against a given DynamoDB: a fresh table, fresh secrets,
 * the real engine, ports picked by the OS. Free of vitest so the standalone benchmarks use it too.
 */
import { randomBytes } from 'node:crypto';
import { join, resolve } from 'node:path';

/** The repository root. */
export const REPO = resolve(import.meta.dirname, '../..');

/** A unique DynamoDB table name. */
export function uniqueTable(prefix = 't'): string {
  return `${prefix}_${randomBytes(6).toString('hex')}`;
}

/** `SVCD_*` settings of a throwaway deployment on `dynamoEndpoint`; `overrides` win. */
export function deploymentEnv(dynamoEndpoint: string, overrides: Record<string, string> = {}): Record<string, string> {
  return {
    SVCD_DYNAMODB_ENDPOINT: dynamoEndpoint,
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
    SVCD_METRICS_PORT: '0',
    SVCD_PORT: '0',
    ...overrides,
  };
}
