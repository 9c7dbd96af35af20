/**
 * Sessions and the account through the handlers, over a real DynamoDB Local and host agent
 * (docs/api.md "Sessions"): `GET /v0/me`, `DELETE /v0/sessions/current` and `POST
 * /v0/account/secret`, each with its authorization matrix, and the rule they exist for: a session
 * that has ended is 401 on the very next request, on every kind of route.
 */
import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../shared/db/table.ts';
import { signup, startTestService, type TestService } from '../helpers/service.ts';
import { SseReader } from '../helpers/sse.ts';

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService();
});
afterAll(() => svc?.stop());

type Account = Awaited<ReturnType<typeof signup>>;

async function body(r: Response): Promise<any> {
  return JSON.parse(await r.text());
}

async function expect401(r: Response, label = ''): Promise<void> {
  expect(r.status, `${label} ${r.status === 401 ? '' : await r.clone().text()}`).toBe(401);
  expect(r.headers.get('www-authenticate')).toBe('Bearer realm="svc-cloud"');
  expect((await body(r)).error.code).toBe('authentication_required');
}

async function openSession(account: Pick<Account, 'accountId' | 'secret'>): Promise<Response> {
  return svc.request('POST', '/v0/sessions', { body: { account_id: account.accountId, account_secret: account.secret } });
}

async function newToken(account: Account): Promise<string> {
  const r = await openSession(account);
  expect(r.status).toBe(201);
  return (await body(r)).token;
}

async function createProject(token: string, name = 'p'): Promise<string> {
  const r = await svc.request('POST', '/v0/projects', { token, body: { name } });
  expect(r.status, await r.clone().text()).toBe(201);
  return (await body(r)).id;
}

/** A project of `token`'s account with a project key, a bucket and one stored object. */
async function projectWithObject(token: string): Promise<{ id: string; key: string }> {
  const id = await createProject(token);
  const k = await svc.request('POST', `/v0/projects/${id}/keys`, { token, body: {} });
  expect(k.status).toBe(201);
  expect((await svc.request('PUT', `/v0/projects/${id}/storage/buckets/files`, { token })).status).toBe(201);
  const put = await svc.request('PUT', `/v0/projects/${id}/storage/objects/files/a.txt`, { token, body: 'hello', headers: { 'content-type': 'text/plain' } });
  expect(put.status).toBe(201);
  return { id, key: (await body(k)).key };
}

/** Requests on every kind of route: JSON, object bytes both ways, realtime subscribe, lifecycle, the account itself. */
function everyKindOfRoute(id: string): [string, string, { body?: unknown; headers?: Record<string, string> }?][] {
  return [
    ['GET', '/v0/projects'],
    ['POST', '/v0/projects', { body: { name: 'after' } }],
    ['GET', `/v0/projects/${id}`],
    ['GET', `/v0/projects/${id}/keys`],
    ['POST', `/v0/projects/${id}/sleep`],
    ['GET', `/v0/projects/${id}/storage/objects/files/a.txt`],
    ['HEAD', `/v0/projects/${id}/storage/objects/files/a.txt`],
    ['PUT', `/v0/projects/${id}/storage/objects/files/b.txt`, { body: 'bytes', headers: { 'content-type': 'text/plain' } }],
    ['GET', `/v0/projects/${id}/storage/objects?bucket=files`],
    ['POST', `/v0/projects/${id}/realtime/publish`, { body: { channel: 'c', event: 'e', payload: 1 } }],
    ['GET', `/v0/projects/${id}/realtime/subscribe?channel=c`],
    ['GET', '/v0/me'],
    ['DELETE', '/v0/sessions/current'],
    ['POST', '/v0/account/secret', { body: { account_secret: 'acs_' + '0'.repeat(64) } }],
  ];
}

async function expectRefusedEverywhere(token: string, id: string): Promise<void> {
  for (const [method, path, init] of everyKindOfRoute(id)) {
    const r = await svc.request(method, path, { token, ...init });
    if (method === 'HEAD') {
      expect(r.status, `${method} ${path}`).toBe(401);
      continue;
    }
    await expect401(r, `${method} ${path}`);
  }
}

describe('GET /v0/me', () => {
  it('answers the account of the session: id, name, creation time, project count, never the secret', async () => {
    const r0 = await svc.request('POST', '/v0/signup', { body: { name: 'Ada' } });
    const a = await body(r0);
    const before = await svc.request('GET', '/v0/me', { token: a.token });
    expect(before.status).toBe(200);
    const text = await before.text();
    expect(text).not.toContain(a.account_secret);
    const me = JSON.parse(text);
    expect(me).toEqual({ account_id: a.account_id, name: 'Ada', created_at: expect.any(String), project_count: 0, secret_rotated_at: null });
    expect(me.created_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    expect(Math.abs(Date.parse(me.created_at) - Date.now())).toBeLessThan(60_000);

    await createProject(a.token, 'one');
    await createProject(a.token, 'two');
    expect((await body(await svc.request('GET', '/v0/me', { token: a.token }))).project_count).toBe(2);
  });

  it('counts only the caller\'s projects, and a name left out is null', async () => {
    const a = await signup(svc);
    const b = await signup(svc);
    await createProject(b.token);
    const me = await body(await svc.request('GET', '/v0/me', { token: a.token }));
    expect(me).toMatchObject({ account_id: a.accountId, name: null, project_count: 0 });
  });

  it('counts projects through the index for an account stored before the count was kept', async () => {
    const a = await signup(svc);
    await createProject(a.token);
    await createProject(a.token);
    await svc.db.doc.send(
      new UpdateCommand({ TableName: svc.db.table, Key: keys.account(a.accountId), UpdateExpression: 'REMOVE projects_counted, project_count' }),
    );
    // A project created since has moved a count nobody reads yet; the index count is what is answered.
    await createProject(a.token);
    expect((await body(await svc.request('GET', '/v0/me', { token: a.token }))).project_count).toBe(3);
  });

  it('is 401 without a session or with a project key, and 400 with input it does not take', async () => {
    const a = await signup(svc);
    const { key } = await projectWithObject(a.token);
    await expect401(await svc.request('GET', '/v0/me'));
    await expect401(await svc.request('GET', '/v0/me', { token: key }));
    await expect401(await svc.request('GET', '/v0/me', { token: 'not-a-token' }));
    await expect401(await svc.request('GET', '/v0/me', { headers: { authorization: `Basic ${a.token}` } }));
    const q = await svc.request('GET', '/v0/me?verbose=1', { token: a.token });
    expect(q.status).toBe(400);
    expect((await body(q)).error.message).toBe('verbose: is not a known query parameter');
  });
});

describe('DELETE /v0/sessions/current', () => {
  it('ends the presented session: the very next request with it is 401 on every kind of route', async () => {
    const a = await signup(svc);
    const { id } = await projectWithObject(a.token);
    const ending = await newToken(a);
    // Works on every kind of route until it ends (the subscribe is opened and closed again).
    expect((await svc.request('GET', `/v0/projects/${id}/storage/objects/files/a.txt`, { token: ending })).status).toBe(200);
    const live = await svc.request('GET', `/v0/projects/${id}/realtime/subscribe?channel=c`, { token: ending });
    expect(live.status).toBe(200);
    await live.body?.cancel();

    const r = await svc.request('DELETE', '/v0/sessions/current', { token: ending });
    expect(r.status).toBe(204);
    expect(await r.text()).toBe('');
    await expectRefusedEverywhere(ending, id);

    // The account's other sessions are untouched.
    expect((await svc.request('GET', `/v0/projects/${id}`, { token: a.token })).status).toBe(200);
    expect((await svc.request('GET', `/v0/projects/${id}/storage/objects/files/a.txt`, { token: a.token })).status).toBe(200);
  });

  it('is 401 without a session or with a project key, and refuses input before ending anything', async () => {
    const a = await signup(svc);
    const { key } = await projectWithObject(a.token);
    await expect401(await svc.request('DELETE', '/v0/sessions/current'));
    await expect401(await svc.request('DELETE', '/v0/sessions/current', { token: key }));
    const withBody = await svc.request('DELETE', '/v0/sessions/current', { token: a.token, body: {} });
    expect(withBody.status).toBe(400);
    expect((await body(withBody)).error.message).toBe('body: this route takes no body');
    expect((await svc.request('DELETE', '/v0/sessions/current?all=1', { token: a.token })).status).toBe(400);
    expect((await svc.request('GET', '/v0/me', { token: a.token })).status).toBe(200);
  });

  it('knows no other session path', async () => {
    const a = await signup(svc);
    const r = await svc.request('DELETE', '/v0/sessions/0123456789abcdef0123456789abcdef', { token: a.token });
    expect(r.status).toBe(404);
    expect((await svc.request('GET', '/v0/me', { token: a.token })).status).toBe(200);
  });
});

describe('POST /v0/account/secret', () => {
  it('answers a new secret once with a session, and ends every session issued before it', async () => {
    const a = await signup(svc);
    const { id } = await projectWithObject(a.token);
    const second = await newToken(a);

    const r = await svc.request('POST', '/v0/account/secret', { token: a.token, body: { account_secret: a.secret } });
    expect(r.status, await r.clone().text()).toBe(200);
    expect(r.headers.get('cache-control')).toBe('no-store');
    const rotated = await body(r);
    expect(rotated).toEqual({
      account_id: a.accountId,
      account_secret: expect.stringMatching(/^acs_[0-9a-f]{64}$/),
      token: expect.any(String),
      expires_at: expect.any(String),
      rotated_at: expect.any(String),
    });
    expect(rotated.account_secret).not.toBe(a.secret);

    await expectRefusedEverywhere(a.token, id);
    await expectRefusedEverywhere(second, id);

    // The session answered with it, and one opened with the new secret, stand.
    expect((await svc.request('GET', `/v0/projects/${id}/storage/objects/files/a.txt`, { token: rotated.token })).status).toBe(200);
    const fresh = await newToken({ ...a, secret: rotated.account_secret });
    expect((await svc.request('GET', `/v0/projects/${id}`, { token: fresh })).status).toBe(200);
    const sub = await svc.request('GET', `/v0/projects/${id}/realtime/subscribe?channel=c`, { token: fresh });
    expect(sub.status).toBe(200);
    expect(await new SseReader(sub).next()).toEqual({ comment: 'subscribed' });
    await sub.body?.cancel().catch(() => {});
  });

  it('lets the new secret sign in and refuses the old one', async () => {
    const a = await signup(svc);
    const rotated = await body(await svc.request('POST', '/v0/account/secret', { token: a.token, body: { account_secret: a.secret } }));
    await expect401(await openSession(a));
    expect((await openSession({ accountId: a.accountId, secret: rotated.account_secret })).status).toBe(201);
  });

  it('never shows the secret again: not in the account, a session, a list or a second rotation', async () => {
    const a = await signup(svc);
    await createProject(a.token);
    const first = await body(await svc.request('POST', '/v0/account/secret', { token: a.token, body: { account_secret: a.secret } }));
    const secret = first.account_secret as string;
    const later: Response[] = [
      await svc.request('GET', '/v0/me', { token: first.token }),
      await openSession({ accountId: a.accountId, secret }),
      await svc.request('GET', '/v0/projects', { token: first.token }),
      await svc.request('POST', '/v0/account/secret', { token: first.token, body: { account_secret: 'acs_' + '1'.repeat(64) } }),
    ];
    for (const r of later) expect(await r.text()).not.toContain(secret);
    const me = await body(await svc.request('GET', '/v0/me', { token: first.token }));
    expect(me.secret_rotated_at).toBe(first.rotated_at);
    expect(me.project_count).toBe(1);
  });

  it('is refused with 401 for a wrong current secret, changing nothing', async () => {
    const a = await signup(svc);
    const wrong = await svc.request('POST', '/v0/account/secret', { token: a.token, body: { account_secret: 'acs_' + '0'.repeat(64) } });
    await expect401(wrong);
    expect((await svc.request('GET', '/v0/me', { token: a.token })).status).toBe(200);
    expect((await openSession(a)).status).toBe(201);
  });

  it('refuses a missing or unknown field with 400 before anything changes', async () => {
    const a = await signup(svc);
    const missing = await svc.request('POST', '/v0/account/secret', { token: a.token });
    expect(missing.status).toBe(400);
    expect((await body(missing)).error.message).toBe('account_secret: is required');
    const unknown = await svc.request('POST', '/v0/account/secret', { token: a.token, body: { account_secret: a.secret, new_secret: 'x' } });
    expect(unknown.status).toBe(400);
    expect((await body(unknown)).error.message).toBe('new_secret: is not a known field');
    const query = await svc.request('POST', '/v0/account/secret?force=1', { token: a.token, body: { account_secret: a.secret } });
    expect(query.status).toBe(400);
    expect((await openSession(a)).status).toBe(201);
  });

  it('is 401 without a session or with a project key', async () => {
    const a = await signup(svc);
    const { key } = await projectWithObject(a.token);
    await expect401(await svc.request('POST', '/v0/account/secret', { body: { account_secret: a.secret } }));
    await expect401(await svc.request('POST', '/v0/account/secret', { token: key, body: { account_secret: a.secret } }));
    expect((await openSession(a)).status).toBe(201);
  });

  it('rotates once when two rotations race with the same session: the other is 401, its session having ended', async () => {
    const a = await signup(svc);
    const [r1, r2] = await Promise.all(
      [1, 2].map(() => svc.request('POST', '/v0/account/secret', { token: a.token, body: { account_secret: a.secret } })),
    );
    const statuses = [r1!.status, r2!.status].sort();
    expect(statuses).toEqual([200, 401]);
    const won = await body(r1!.status === 200 ? r1! : r2!);
    expect((await openSession({ accountId: a.accountId, secret: won.account_secret })).status).toBe(201);
  });

  it('ends a session opened with the old secret even when it was opened after the current one', async () => {
    const a = await signup(svc);
    const opened = await newToken(a);
    await svc.request('POST', '/v0/account/secret', { token: a.token, body: { account_secret: a.secret } });
    await expect401(await svc.request('GET', '/v0/me', { token: opened }));
  });
});
