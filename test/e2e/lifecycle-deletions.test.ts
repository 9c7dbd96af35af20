/**
 * Deleting snapshots and freeing previous data directories where they ship (docs/lifecycle.md
 * "Deleting a snapshot", "Previous data directories"): the handlers bundle in miniflare with the
 * real host agent and engine, over HTTP only; every JSON answer, errors included, is checked against
 * the service's own OpenAPI document.
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
let projectKey: string;
let id: string;
const snaps: { id: string }[] = [];

/** One request over HTTP; the body checked against the service's OpenAPI document. */
const send = (method: string, path: string, token?: string, body?: unknown) => sendJson(stack.url, method, path, token, body);
const ok = (method: string, path: string, token: string, body?: unknown, status = 200) => callJson(stack.url, method, path, token, body, status);

beforeAll(async () => {
  dir = tempDir('svc-e2e-deletions-');
  stack = await startSuiteStack(dir.dir);
  owner = (await ok('POST', '/v0/signup', '', {}, 201)).token;
  other = (await ok('POST', '/v0/signup', '', {}, 201)).token;
  id = (await ok('POST', '/v0/projects', owner, { name: 'deletions' }, 201)).id;
  projectKey = (await ok('POST', `/v0/projects/${id}/keys`, owner, {}, 201)).key;
  await ok('POST', `/v0/projects/${id}/wakeup`, owner);
  await ok('POST', `/v0/projects/${id}/sleep`, owner);
  for (let i = 0; i < 2; i++) snaps.push(await ok('POST', `/v0/projects/${id}/snapshots`, owner, {}, 201));
  for (const snap of snaps) await ok('POST', `/v0/projects/${id}/restore`, owner, { snapshot_id: snap.id });
});

afterAll(async () => {
  await stack?.stop();
  dir?.cleanup();
});

/** Another account 404, a project key 401, no credential 401: checked before the owner's call. */
async function refusedToAllButTheOwner(method: string, path: string): Promise<void> {
  const foreign = await send(method, path, other);
  expect(foreign.status, `${method} ${path}`).toBe(404);
  expect(foreign.body.error.code).toBe('not_found');
  for (const token of [projectKey, undefined]) {
    const r = await send(method, path, token);
    expect(r.status, `${method} ${path}`).toBe(401);
    expect(r.headers.get('www-authenticate')).toBe('Bearer realm="svc-cloud"');
  }
}

describe('snapshots and previous directories over HTTP', () => {
  it('lists and reads snapshots, for the owner only', async () => {
    await refusedToAllButTheOwner('GET', `/v0/projects/${id}/snapshots`);
    expect((await ok('GET', `/v0/projects/${id}/snapshots`, owner)).snapshots.map((s: any) => s.id)).toEqual([snaps[1]!.id, snaps[0]!.id]);
    await refusedToAllButTheOwner('GET', `/v0/projects/${id}/snapshots/${snaps[0]!.id}`);
    expect((await ok('GET', `/v0/projects/${id}/snapshots/${snaps[0]!.id}`, owner)).id).toBe(snaps[0]!.id);
  });

  it('lists the previous directories of both restores, newest first, for the owner only', async () => {
    await refusedToAllButTheOwner('GET', `/v0/projects/${id}/replaced`);
    const listed = (await ok('GET', `/v0/projects/${id}/replaced`, owner)).replaced as any[];
    expect(listed.map((e) => e.snapshot_id)).toEqual([snaps[1]!.id, snaps[0]!.id]);
    for (const entry of listed) expect(entry.bytes).toBeGreaterThan(0);
  });

  it('frees a previous directory, for the owner only, and refuses a name that could leave replaced/', async () => {
    const [newest, oldest] = (await ok('GET', `/v0/projects/${id}/replaced`, owner)).replaced as any[];
    await refusedToAllButTheOwner('DELETE', `/v0/projects/${id}/replaced/${oldest.name}`);
    expect((await send('DELETE', `/v0/projects/${id}/replaced/..%2Fdata`, owner)).status).toBe(400);
    expect(await ok('DELETE', `/v0/projects/${id}/replaced/${oldest.name}`, owner)).toEqual(oldest);
    expect((await ok('GET', `/v0/projects/${id}/replaced`, owner)).replaced).toEqual([newest]);
    expect((await send('DELETE', `/v0/projects/${id}/replaced/${oldest.name}`, owner)).status).toBe(404);
  });

  it('deletes a snapshot, for the owner only; it cannot be restored afterwards', async () => {
    const snap = snaps[0]!;
    await refusedToAllButTheOwner('DELETE', `/v0/projects/${id}/snapshots/${snap.id}`);
    expect((await ok('DELETE', `/v0/projects/${id}/snapshots/${snap.id}`, owner)).id).toBe(snap.id);
    expect((await send('GET', `/v0/projects/${id}/snapshots/${snap.id}`, owner)).status).toBe(404);
    const restore = await send('POST', `/v0/projects/${id}/restore`, owner, { snapshot_id: snap.id });
    expect(restore.status).toBe(404);
    expect(restore.body.error.code).toBe('not_found');
    const ops = (await ok('GET', `/v0/projects/${id}/receipts`, owner)).receipts.map((r: any) => `${r.op} ${r.target}`);
    expect(ops).toEqual(expect.arrayContaining([`snapshot.delete ${snap.id}`, expect.stringMatching(/^replaced\.delete \d{8}T\d{9}Z-snap_/)]));
  });
});
