/**
 * Input the routes do not take, and lists, over the real handlers app, DynamoDB Local and a real
 * host agent (docs/api.md "Decisions"): unknown body fields and query parameters are 400 naming
 * them, routes without a body refuse one, messages are in the project's words; every list ends with
 * `next_cursor: null` on its last item, and its cursors are sealed and bound to the list.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signup, startTestService, type TestService } from '../helpers/service.ts';

let svc: TestService;
let token: string;
let accountId: string;
let accountSecret: string;
let project: string;
let keyId: string;
beforeAll(async () => {
  svc = await startTestService();
  ({ token, accountId, secret: accountSecret } = await signup(svc));
  project = await newProject();
  expect((await svc.request('PUT', `/v0/projects/${project}/storage/buckets/inputs`, { token })).status).toBe(201);
  const k = await svc.request('POST', `/v0/projects/${project}/keys`, { token, body: { label: 'k' } });
  keyId = ((await k.json()) as { key_id: string }).key_id;
  expect((await svc.request('PUT', `/v0/projects/${project}/functions/secrets/KEPT`, { token, body: { value: 'v' } })).status).toBe(201);
});
afterAll(() => svc?.stop());

async function newProject(t = token, name = 'inputs'): Promise<string> {
  const r = await svc.request('POST', '/v0/projects', { token: t, body: { name } });
  expect(r.status, await r.clone().text()).toBe(201);
  return ((await r.json()) as { id: string }).id;
}

async function refused(r: Response): Promise<string> {
  const text = await r.text();
  expect(r.status, text).toBe(400);
  const e = JSON.parse(text) as { error: { code: string; message: string } };
  expect(e.error.code).toBe('invalid_request');
  return e.error.message;
}

const P = () => `/v0/projects/${project}`;

describe('unknown body fields', () => {
  /** Every route that takes a JSON body, with a body it would accept. */
  const routes = (): [string, string, Record<string, unknown>][] => [
    ['POST', '/v0/signup', { name: 'a' }],
    ['POST', '/v0/sessions', { account_id: accountId, account_secret: accountSecret }],
    ['POST', '/v0/projects', { name: 'a' }],
    ['POST', `${P()}/keys`, { label: 'a' }],
    ['POST', `${P()}/snapshots`, { label: 'a' }],
    ['POST', `${P()}/restore`, { snapshot_id: 'snap_0000000000000000' }],
    ['POST', `${P()}/storage/uploads`, { bucket: 'inputs', key: 'a' }],
    ['POST', `${P()}/storage/downloads`, { bucket: 'inputs', key: 'a' }],
    ['DELETE', `${P()}/storage/objects`, { bucket: 'inputs', key: 'a' }],
    ['POST', `${P()}/realtime/publish`, { channel: 'c', event: 'e', payload: 1 }],
    ['PUT', `${P()}/functions/secrets/NEW_ONE`, { value: 'v' }],
  ];

  it('are 400 on every route with a JSON body, naming the field in our words', async () => {
    for (const [method, path, body] of routes()) {
      const message = await refused(await svc.request(method, path, { token, body: { ...body, foo: 1 } }));
      expect(message, `${method} ${path}`).toBe('foo: is not a known field');
    }
    // Never with a secret value in the message.
    const value = 'sk_live_do_not_echo';
    for (const body of [{ value, valeu: value }, { valu: value }]) {
      const message = await refused(await svc.request('PUT', `${P()}/functions/secrets/ECHO`, { token, body }));
      expect(message).toMatch(/^val(eu|u): is not a known field$/);
      expect(message).not.toContain(value);
    }
  });

  it('are named before a missing field: the misspelling is what to fix', async () => {
    expect(await refused(await svc.request('POST', '/v0/projects', { token, body: { nmae: 'x' } }))).toBe('nmae: is not a known field');
  });
});

describe('routes that take no body', () => {
  const routes = (): [string, string][] => [
    ['POST', `${P()}/wakeup`],
    ['POST', `${P()}/sleep`],
    ['PUT', `${P()}/storage/buckets/other`],
    ['DELETE', `${P()}/keys/${keyId}`],
    ['DELETE', `${P()}/functions/secrets/KEPT`],
  ];

  it('refuse a body, even {}, before doing anything, and answer without one', async () => {
    for (const [method, path] of routes()) {
      for (const body of ['{}', '{"label":"x"}', 'x']) {
        expect(await refused(await svc.request(method, path, { token, body })), `${method} ${path}`).toBe('body: this route takes no body');
      }
    }
    // Nothing happened: the project is still stopped, the bucket absent, the key and secret kept.
    const p = (await (await svc.request('GET', P(), { token })).json()) as { state: string };
    expect(p.state).toBe('stopped');
    const buckets = (await (await svc.request('GET', `${P()}/storage/buckets`, { token })).json()) as { buckets: { name: string }[] };
    expect(buckets.buckets.map((b) => b.name)).toEqual(['inputs']);
    const keys = (await (await svc.request('GET', `${P()}/keys`, { token })).json()) as { keys: { revoked_at: string | null }[] };
    expect(keys.keys[0]!.revoked_at).toBeNull();
    expect((await svc.request('GET', `${P()}/functions/secrets/KEPT`, { token })).status).toBe(200);
    // No body, or an empty one, is no body.
    expect((await svc.request('PUT', `${P()}/storage/buckets/empty`, { token, headers: { 'content-length': '0' } })).status).toBe(201);
    expect((await svc.request('PUT', `${P()}/storage/buckets/empty`, { token, body: '' })).status).toBe(200);
  });

  it('refuse a GET that declares a body', async () => {
    for (const path of [P(), `${P()}/keys`, '/v0/projects', `${P()}/head`, `${P()}/receipts`, `${P()}/storage/objects/inputs/k`]) {
      const r = await svc.request('GET', path, { token, headers: { 'content-length': '2' } });
      expect(await refused(r), path).toBe('body: this route takes no body');
    }
  });
});

describe('query parameters', () => {
  it('a route does not know are 400 naming them, on lists and on every other route', async () => {
    const cases: [string, string, unknown?][] = [
      ['GET', '/v0/projects?foo=1'],
      ['GET', `${P()}/keys?limit=1&foo=1`],
      ['GET', `${P()}/storage/buckets?foo=1`],
      ['GET', `${P()}/storage/objects?bucket=inputs&foo=1`],
      ['GET', `${P()}/receipts?foo=1`],
      ['GET', `${P()}/functions/secrets?foo=1`],
      ['GET', `${P()}/snapshots?foo=1`],
      ['GET', `${P()}?foo=1`],
      ['GET', `${P()}/head?foo=1`],
      ['GET', `${P()}/realtime/subscribe?channel=c&foo=1`],
      ['GET', `${P()}/storage/objects/inputs/k?foo=1`],
      ['PUT', `${P()}/storage/objects/inputs/k?foo=1`, 'bytes'],
      ['POST', `${P()}/wakeup?foo=1`],
      ['POST', `/v0/projects?foo=1`, { name: 'q' }],
      ['POST', `${P()}/keys?foo=1`, {}],
    ];
    for (const [method, path, body] of cases) {
      expect(await refused(await svc.request(method, path, { token, body })), `${method} ${path}`).toBe('foo: is not a known query parameter');
    }
  });

  it('that must be single are 400 when repeated', async () => {
    expect(await refused(await svc.request('GET', '/v0/projects?limit=1&limit=1', { token }))).toBe('limit: must be given once');
    expect(await refused(await svc.request('GET', `${P()}/storage/objects?bucket=inputs&bucket=inputs`, { token }))).toBe('bucket: must be given once');
  });

  it('say a bad limit in our words', async () => {
    for (const limit of ['abc', '0', '1001', '1.5', '', '-1']) {
      expect(await refused(await svc.request('GET', `/v0/projects?limit=${limit}`, { token })), limit).toBe('limit: must be a whole number from 1 to 1000');
    }
  });
});

describe('names', () => {
  it('of only spaces are refused, for projects and labels; others are kept exactly as given', async () => {
    expect(await refused(await svc.request('POST', '/v0/projects', { token, body: { name: '   ' } }))).toBe('name: must not be blank');
    expect(await refused(await svc.request('POST', `${P()}/keys`, { token, body: { label: ' ' } }))).toBe('label: must not be blank');
    const r = await svc.request('POST', '/v0/projects', { token, body: { name: '  padded ' } });
    expect(r.status).toBe(201);
    expect(((await r.json()) as { name: string }).name).toBe('  padded ');
  });
});

// ---------------------------------------------------------------------------------------------
// Lists

interface Listed {
  /** Path of the list (query string included when the list needs one), for `token`. */
  path: string;
  /** Field of the answer holding the items. */
  field: string;
  /** The token that may read it. */
  token: string;
  /** Ids the list is scoped to; none of them may be readable in a cursor. */
  scope: string[];
}

/** Makes a list of exactly two items of each kind, in a fresh project (or account). */
async function twoOfEach(): Promise<Record<string, Listed>> {
  const a = await signup(svc);
  await newProject(a.token, 'one');
  const p = await newProject(a.token, 'two');
  const base = `/v0/projects/${p}`;
  const send = (method: string, path: string, body?: unknown) => svc.request(method, `${base}${path}`, { token: a.token, body });
  for (const b of ['first', 'second']) expect((await send('PUT', `/storage/buckets/${b}`)).status).toBe(201);
  // Upload tickets make (pending) rows without receipts; the two secrets make the two receipts.
  for (const k of ['x', 'y']) expect((await send('POST', '/storage/uploads', { bucket: 'first', key: k })).status).toBe(201);
  for (const n of ['A', 'B']) expect((await send('PUT', `/functions/secrets/${n}`, { value: 'v' })).status).toBe(201);
  for (const l of ['a', 'b']) expect((await send('POST', '/keys', { label: l })).status).toBe(201);
  expect((await send('POST', '/wakeup')).status).toBe(200);
  expect((await send('POST', '/sleep')).status).toBe(200);
  for (const l of ['a', 'b']) expect((await send('POST', '/snapshots', { label: l })).status).toBe(201);
  const scope = [p, a.accountId];
  return {
    projects: { path: '/v0/projects', field: 'projects', token: a.token, scope },
    keys: { path: `${base}/keys`, field: 'keys', token: a.token, scope },
    buckets: { path: `${base}/storage/buckets`, field: 'buckets', token: a.token, scope },
    objects: { path: `${base}/storage/objects?bucket=first`, field: 'objects', token: a.token, scope },
    receipts: { path: `${base}/receipts`, field: 'receipts', token: a.token, scope },
    secrets: { path: `${base}/functions/secrets`, field: 'secrets', token: a.token, scope },
    snapshots: { path: `${base}/snapshots`, field: 'snapshots', token: a.token, scope },
  };
}

async function page(l: Listed, query: string): Promise<{ items: unknown[]; next_cursor: string | null }> {
  const r = await svc.request('GET', `${l.path}${l.path.includes('?') ? '&' : '?'}${query}`, { token: l.token });
  const text = await r.text();
  expect(r.status, text).toBe(200);
  const body = JSON.parse(text) as Record<string, unknown>;
  return { items: body[l.field] as unknown[], next_cursor: body.next_cursor as string | null };
}

function base64UrlText(cursor: string): string {
  return Buffer.from(cursor, 'base64url').toString('latin1');
}

describe('lists', () => {
  let lists: Record<string, Listed>;
  beforeAll(async () => {
    lists = await twoOfEach();
  }, 60_000);

  const kinds = ['projects', 'keys', 'buckets', 'objects', 'receipts', 'secrets', 'snapshots'];

  it('answer next_cursor null on a page that ends at the last item, on every list', async () => {
    for (const kind of kinds) {
      const l = lists[kind]!;
      const whole = await page(l, 'limit=2');
      expect(whole.items, kind).toHaveLength(2);
      expect(whole.next_cursor, kind).toBeNull();
      const first = await page(l, 'limit=1');
      expect(first.items, kind).toHaveLength(1);
      expect(first.next_cursor, kind).toEqual(expect.any(String));
      const second = await page(l, `limit=1&cursor=${first.next_cursor}`);
      expect(second.items, kind).toHaveLength(1);
      expect(second.next_cursor, kind).toBeNull();
      expect(second.items[0], kind).not.toEqual(first.items[0]);
    }
  });

  it.each(kinds)('%s: a cursor shows no table key or id, and a tampered one is 400', async (kind) => {
    const l = lists[kind]!;
    const { next_cursor: cursor } = await page(l, 'limit=1');
    for (const text of [cursor!, base64UrlText(cursor!)]) {
      for (const hidden of ['PRJ#', 'ACCT#', '"pk"', '"sk"', ...l.scope]) expect(text).not.toContain(hidden);
    }
    const at = Math.floor(cursor!.length / 2);
    const tampered = cursor!.slice(0, at) + (cursor![at] === 'A' ? 'B' : 'A') + cursor!.slice(at + 1);
    for (const bad of [tampered, 'eyJ4IjoxfQ', `${cursor}x`]) {
      expect(await refused(await svc.request('GET', `${l.path}${l.path.includes('?') ? '&' : '?'}cursor=${bad}`, { token: l.token }))).toBe(
        'cursor: is not valid',
      );
    }
  });

  it('refuse a cursor of another kind of list of the same project', async () => {
    const { next_cursor: keysCursor } = await page(lists.keys!, 'limit=1');
    for (const kind of ['receipts', 'secrets', 'snapshots', 'buckets', 'objects']) {
      const l = lists[kind]!;
      const r = await svc.request('GET', `${l.path}${l.path.includes('?') ? '&' : '?'}cursor=${keysCursor}`, { token: l.token });
      expect(await refused(r), kind).toBe('cursor: is not valid');
    }
  });

  it("refuse a cursor of another project's, bucket's or account's list", async () => {
    const other = await twoOfEach();
    for (const kind of kinds) {
      const { next_cursor: foreign } = await page(other[kind]!, 'limit=1');
      const l = lists[kind]!;
      const r = await svc.request('GET', `${l.path}${l.path.includes('?') ? '&' : '?'}cursor=${foreign}`, { token: l.token });
      expect(await refused(r), kind).toBe('cursor: is not valid');
    }
    const { next_cursor: objects } = await page(lists.objects!, 'limit=1');
    const bucketPath = lists.objects!.path.replace('bucket=first', 'bucket=second');
    expect(await refused(await svc.request('GET', `${bucketPath}&cursor=${objects}`, { token: lists.objects!.token }))).toBe('cursor: is not valid');
  }, 60_000);
});
