/**
 * s3rver (an S3-compatible server on the local file system) for the `s3` blob backend's tests and
 * benchmark: started on port 0 in a temp directory, with the deployment's blob bucket created.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** The S3 bucket every test deployment stores blobs in (the SVCD_S3_BUCKET default). */
export const S3_TEST_BUCKET = 'svc-blobs';

/** s3rver's fixed credentials. */
export const S3RVER_CREDENTIALS = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' } as const;

interface S3rverInstance {
  run(): Promise<{ port: number }>;
  close(): Promise<void>;
}
type S3rverCtor = new (options: Record<string, unknown>) => S3rverInstance;

/** A running s3rver. */
export interface S3rver {
  endpoint: string;
  directory: string;
  stop(): Promise<void>;
}

/** Starts s3rver on 127.0.0.1, a free port, a fresh temp directory. */
export async function startS3rver(): Promise<S3rver> {
  const S3rverClass = createRequire(import.meta.url)('s3rver') as S3rverCtor;
  const directory = mkdtempSync(join(tmpdir(), 'svc-s3rver-'));
  const server = new S3rverClass({
    address: '127.0.0.1',
    port: 0,
    directory,
    silent: true,
    configureBuckets: [{ name: S3_TEST_BUCKET }],
  });
  const { port } = await server.run();
  return {
    endpoint: `http://127.0.0.1:${port}`,
    directory,
    async stop() {
      await server.close();
      rmSync(directory, { recursive: true, force: true });
    },
  };
}

/** Settings that point a test deployment's `s3` backend at `endpoint`. */
export function s3TestSettings(endpoint: string): Record<string, string> {
  return {
    SVCD_BLOB_BACKEND: 's3',
    SVCD_S3_ENDPOINT: endpoint,
    SVCD_S3_BUCKET: S3_TEST_BUCKET,
    SVCD_S3_FORCE_PATH_STYLE: 'true',
    SVCD_S3_ACCESS_KEY_ID: S3RVER_CREDENTIALS.accessKeyId,
    SVCD_S3_SECRET_ACCESS_KEY: S3RVER_CREDENTIALS.secretAccessKey,
  };
}
