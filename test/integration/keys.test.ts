/**
 * Project keys through the handlers against DynamoDB Local and a real host agent (contract "Project
 * key", "Key states", POST/GET/DELETE keys; docs/dataplane.md "Keys").
 */
import { ScanCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifierOf } from '../../shared/auth.ts';
import { lookupKey } from '../../shared/db/keys.ts';
import { verifyProjectKey } from '../../shared/project-keys.ts';
import { signup, startTestService, type TestService } from '../helpers/service.ts';

const RFC3339_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;
const KEY = /^svc1_([0-9a-f]{32})_([0-9a-f]{64})$/;

let svc: TestService;
let token: string;
let projectId: string;

async function newProject(t = token): Promise<string> {
  const r = await svc.request('POST', '/v0/projects', { token: t, body: { name: 'keys' } });
  expect(r.status).toBe(201);
  return ((await r.json()) as { id: string }).id;
}

async function issue(body: unknown = {}, project = projectId, t = token): Promise<Record<string, any>> {
  const r = await svc.request('POST', `/v0/projects/${project}/keys`, { token: t, body });
  expect(r.status).toBe(201);
  return (await r.json()) as Record<string, any>;
}

async function errorOf(r: Response): Promise<{ code: string; message: string }> {
  return ((await r.json()) as { error: { code: string; message: string } }).error;
}

beforeAll(async () => {
  svc = await startTestService();
  token = (await signup(svc)).token;
  projectId = await newProject();
});
afterAll(() => svc?.stop());

describe('POST /v0/projects/{id}/keys', () => {
  it('issues a key with exactly the contract fields, the secret answered once', async () => {
    const k = await issue({ label: 'ci' });
    expect(Object.keys(k).sort()).toEqual(['created_at', 'key', 'key_id', 'label']);
    expect(k.key_id).toMatch(/^[0-9a-f]{32}$/);
    expect(k.key).toMatch(KEY);
    expect(KEY.exec(k.key)![1]).toBe(k.key_id);
    expect(k.label).toBe('ci');
    expect(k.created_at).toMatch(RFC3339_UTC);
  });

  it('defaults the label to null, with or without a body', async () => {
    expect((await issue({})).label).toBeNull();
    expect((await issue({ label: null })).label).toBeNull();
    const r = await svc.request('POST', `/v0/projects/${projectId}/keys`, { token });
    expect(r.status).toBe(201);
    expect(((await r.json()) as any).label).toBeNull();
  });

  it('accepts a 64-character label and refuses longer or non-string ones with 400 naming label', async () => {
    expect((await issue({ label: 'x'.repeat(64) })).label).toBe('x'.repeat(64));
    for (const body of [{ label: 'x'.repeat(65) }, { label: 7 }, { label: ['a'] }]) {
      const r = await svc.request('POST', `/v0/projects/${projectId}/keys`, { token, body });
      expect(r.status).toBe(400);
      const e = await errorOf(r);
      expect(e.code).toBe('invalid_request');
      expect(e.message).toMatch(/^label: /);
    }
    const unknown = await svc.request('POST', `/v0/projects/${projectId}/keys`, { token, body: { label: 'a', scope: 'all' } });
    expect(unknown.status).toBe(400);
  });

  it('stores only the HMAC verifier: the secret is in no item and in no log line', async () => {
    const k = await issue({ label: 'stored' });
    const secret = KEY.exec(k.key)![2]!;
    const scan = await svc.db.doc.send(new ScanCommand({ TableName: svc.db.table }));
    const dump = JSON.stringify(scan.Items);
    expect(dump).toContain(k.key_id);
    expect(dump).not.toContain(secret);
    const stored = await lookupKey(svc.db, k.key_id);
    expect(stored).toEqual({ key_id: k.key_id, project: projectId, verifier: await verifierOf(svc.env.SVCD_KEY_PEPPER!, secret), revoked_at: null });
    expect(svc.logs.join('\n')).not.toContain(secret);
  });

  it('answers 404 for a project the caller does not own, 401 without a session or with a project key', async () => {
    const other = (await signup(svc)).token;
    const r = await svc.request('POST', `/v0/projects/${projectId}/keys`, { token: other, body: {} });
    expect(r.status).toBe(404);
    expect((await errorOf(r)).code).toBe('not_found');
    const anon = await svc.request('POST', `/v0/projects/${projectId}/keys`, { body: {} });
    expect(anon.status).toBe(401);
    expect(anon.headers.get('www-authenticate')).toBe('Bearer realm="svc-cloud"');
    const k = await issue();
    const withKey = await svc.request('POST', `/v0/projects/${projectId}/keys`, { token: k.key, body: {} });
    expect(withKey.status).toBe(401);
  });
});

describe('GET /v0/projects/{id}/keys', () => {
  it('lists every key of the project with key_id, label, created_at, revoked_at and never a secret', async () => {
    const project = await newProject();
    const a = await issue({ label: 'a' }, project);
    const b = await issue({ label: null }, project);
    const r = await svc.request('GET', `/v0/projects/${project}/keys`, { token });
    expect(r.status).toBe(200);
    const text = await r.text();
    expect(text).not.toContain(a.key);
    expect(text).not.toContain(KEY.exec(b.key)![2]);
    const body = JSON.parse(text) as { keys: Record<string, unknown>[]; next_cursor: string | null };
    expect(body.next_cursor).toBeNull();
    const byId = new Map(body.keys.map((k) => [k.key_id, k]));
    expect(body.keys).toHaveLength(2);
    expect(byId.get(a.key_id)).toEqual({ key_id: a.key_id, label: 'a', created_at: a.created_at, revoked_at: null });
    expect(byId.get(b.key_id)).toEqual({ key_id: b.key_id, label: null, created_at: b.created_at, revoked_at: null });
  });

  it('pages with limit and cursor', async () => {
    const project = await newProject();
    const issued = [await issue({}, project), await issue({}, project), await issue({}, project)];
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const q: string = cursor ? `?limit=2&cursor=${cursor}` : '?limit=2';
      const r = await svc.request('GET', `/v0/projects/${project}/keys${q}`, { token });
      const body = (await r.json()) as { keys: { key_id: string }[]; next_cursor: string | null };
      expect(body.keys.length).toBeLessThanOrEqual(2);
      seen.push(...body.keys.map((k) => k.key_id));
      cursor = body.next_cursor;
    } while (cursor);
    expect(seen.sort()).toEqual(issued.map((k) => k.key_id).sort());
  });

  it("answers 404 for another owner's project", async () => {
    const other = (await signup(svc)).token;
    const r = await svc.request('GET', `/v0/projects/${projectId}/keys`, { token: other });
    expect(r.status).toBe(404);
  });
});

describe('DELETE /v0/projects/{id}/keys/{key_id}', () => {
  it('revokes: 200 with the record and revoked_at; the listing shows it; the secret is not answered', async () => {
    const k = await issue({ label: 'gone' });
    const r = await svc.request('DELETE', `/v0/projects/${projectId}/keys/${k.key_id}`, { token });
    expect(r.status).toBe(200);
    const text = await r.text();
    expect(text).not.toContain(k.key);
    const body = JSON.parse(text);
    expect(body).toEqual({ key_id: k.key_id, label: 'gone', created_at: k.created_at, revoked_at: expect.stringMatching(RFC3339_UTC) });
    const list = (await (await svc.request('GET', `/v0/projects/${projectId}/keys`, { token })).json()) as any;
    expect(list.keys.find((x: any) => x.key_id === k.key_id).revoked_at).toBe(body.revoked_at);
  });

  it('answers 200 with the original revoked_at when revoking again, also when racing', async () => {
    const k = await issue();
    const first = await svc.request('DELETE', `/v0/projects/${projectId}/keys/${k.key_id}`, { token });
    const original = ((await first.json()) as any).revoked_at;
    await new Promise((r) => setTimeout(r, 5));
    const again = await svc.request('DELETE', `/v0/projects/${projectId}/keys/${k.key_id}`, { token });
    expect(again.status).toBe(200);
    expect(((await again.json()) as any).revoked_at).toBe(original);

    const k2 = await issue();
    const raced = await Promise.all(
      Array.from({ length: 4 }, () => svc.request('DELETE', `/v0/projects/${projectId}/keys/${k2.key_id}`, { token })),
    );
    const stamps = await Promise.all(raced.map(async (r) => [r.status, ((await r.json()) as any).revoked_at]));
    expect(new Set(stamps.map((s) => s[0]))).toEqual(new Set([200]));
    expect(new Set(stamps.map((s) => s[1])).size).toBe(1);
  });

  it("answers 404 for an unknown key and for another project's key, and 400 for a malformed key_id", async () => {
    const unknown = await svc.request('DELETE', `/v0/projects/${projectId}/keys/${'0'.repeat(32)}`, { token });
    expect(unknown.status).toBe(404);
    expect((await errorOf(unknown)).code).toBe('not_found');

    // A key of another project of the same owner is not this project's key.
    const sibling = await newProject();
    const k = await issue({}, sibling);
    const cross = await svc.request('DELETE', `/v0/projects/${projectId}/keys/${k.key_id}`, { token });
    expect(cross.status).toBe(404);
    expect((await lookupKey(svc.db, k.key_id))?.revoked_at).toBeNull();

    // Another owner's key, through that owner's project id: 404 as for a project that does not exist.
    const other = (await signup(svc)).token;
    const theirs = await newProject(other);
    const theirKey = await issue({}, theirs, other);
    const foreign = await svc.request('DELETE', `/v0/projects/${theirs}/keys/${theirKey.key_id}`, { token });
    expect(foreign.status).toBe(404);
    expect((await lookupKey(svc.db, theirKey.key_id))?.revoked_at).toBeNull();

    const bad = await svc.request('DELETE', `/v0/projects/${projectId}/keys/XYZ`, { token });
    expect(bad.status).toBe(400);
    expect((await errorOf(bad)).message).toMatch(/^key_id: /);
  });

  it('drops the key from the owning agent before answering', async () => {
    const k = await issue();
    const [, keyId, secret] = KEY.exec(k.key)!;
    // Warm the agent's cache with the active key.
    await expect(svc.agent.ctx.keyCache.verify({ keyId: keyId!, secret: secret! })).resolves.toEqual({ keyId, projectId, owner: svc.agent.ctx.agentId });
    const r = await svc.request('DELETE', `/v0/projects/${projectId}/keys/${k.key_id}`, { token });
    expect(r.status).toBe(200);
    const loads = svc.agent.ctx.keyCache.stats.loads;
    await expect(svc.agent.ctx.keyCache.verify({ keyId: keyId!, secret: secret! })).rejects.toMatchObject({ code: 'authentication_required' });
    expect(svc.agent.ctx.keyCache.stats.loads).toBe(loads);
  });
});

describe('verifyProjectKey (handlers and agent alike)', () => {
  it('answers the key and its project for an active key, 401 for everything else', async () => {
    const pepper = svc.env.SVCD_KEY_PEPPER!;
    const k = await issue();
    await expect(verifyProjectKey(svc.db, pepper, k.key)).resolves.toEqual({ keyId: k.key_id, projectId });
    const wrong = k.key.slice(0, -1) + (k.key.endsWith('0') ? '1' : '0');
    const unknown = `svc1_${'1'.repeat(32)}_${'2'.repeat(64)}`;
    for (const t of [wrong, unknown, token, 'svc1_abc', '']) {
      await expect(verifyProjectKey(svc.db, pepper, t)).rejects.toMatchObject({ code: 'authentication_required', status: 401 });
    }
    await svc.request('DELETE', `/v0/projects/${projectId}/keys/${k.key_id}`, { token });
    await expect(verifyProjectKey(svc.db, pepper, k.key)).rejects.toMatchObject({ code: 'authentication_required' });
  });
});

describe('revoking while the owning agent cannot be told', () => {
  it('answers 503 orchestrator_unavailable, and the key is already revoked in DynamoDB (a cold cache refuses it)', async () => {
    const local = await startTestService();
    try {
      const t = (await signup(local)).token;
      const r0 = await local.request('POST', '/v0/projects', { token: t, body: { name: 'x' } });
      const project = ((await r0.json()) as any).id as string;
      const k = (await (await local.request('POST', `/v0/projects/${project}/keys`, { token: t, body: {} })).json()) as any;
      await local.agent.stop();
      const r = await local.request('DELETE', `/v0/projects/${project}/keys/${k.key_id}`, { token: t });
      expect(r.status).toBe(503);
      expect((await errorOf(r)).code).toBe('orchestrator_unavailable');
      const stored = await lookupKey(local.db, k.key_id);
      expect(stored?.revoked_at).toMatch(RFC3339_UTC);
    } finally {
      await local.stop();
    }
  });
});
