/**
 * A body without a length over its limit, through the whole local stack (the origin's relay, the
 * handlers in workerd, the host agent or s3rver): an object PUT on both backends and a function
 * deploy. The 413 arrives as soon as the count passes the limit, while the client is still sending,
 * and the connection is then closed (docs/storage.md "Streaming and the byte limit", docs/functions.md
 * "Deploy"); nothing is stored.
 */
import { existsSync, readdirSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { Stack } from '../../infra/local/stack.ts';
import { tempDir } from '../helpers/env.ts';
import { startSuiteStack } from '../helpers/stack.ts';
import { s3TestSettings } from '../setup/s3rver.ts';

const MiB = 1024 * 1024;
const LIMIT = 4 * MiB;
const MODULE_LIMIT = 1 * MiB;

/**
 * Sends `bytes` chunked to `url` and then keeps the request open without ending it: answers the
 * status, how long after the last byte written it came, and whether the connection was closed after.
 */
function putNeverEnding(url: string, headers: Record<string, string>, bytes: number): Promise<{ status: number; afterMs: number; closed: boolean }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'PUT', headers: { ...headers, 'transfer-encoding': 'chunked' } });
    let sentAt = 0;
    const chunk = new Uint8Array(64 * 1024);
    let left = bytes;
    const write = () => {
      while (left > 0) {
        left -= chunk.byteLength;
        if (!req.write(chunk)) return void req.once('drain', write);
      }
      sentAt = performance.now();
    };
    req.on('response', (res) => {
      const status = res.statusCode!;
      const afterMs = sentAt === 0 ? 0 : performance.now() - sentAt;
      res.resume();
      const closedTimer = setTimeout(() => done(false), 3000);
      const done = (closed: boolean) => {
        clearTimeout(closedTimer);
        req.destroy();
        resolve({ status, afterMs, closed });
      };
      res.socket.once('close', () => done(true));
      res.once('end', () => {
        if (res.socket.destroyed) done(true);
      });
    });
    req.on('error', (err) => (sentAt === 0 && left > 0 ? reject(err) : undefined));
    write();
  });
}

/** Every file under `root`, recursively (none when it does not exist). */
function filesUnder(root: string): string[] {
  if (!existsSync(root)) return [];
  return readdirSync(root, { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name));
}

describe.each(['fs', 's3'] as const)('a chunked body over the limit on the %s backend', (backend) => {
  let stack: Stack;
  let dir: ReturnType<typeof tempDir>;
  let auth: Record<string, string>;
  let base: string;
  let project: string;

  beforeAll(async () => {
    dir = tempDir(`svc-storage-limits-${backend}-`);
    stack = await startSuiteStack(dir.dir, {
      SVCD_STORAGE_MAX_BYTES: String(LIMIT),
      SVCD_FUNCTION_MAX_BYTES: String(MODULE_LIMIT),
      ...(backend === 's3' ? s3TestSettings(inject('s3Endpoint')) : {}),
    });
    const post = async (path: string, body: unknown, headers: Record<string, string> = {}) =>
      (await (await fetch(`${stack.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) })).json()) as Record<string, string>;
    const { token } = await post('/v0/signup', {});
    auth = { authorization: `Bearer ${token}` };
    const { id } = await post('/v0/projects', { name: 'limits' }, auth);
    project = id!;
    base = `${stack.url}/v0/projects/${id}/storage`;
    expect((await fetch(`${base}/buckets/lim`, { method: 'PUT', headers: auth })).status).toBe(201);
  });
  afterAll(async () => {
    await stack?.stop();
    dir?.cleanup();
  });

  it('answers 413 while the body is still being sent, and closes the connection', async () => {
    const got = await putNeverEnding(`${base}/objects/lim/endless`, auth, LIMIT + 2 * MiB);
    expect(got.status).toBe(413);
    expect(got.afterMs).toBeLessThan(2000);
    expect(got.closed).toBe(true);
    const list = (await (await fetch(`${base}/objects?bucket=lim`, { headers: auth })).json()) as { objects: unknown[] };
    expect(list.objects).toEqual([]);
    // On fs the agent saw its body cut off: no temp file or blob is left (after the answer).
    if (backend === 'fs') await expect.poll(() => filesUnder(join(dir.dir, 'agent', 'blobs')), { timeout: 2000 }).toEqual([]);
  });

  it('answers a function deploy over its limit while the module is still being sent, and closes the connection', async () => {
    const url = `${stack.url}/v0/projects/${project}/functions/endless`;
    const got = await putNeverEnding(url, { ...auth, 'content-type': 'text/javascript' }, MODULE_LIMIT + 2 * MiB);
    expect(got.status).toBe(413);
    expect(got.afterMs).toBeLessThan(2000);
    expect(got.closed).toBe(true);
    expect((await fetch(url, { headers: auth })).status).toBe(404);
  });

  it('a PUT cut off mid-body leaves no object (and on fs no temp file)', async () => {
    const tmpDir = join(dir.dir, 'agent', 'blobs', '.tmp');
    for (const chunked of [false, true]) {
      const req = request(`${base}/objects/lim/cut-${chunked}`, {
        method: 'PUT',
        headers: { ...auth, ...(chunked ? { 'transfer-encoding': 'chunked' } : { 'content-length': String(3 * MiB) }) },
      });
      req.on('error', () => {});
      req.write(new Uint8Array(MiB));
      // The bytes reach the agent's temp file (fs) or the store's upload (s3), then the client goes.
      if (backend === 'fs') await expect.poll(() => filesUnder(tmpDir).length, { timeout: 5000 }).toBe(1);
      else await new Promise((resolve) => setTimeout(resolve, 300));
      req.destroy();
      if (backend === 'fs') await expect.poll(() => filesUnder(tmpDir), { timeout: 2000 }).toEqual([]);
    }
    // Time for a handler that missed the cut to flip its row: none may appear.
    await new Promise((resolve) => setTimeout(resolve, 500));
    const list = (await (await fetch(`${base}/objects?bucket=lim`, { headers: auth })).json()) as { objects: unknown[] };
    expect(list.objects).toEqual([]);
  });
});
