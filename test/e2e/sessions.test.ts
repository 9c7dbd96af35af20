/**
 * Sessions where they ship (docs/api.md "Sessions"): the handlers bundle in miniflare (workerd) with
 * the real host agent, over HTTP only. Signing out and rotating the secret end sessions on the very
 * next request, whatever the route — JSON, object bytes, the realtime stream — and `GET /v0/me`
 * answers the account. Needs dist/worker.js (`npm test` builds it first).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stack } from '../../infra/local/stack.ts';
import { startSuiteStack } from '../helpers/stack.ts';
import { tempDir } from '../helpers/env.ts';
import { callJson } from '../helpers/http.ts';

const dir = tempDir('svc-sessions-stack-');
let stack: Stack;

beforeAll(async () => {
  stack = await startSuiteStack(dir.dir);
}, 120_000);
afterAll(async () => {
  await stack?.stop();
  dir.cleanup();
});

function send(method: string, path: string, token?: string, body?: BodyInit): Promise<Response> {
  return fetch(`${stack.url}${path}`, { method, headers: token ? { authorization: `Bearer ${token}` } : {}, body });
}

/** An account with a project holding one object, and a second session of it. */
async function account(): Promise<{ id: string; secret: string; token: string; other: string; project: string }> {
  const up = await callJson(stack.url, 'POST', '/v0/signup', undefined, { name: 'e2e' });
  const other = (await callJson(stack.url, 'POST', '/v0/sessions', undefined, { account_id: up.account_id, account_secret: up.account_secret })).token;
  const project = (await callJson(stack.url, 'POST', '/v0/projects', up.token, { name: 'p' })).id;
  expect((await send('PUT', `/v0/projects/${project}/storage/buckets/files`, up.token)).status).toBe(201);
  expect((await send('PUT', `/v0/projects/${project}/storage/objects/files/a.txt`, up.token, 'hello')).status).toBe(201);
  return { id: up.account_id, secret: up.account_secret, token: up.token, other, project };
}

/** The statuses of a JSON route, an object's bytes and a realtime subscription with `token`. */
async function statuses(token: string, project: string): Promise<number[]> {
  const answers = await Promise.all([
    send('GET', `/v0/projects/${project}`, token),
    send('GET', `/v0/projects/${project}/storage/objects/files/a.txt`, token),
    send('GET', `/v0/projects/${project}/realtime/subscribe?channel=c`, token),
  ]);
  for (const r of answers) await r.body?.cancel();
  return answers.map((r) => r.status);
}

describe('sessions through the local stack', () => {
  it('answers the account at GET /v0/me', async () => {
    const a = await account();
    const me = await callJson(stack.url, 'GET', '/v0/me', a.token);
    expect(me).toMatchObject({ account_id: a.id, name: 'e2e', project_count: 1, secret_rotated_at: null });
    expect((await send('GET', '/v0/me')).status).toBe(401);
  });

  it('ends the signed-out session on every kind of route at once, and only that one', async () => {
    const a = await account();
    expect(await statuses(a.other, a.project)).toEqual([200, 200, 200]);
    expect((await send('DELETE', '/v0/sessions/current', a.other)).status).toBe(204);
    expect(await statuses(a.other, a.project)).toEqual([401, 401, 401]);
    expect(await statuses(a.token, a.project)).toEqual([200, 200, 200]);
  });

  it('rotates the secret: earlier sessions end, the old secret is refused, the new one and its sessions work', async () => {
    const a = await account();
    const rotated = await callJson(stack.url, 'POST', '/v0/account/secret', a.token, { account_secret: a.secret });
    expect(rotated.account_secret).toMatch(/^acs_[0-9a-f]{64}$/);
    expect(await statuses(a.token, a.project)).toEqual([401, 401, 401]);
    expect(await statuses(a.other, a.project)).toEqual([401, 401, 401]);
    expect(await statuses(rotated.token, a.project)).toEqual([200, 200, 200]);

    const signIn = (secret: string) => send('POST', '/v0/sessions', undefined, JSON.stringify({ account_id: a.id, account_secret: secret }));
    expect((await signIn(a.secret)).status).toBe(401);
    const fresh = await signIn(rotated.account_secret);
    expect(fresh.status).toBe(201);
    const { token } = (await fresh.json()) as { token: string };
    const me = await send('GET', '/v0/me', token);
    const text = await me.text();
    expect(me.status).toBe(200);
    expect(text).not.toContain(rotated.account_secret);
    expect(JSON.parse(text).secret_rotated_at).toBe(rotated.rotated_at);
  });
});
