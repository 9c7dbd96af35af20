/**
 * Driving object storage in process (docs/storage.md): requests to the app of a TestService as the
 * owner, the work the handlers leave to finish after an answer, and the blobs a project has in its
 * store on either backend.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { createS3Client } from '../../shared/blobs/s3.ts';
import { loadSettings } from '../../shared/config.ts';
import type { App } from '../../handlers/index.ts';
import type { TestService } from './service.ts';
import { S3_TEST_BUCKET } from '../setup/s3rver.ts';

/** A request's options: a body, headers, and the bearer (`undefined`: the session's; null: none). */
export interface SendInit {
  body?: BodyInit | Uint8Array | null;
  headers?: Record<string, string>;
  t?: string | null;
}

/** Object storage of one project as its owner sees it. */
export interface StorageDriver {
  /** Sends a request to the app (`path` relative to the origin). */
  send(method: string, path: string, init?: SendInit): Promise<Response>;
  /** Sends `body` as JSON. */
  sendJson(method: string, path: string, body: unknown, t?: string | null): Promise<Response>;
  /** `/v0/projects/{id}/storage`. */
  base(): string;
  /** The path of `bucket/key`, each segment percent-encoded. */
  objectUrl(bucket: string, key: string): string;
  /** The execution context requests are sent with: it keeps the work handed to it after an answer. */
  exec: { waitUntil(task: Promise<unknown>): void };
  /** How much of that work is still running. */
  unsettled(): number;
  /** Waits for the work the handlers left to finish after their answers (a replaced blob's delete). */
  settled(): Promise<void>;
  /** Every blob the store holds for the project (fs: files; s3: keys), once that work is done. */
  blobsOf(projectId?: string): Promise<string[]>;
}

/**
 * A driver over `svc` for the project and session the getters answer (they are read at each call,
 * so a suite may set them in its `beforeAll`). `app` defaults to the service's own.
 */
export function storageDriver(
  svc: () => TestService,
  who: () => { token: string; projectId: string },
  backend: 'fs' | 's3',
  app: () => App = () => svc().app,
): StorageDriver {
  const background = new Set<Promise<unknown>>();
  // Handed over as a worker runtime's execution context would take it.
  const exec = {
    waitUntil(task: Promise<unknown>) {
      const tracked = task.finally(() => background.delete(tracked));
      background.add(tracked);
    },
  };
  const settled = async () => {
    while (background.size > 0) await Promise.allSettled([...background]);
  };
  const send = (method: string, path: string, init: SendInit = {}) => {
    const headers: Record<string, string> = { ...(init.headers ?? {}) };
    const t = init.t === undefined ? who().token : init.t;
    if (t) headers.authorization = `Bearer ${t}`;
    const streaming = init.body instanceof ReadableStream;
    return app().fetch(
      new Request(`http://svc.test${path}`, { method, headers, body: (init.body ?? undefined) as BodyInit | undefined, ...(streaming ? { duplex: 'half' } : {}) } as RequestInit),
      exec,
    );
  };
  const base = () => `/v0/projects/${who().projectId}/storage`;
  return {
    send,
    sendJson: (method, path, body, t) => send(method, path, { body: JSON.stringify(body), headers: { 'content-type': 'application/json' }, t }),
    base,
    objectUrl: (bucket, key) => `${base()}/objects/${bucket}/${key.split('/').map(encodeURIComponent).join('/')}`,
    exec,
    unsettled: () => background.size,
    settled,
    async blobsOf(projectId = who().projectId) {
      await settled();
      if (backend === 'fs') {
        const dir = join(svc().env.SVCD_ROOT!, 'blobs', projectId);
        if (!existsSync(dir)) return [];
        return readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((f) => statSync(join(dir, f)).isFile());
      }
      const s3 = createS3Client(loadSettings(svc().env));
      const out = await s3.send(new ListObjectsV2Command({ Bucket: S3_TEST_BUCKET, Prefix: `blobs/${projectId}/` }));
      return (out.Contents ?? []).map((o) => o.Key!);
    },
  };
}
