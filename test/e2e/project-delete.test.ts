/**
 * Renaming and deleting a project where they ship (docs/lifecycle.md "Deleting a project"): the
 * handlers bundle in miniflare with the real host agent and engine behind the local front, over HTTP
 * only; every JSON answer, errors included, is checked against the service's own OpenAPI document.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stack } from '../../infra/local/stack.ts';
import { startSuiteStack } from '../helpers/stack.ts';
import { tempDir } from '../helpers/env.ts';
import { callJson, sendJson } from '../helpers/http.ts';

let stack: Stack;
let dir: ReturnType<typeof tempDir>;
let owner: string;
let other: string;

/** One request over HTTP; the body checked against the service's OpenAPI document. */
const send = (method: string, path: string, token?: string, body?: unknown) => sendJson(stack.url, method, path, token, body);
const ok = (method: string, path: string, token: string, body?: unknown, status = 200) => callJson(stack.url, method, path, token, body, status);

/** A `/v2` statement through the front with a project key: the status only. */
async function v2(key: string): Promise<number> {
  const r = await fetch(`${stack.url}/v2/sql`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'x-svc-protocol-minor': '3', 'content-type': 'application/json' },
    body: JSON.stringify({ sql: 'SELECT 1', params: [] }),
  });
  await r.arrayBuffer();
  return r.status;
}

/** Another account 404, a project key 401, no credential 401. */
async function refusedToAllButTheOwner(method: string, path: string, key: string, body?: unknown): Promise<void> {
  const foreign = await send(method, path, other, body);
  expect(foreign.status, `${method} ${path}`).toBe(404);
  expect(foreign.body.error.code).toBe('not_found');
  for (const token of [key, undefined]) {
    const r = await send(method, path, token, body);
    expect(r.status, `${method} ${path}`).toBe(401);
    expect(r.headers.get('www-authenticate')).toBe('Bearer realm="svc-cloud"');
  }
}

beforeAll(async () => {
  dir = tempDir('svc-e2e-project-delete-');
  stack = await startSuiteStack(dir.dir);
  owner = (await ok('POST', '/v0/signup', '', {}, 201)).token;
  other = (await ok('POST', '/v0/signup', '', {}, 201)).token;
});

afterAll(async () => {
  await stack?.stop();
  dir?.cleanup();
});

describe('a project renamed and deleted over HTTP', () => {
  it('renames for the owner only, under the name rule', async () => {
    const p = await ok('POST', '/v0/projects', owner, { name: 'first' }, 201);
    const key = (await ok('POST', `/v0/projects/${p.id}/keys`, owner, {}, 201)).key as string;
    await refusedToAllButTheOwner('PATCH', `/v0/projects/${p.id}`, key, { name: 'stolen' });
    const bad = await send('PATCH', `/v0/projects/${p.id}`, owner, { name: '' });
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toMatch(/^name: /);
    const renamed = await ok('PATCH', `/v0/projects/${p.id}`, owner, { name: 'second' });
    expect(renamed).toMatchObject({ id: p.id, name: 'second', state: 'stopped' });
    expect(await ok('GET', `/v0/projects/${p.id}`, owner)).toEqual(renamed);
  });

  it('deletes for the owner only; then the project is 404, its key 401 on /v2, its receipts still readable', async () => {
    const p = await ok('POST', '/v0/projects', owner, { name: 'doomed' }, 201);
    const key = (await ok('POST', `/v0/projects/${p.id}/keys`, owner, {}, 201)).key as string;
    await ok('POST', `/v0/projects/${p.id}/wakeup`, owner);
    await ok('PUT', `/v0/projects/${p.id}/storage/buckets/bucket-one`, owner, undefined, 201);
    expect(await v2(key)).toBe(200);
    await refusedToAllButTheOwner('DELETE', `/v0/projects/${p.id}`, key);

    const deleted = await ok('DELETE', `/v0/projects/${p.id}`, owner);
    expect(deleted).toMatchObject({ id: p.id, name: 'doomed', state: 'sleeping' });
    expect(await v2(key)).toBe(401);
    for (const [method, path] of [
      ['GET', `/v0/projects/${p.id}`],
      ['PATCH', `/v0/projects/${p.id}`],
      ['DELETE', `/v0/projects/${p.id}`],
      ['POST', `/v0/projects/${p.id}/wakeup`],
      ['GET', `/v0/projects/${p.id}/keys`],
      ['GET', `/v0/projects/${p.id}/storage/buckets`],
      ['GET', `/v0/projects/${p.id}/snapshots`],
    ] as const) {
      const r = await send(method, path, owner, method === 'PATCH' ? { name: 'x' } : undefined);
      expect(r.status, `${method} ${path}`).toBe(404);
    }
    const receipts = await ok('GET', `/v0/receipts?project=${p.id}`, owner);
    expect(receipts.receipts.map((r: any) => r.op)).toEqual(['project.delete']);
    expect((await send('GET', `/v0/receipts?project=${p.id}`, other)).status).toBe(404);
  });
});
