/**
 * Function secrets end to end against DynamoDB Local and a real host agent (docs/secrets.md): the contract's
 * PUT, list/read/delete, receipts, versions under concurrency, encryption at rest bound to project and
 * name, the agent's function-env operation, and the "never revealed" sweep over logs and items.
 */
import { randomBytes } from 'node:crypto';
import { ScanCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { buildDeps } from '../../handlers/deps.ts';
import { createApp } from '../../handlers/index.ts';
import { startAgent } from '../../host-agent/agent.ts';
import { functionEnvironment } from '../../host-agent/routes/function-env.ts';
import { issueInternalToken } from '../../shared/auth.ts';
import { loadSettings } from '../../shared/config.ts';
import { loadSealedSecrets, putSecret } from '../../shared/db/secrets.ts';
import { openSecret, parseKeyRing, sealSecret, SecretDecryptError } from '../../shared/secrets-crypto.ts';
import { REPO } from '../helpers/env.ts';
import { signup, startTestService, type TestService } from '../helpers/service.ts';

let svc: TestService;
let token: string;
let accountId: string;
beforeAll(async () => {
  svc = await startTestService();
  ({ token, accountId } = await signup(svc));
});
afterAll(() => svc?.stop());

const RFC3339_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;
const ORIGIN = 'https://api.example.test';

async function newProject(t = token): Promise<string> {
  const r = await svc.request('POST', '/v0/projects', { token: t, body: { name: 'fn' } });
  expect(r.status).toBe(201);
  return ((await r.json()) as { id: string }).id;
}

const secretPath = (project: string, name?: string) =>
  `/v0/projects/${project}/functions/secrets${name === undefined ? '' : `/${name}`}`;

function put(project: string, name: string, body: unknown, t: string | undefined = token): Promise<Response> {
  return svc.request('PUT', secretPath(project, name), { token: t, body });
}

async function errorOf(r: Response): Promise<{ code: string; message: string }> {
  return ((await r.json()) as { error: { code: string; message: string } }).error;
}

/** Calls the agent's internal function-env operation as the handlers would, with an internal token. */
async function functionEnv(project: string, body: unknown = { function_name: 'hello', cloud_origin: ORIGIN }, auth?: string): Promise<Response> {
  const t = auth ?? (await issueInternalToken(svc.env.SVCD_INTERNAL_SECRET!));
  return fetch(new URL(`/internal/v1/projects/${project}/function-env`, svc.agent.internalUrl), {
    method: 'POST',
    headers: { authorization: `Bearer ${t}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

async function envOf(project: string, functionName = 'hello'): Promise<Record<string, string>> {
  const r = await functionEnv(project, { function_name: functionName, cloud_origin: ORIGIN });
  expect(r.status).toBe(200);
  return ((await r.json()) as { env: Record<string, string> }).env;
}

describe('PUT /v0/projects/{id}/functions/secrets/{name}', () => {
  it('creates with 201 and version 1, answering exactly the metadata fields', async () => {
    const p = await newProject();
    const r = await put(p, 'API_KEY', { value: 'v1' });
    expect(r.status).toBe(201);
    const s = (await r.json()) as Record<string, unknown>;
    expect(Object.keys(s).sort()).toEqual(['created_at', 'name', 'project', 'updated_at', 'version']);
    expect(s).toMatchObject({ project: p, name: 'API_KEY', version: 1 });
    expect(s.created_at).toMatch(RFC3339_UTC);
    expect(s.updated_at).toBe(s.created_at);
  });

  it('rotates with 200 and version + 1, keeping created_at', async () => {
    const p = await newProject();
    const first = (await (await put(p, 'API_KEY', { value: 'v1' })).json()) as Record<string, string>;
    await new Promise((r) => setTimeout(r, 5));
    const r2 = await put(p, 'API_KEY', { value: 'v2' });
    expect(r2.status).toBe(200);
    const second = (await r2.json()) as Record<string, unknown>;
    expect(second).toMatchObject({ project: p, name: 'API_KEY', version: 2, created_at: first.created_at });
    expect(Date.parse(second.updated_at as string)).toBeGreaterThan(Date.parse(first.created_at!));
    const r3 = await put(p, 'API_KEY', { value: 'v3' });
    expect(r3.status).toBe(200);
    expect(((await r3.json()) as { version: number }).version).toBe(3);
  });

  it('never loses an increment under concurrent rotations', async () => {
    const p = await newProject();
    const n = 8;
    const answers = await Promise.all(Array.from({ length: n }, (_, i) => put(p, 'RACE', { value: `v${i}` })));
    const statuses = answers.map((r) => r.status).sort();
    expect(statuses).toEqual([200, 200, 200, 200, 200, 200, 200, 201]);
    const versions = await Promise.all(answers.map(async (r) => ((await r.json()) as { version: number }).version));
    expect(versions.sort((a, b) => a - b)).toEqual(Array.from({ length: n }, (_, i) => i + 1));
    const now = (await (await svc.request('GET', secretPath(p, 'RACE'), { token })).json()) as { version: number };
    expect(now.version).toBe(n);
  });

  it('accepts names on the contract pattern, up to 64 characters', async () => {
    const p = await newProject();
    for (const name of ['A', 'A_1', `Z${'9'.repeat(63)}`, 'DATABASE_URL']) {
      expect((await put(p, name, { value: 'x' })).status).toBe(201);
    }
  });

  it('refuses names off the pattern with 400 naming the name', async () => {
    const p = await newProject();
    for (const name of ['api_key', '1KEY', '_KEY', `A${'B'.repeat(64)}`, 'A-B', 'A%20B', 'K%C3%89Y']) {
      const r = await put(p, name, { value: 'x' });
      expect(r.status).toBe(400);
      const e = await errorOf(r);
      expect(e.code).toBe('invalid_request');
      expect(e.message).toMatch(/^name: /);
    }
  });

  it('refuses PROJECT_ID, FUNCTION_NAME and CLOUD_ORIGIN with 400', async () => {
    const p = await newProject();
    for (const name of ['PROJECT_ID', 'FUNCTION_NAME', 'CLOUD_ORIGIN']) {
      const r = await put(p, name, { value: 'shadow' });
      expect(r.status).toBe(400);
      expect((await errorOf(r)).message).toMatch(/^name: is reserved/);
    }
    const list = (await (await svc.request('GET', secretPath(p), { token })).json()) as { secrets: unknown[] };
    expect(list.secrets).toEqual([]);
  });

  it('accepts values up to 4096 characters, counted as characters rather than bytes', async () => {
    const p = await newProject();
    expect((await put(p, 'ASCII', { value: 'a'.repeat(4096) })).status).toBe(201);
    // 4096 characters outside the BMP: 8192 UTF-16 units, 16384 UTF-8 bytes.
    expect((await put(p, 'ASTRAL', { value: '𝄞'.repeat(4096) })).status).toBe(201);
    expect((await put(p, 'EMPTY', { value: '' })).status).toBe(201);
    expect((await envOf(p)).ASTRAL).toBe('𝄞'.repeat(4096));
  });

  it.each([
    ['a missing value', {}, /^value: is required$/],
    ['a value that is not a string', { value: 42 }, /^value: /],
    ['a null value', { value: null }, /^value: /],
    ['a value of 4097 characters', { value: 'a'.repeat(4097) }, /^value: must be at most 4096 characters$/],
    ['a value of 4097 astral characters', { value: '𝄞'.repeat(4097) }, /^value: must be at most 4096 characters$/],
    ['a value with NUL', { value: 'a\u0000b' }, /^value: must not contain NUL$/],
    ['a lone surrogate', { value: 'a\ud800b' }, /^value: must be valid UTF-8/],
    ['an unknown field', { value: 'x', extra: 1 }, /^extra: is not a known field$/],
  ])('refuses %s with 400 naming the field', async (_what, body, pattern) => {
    const p = await newProject();
    const r = await put(p, 'KEY', body);
    expect(r.status).toBe(400);
    const e = await errorOf(r);
    expect(e.code).toBe('invalid_request');
    expect(e.message).toMatch(pattern);
  });

  it('refuses a body that is not JSON or not valid UTF-8', async () => {
    const p = await newProject();
    expect((await put(p, 'KEY', '{"value":')).status).toBe(400);
    const bad = await svc.app.fetch(
      new Request(`http://svc.test${secretPath(p, 'KEY')}`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: new Uint8Array([0x7b, 0x22, 0x76, 0x61, 0x6c, 0x75, 0x65, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d]),
      }),
    );
    expect(bad.status).toBe(400);
    expect((await errorOf(bad)).message).toMatch(/UTF-8/);
  });

  it('requires a session: none is 401 with the challenge, a project key is 401', async () => {
    const p = await newProject();
    const anonymous = await svc.request('PUT', secretPath(p, 'KEY'), { body: { value: 'x' } });
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('www-authenticate')).toBe('Bearer realm="svc-cloud"');
    const projectKey = `svc1_${randomBytes(16).toString('hex')}_${randomBytes(32).toString('hex')}`;
    for (const [method, path, body] of [
      ['PUT', secretPath(p, 'KEY'), { value: 'x' }],
      ['GET', secretPath(p), undefined],
      ['GET', secretPath(p, 'KEY'), undefined],
      ['DELETE', secretPath(p, 'KEY'), undefined],
    ] as const) {
      const r = await svc.request(method, path, { token: projectKey, body });
      expect(r.status).toBe(401);
      expect((await errorOf(r)).code).toBe('authentication_required');
    }
  });

  it("answers 404 on another owner's project, exactly as on a project that does not exist", async () => {
    const p = await newProject();
    const other = (await signup(svc)).token;
    for (const project of [p, 'prj_ffffffffffffffff']) {
      const r = await put(project, 'KEY', { value: 'x' }, other);
      expect(r.status).toBe(404);
      expect((await errorOf(r)).code).toBe('not_found');
    }
    expect((await svc.request('GET', secretPath(p), { token: other })).status).toBe(404);
    expect((await svc.request('DELETE', secretPath(p, 'KEY'), { token: other })).status).toBe(404);
  });

  it('answers 501 when the deployment has no secrets key, after validating the request', async () => {
    const p = await newProject();
    const { SVCD_SECRETS_KEYS: _omit, ...env } = svc.env;
    const keyless = createApp(buildDeps(env, () => {}));
    const call = (name: string, body: unknown) =>
      keyless.fetch(
        new Request(`http://svc.test${secretPath(p, name)}`, {
          method: 'PUT',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify(body),
        }),
      );
    const r = await call('KEY', { value: 'x' });
    expect(r.status).toBe(501);
    expect((await errorOf(r)).code).toBe('not_implemented');
    expect((await call('KEY', { value: 'a\u0000' })).status).toBe(400);
  });
});

describe('GET and DELETE /v0/projects/{id}/functions/secrets', () => {
  it('lists metadata only, by name, paginated', async () => {
    const p = await newProject();
    for (const name of ['C_KEY', 'A_KEY', 'B_KEY']) await put(p, name, { value: `value of ${name}` });
    const r = await svc.request('GET', secretPath(p), { token });
    expect(r.status).toBe(200);
    const body = (await r.json()) as { secrets: Record<string, unknown>[]; next_cursor: string | null };
    expect(body.secrets.map((s) => s.name)).toEqual(['A_KEY', 'B_KEY', 'C_KEY']);
    expect(body.next_cursor).toBeNull();
    for (const s of body.secrets) expect(Object.keys(s).sort()).toEqual(['created_at', 'name', 'project', 'updated_at', 'version']);

    const page1 = (await (await svc.request('GET', `${secretPath(p)}?limit=2`, { token })).json()) as typeof body;
    expect(page1.secrets.map((s) => s.name)).toEqual(['A_KEY', 'B_KEY']);
    expect(page1.next_cursor).toEqual(expect.any(String));
    const page2 = (await (await svc.request('GET', `${secretPath(p)}?limit=2&cursor=${page1.next_cursor}`, { token })).json()) as typeof body;
    expect(page2.secrets.map((s) => s.name)).toEqual(['C_KEY']);
  });

  it("never lists another project's secrets, and refuses a cursor from another project", async () => {
    const p1 = await newProject();
    const p2 = await newProject();
    await put(p1, 'ONLY_P1', { value: 'x' });
    await put(p1, 'ALSO_P1', { value: 'x' });
    const list2 = (await (await svc.request('GET', secretPath(p2), { token })).json()) as { secrets: unknown[] };
    expect(list2.secrets).toEqual([]);
    const page = (await (await svc.request('GET', `${secretPath(p1)}?limit=1`, { token })).json()) as { next_cursor: string };
    const r = await svc.request('GET', `${secretPath(p2)}?cursor=${page.next_cursor}`, { token });
    expect(r.status).toBe(400);
  });

  it('reads one secret by name; an absent one is 404', async () => {
    const p = await newProject();
    const created = await (await put(p, 'ONE', { value: 'x' })).json();
    const r = await svc.request('GET', secretPath(p, 'ONE'), { token });
    expect(r.status).toBe(200);
    expect(await r.json()).toEqual(created);
    expect((await svc.request('GET', secretPath(p, 'NONE'), { token })).status).toBe(404);
  });

  it('deletes, answering the removed metadata; a second delete is 404; a new put starts again at version 1', async () => {
    const p = await newProject();
    await put(p, 'GONE', { value: 'a' });
    const rotated = await (await put(p, 'GONE', { value: 'b' })).json();
    const r = await svc.request('DELETE', secretPath(p, 'GONE'), { token });
    expect(r.status).toBe(200);
    expect(await r.json()).toEqual(rotated);
    expect((await svc.request('GET', secretPath(p, 'GONE'), { token })).status).toBe(404);
    const again = await svc.request('DELETE', secretPath(p, 'GONE'), { token });
    expect(again.status).toBe(404);
    expect((await errorOf(again)).code).toBe('not_found');
    const recreated = await put(p, 'GONE', { value: 'c' });
    expect(recreated.status).toBe(201);
    expect(((await recreated.json()) as { version: number }).version).toBe(1);
  });
});

describe('receipts', () => {
  it('records every put and delete with the name only, the account and the request id', async () => {
    const p = await newProject();
    const r1 = await put(p, 'RCPT_KEY', { value: 'first-value' });
    const r2 = await put(p, 'RCPT_KEY', { value: 'second-value' });
    const r3 = await svc.request('DELETE', secretPath(p, 'RCPT_KEY'), { token });
    // Refused requests write nothing.
    await put(p, 'PROJECT_ID', { value: 'x' });
    await svc.request('DELETE', secretPath(p, 'NEVER_SET'), { token });

    const list = (await (await svc.request('GET', `/v0/projects/${p}/receipts`, { token })).json()) as {
      receipts: Record<string, string>[];
    };
    const expected = [
      { op: 'secret.delete', request_id: r3.headers.get('x-request-id') },
      { op: 'secret.put', request_id: r2.headers.get('x-request-id') },
      { op: 'secret.put', request_id: r1.headers.get('x-request-id') },
    ];
    expect(list.receipts).toHaveLength(3);
    list.receipts.forEach((rc, i) => {
      expect(rc).toMatchObject({ ...expected[i], project: p, target: 'RCPT_KEY', actor: accountId });
      expect(rc.id).toMatch(/^rcpt_[0-9a-f]{16}$/);
      expect(rc.at).toMatch(RFC3339_UTC);
    });
    expect(JSON.stringify(list)).not.toMatch(/first-value|second-value/);
  });
});

describe('encryption at rest (repository)', () => {
  it('stores ciphertext, nonce and key id, and nothing in clear', async () => {
    const p = await newProject();
    await put(p, 'AT_REST', { value: 'plain-text-at-rest' });
    const [stored] = await loadSealedSecrets(svc.db, p);
    expect(stored!.sealed.key_id).toBe('k1');
    expect(Buffer.from(stored!.sealed.nonce, 'base64')).toHaveLength(12);
    expect(Buffer.from(stored!.sealed.ciphertext, 'base64').includes(Buffer.from('plain-text-at-rest'))).toBe(false);
    const ring = parseKeyRing(loadSettings(svc.env))!;
    expect(await openSecret(ring, p, 'AT_REST', stored!.sealed)).toBe('plain-text-at-rest');
  });

  it('a ciphertext moved to another project or another name fails to decrypt', async () => {
    const p1 = await newProject();
    const p2 = await newProject();
    await put(p1, 'MOVED', { value: 'moving-value' });
    const [original] = await loadSealedSecrets(svc.db, p1);
    const change = { actor: accountId, requestId: 'req_test', at: new Date().toISOString() };
    await putSecret(svc.db, { ...change, project: p2, name: 'MOVED' }, original!.sealed);
    await putSecret(svc.db, { ...change, project: p1, name: 'RENAMED' }, original!.sealed);

    const ring = parseKeyRing(loadSettings(svc.env))!;
    const [inP2] = await loadSealedSecrets(svc.db, p2);
    await expect(openSecret(ring, p2, 'MOVED', inP2!.sealed)).rejects.toThrow(SecretDecryptError);
    const renamed = (await loadSealedSecrets(svc.db, p1)).find((s) => s.name === 'RENAMED')!;
    await expect(openSecret(ring, p1, 'RENAMED', renamed.sealed)).rejects.toThrow(SecretDecryptError);
    // The agent refuses to build an environment with it rather than run without the secret.
    const r = await functionEnv(p2);
    expect(r.status).toBe(500);
    expect((await errorOf(r)).code).toBe('internal');
  });
});

describe('function environment (host agent)', () => {
  it('answers the decrypted secrets by name, then PROJECT_ID, FUNCTION_NAME and CLOUD_ORIGIN last', async () => {
    const p = await newProject();
    await put(p, 'ZED', { value: 'z' });
    await put(p, 'ALPHA', { value: 'a=b; "quoted"\nline' });
    const r = await functionEnv(p, { function_name: 'send-mail', cloud_origin: ORIGIN });
    expect(r.status).toBe(200);
    expect(r.headers.get('cache-control')).toBe('no-store');
    const { env } = (await r.json()) as { env: Record<string, string> };
    expect(Object.entries(env)).toEqual([
      ['ALPHA', 'a=b; "quoted"\nline'],
      ['ZED', 'z'],
      ['PROJECT_ID', p],
      ['FUNCTION_NAME', 'send-mail'],
      ['CLOUD_ORIGIN', ORIGIN],
    ]);
  });

  it('sees a rotation and a delete on the very next call', async () => {
    const p = await newProject();
    await put(p, 'TOKEN', { value: 'old' });
    expect((await envOf(p)).TOKEN).toBe('old');
    await put(p, 'TOKEN', { value: 'new' });
    expect((await envOf(p)).TOKEN).toBe('new');
    await svc.request('DELETE', secretPath(p, 'TOKEN'), { token });
    expect(await envOf(p)).toEqual({ PROJECT_ID: p, FUNCTION_NAME: 'hello', CLOUD_ORIGIN: ORIGIN });
  });

  it("never mixes in another project's secrets", async () => {
    const p1 = await newProject();
    const p2 = await newProject();
    await put(p1, 'MINE', { value: 'p1' });
    expect(await envOf(p2)).toEqual({ PROJECT_ID: p2, FUNCTION_NAME: 'hello', CLOUD_ORIGIN: ORIGIN });
  });

  it('keeps the reserved names authoritative even if such an item was stored', async () => {
    const p = await newProject();
    // Bypass the handler's check, as a row written by an older version could.
    const ring = parseKeyRing(loadSettings(svc.env))!;
    const change = { actor: accountId, requestId: 'req_test', at: new Date().toISOString(), project: p };
    await putSecret(svc.db, { ...change, name: 'PROJECT_ID' }, await sealSecret(ring, p, 'PROJECT_ID', 'prj_shadowed'));
    await putSecret(svc.db, { ...change, name: 'AAA' }, await sealSecret(ring, p, 'AAA', '1'));
    const env = await envOf(p, 'fn');
    expect(Object.entries(env)).toEqual([
      ['AAA', '1'],
      ['PROJECT_ID', p],
      ['FUNCTION_NAME', 'fn'],
      ['CLOUD_ORIGIN', ORIGIN],
    ]);
  });

  it('keeps reading secrets sealed with an older master key after the ring is rotated, and refuses once the key is gone', async () => {
    const p = await newProject();
    await put(p, 'OLD_KEY_SECRET', { value: 'sealed-with-k1' });
    const k1 = svc.env.SVCD_SECRETS_KEYS!;
    const rotated = parseKeyRing({ SVCD_SECRETS_KEYS: `k2:${randomBytes(32).toString('base64')},${k1}`, SVCD_SECRETS_KEY: undefined });
    const target = { projectId: p, functionName: 'f', cloudOrigin: ORIGIN };
    expect((await functionEnvironment({ ...svc.agent.ctx, secrets: rotated }, target)).OLD_KEY_SECRET).toBe('sealed-with-k1');
    const withoutK1 = parseKeyRing({ SVCD_SECRETS_KEYS: `k2:${randomBytes(32).toString('base64')}`, SVCD_SECRETS_KEY: undefined });
    await expect(functionEnvironment({ ...svc.agent.ctx, secrets: withoutK1 }, target)).rejects.toThrow(/key id "k1", which is not in the key ring/);
  });

  it('refuses to build an environment without a key ring when the project has secrets', async () => {
    const p = await newProject();
    const target = { projectId: p, functionName: 'f', cloudOrigin: ORIGIN };
    const keyless = { ...svc.agent.ctx, secrets: null };
    expect(Object.keys(await functionEnvironment(keyless, target))).toEqual(['PROJECT_ID', 'FUNCTION_NAME', 'CLOUD_ORIGIN']);
    await put(p, 'NEEDS_KEY', { value: 'x' });
    await expect(functionEnvironment(keyless, target)).rejects.toThrow(/no SVCD_SECRETS_KEYS/);
  });

  it('refuses a call without a valid internal token before any work', async () => {
    const p = await newProject();
    expect((await functionEnv(p, undefined, 'not-a-token')).status).toBe(401);
    const forged = await issueInternalToken(randomBytes(32).toString('hex'));
    expect((await functionEnv(p, undefined, forged)).status).toBe(401);
  });

  it.each([
    ['a bad function name', { function_name: '../x', cloud_origin: ORIGIN }, /^function_name: /],
    ['a missing function name', { cloud_origin: ORIGIN }, /^function_name: is required$/],
    ['an origin with a path', { function_name: 'f', cloud_origin: `${ORIGIN}/v0` }, /^cloud_origin: /],
    ['an origin with a trailing slash', { function_name: 'f', cloud_origin: `${ORIGIN}/` }, /^cloud_origin: /],
    ['a non-http origin', { function_name: 'f', cloud_origin: 'file:///etc' }, /^cloud_origin: /],
  ])('refuses %s with 400', async (_what, body, pattern) => {
    const p = await newProject();
    const r = await functionEnv(p, body);
    expect(r.status).toBe(400);
    expect((await errorOf(r)).message).toMatch(pattern);
  });

  it('refuses a malformed project id with 400', async () => {
    const r = await functionEnv('prj_nothex');
    expect(r.status).toBe(400);
  });

  it('fails the agent start on a bad key ring, naming the setting', async () => {
    const settings = loadSettings({ ...svc.env, SVCD_SECRETS_KEYS: `k1:${randomBytes(16).toString('base64')}` });
    await expect(startAgent(settings, { db: svc.db, cwd: REPO, log: () => {} })).rejects.toThrow(
      /^invalid setting SVCD_SECRETS_KEYS: key "k1" must be 32 bytes/,
    );
  });
});

describe('never revealed', () => {
  it('a secret value reaches no log line, no answer but the function environment, and no stored item but its ciphertext', async () => {
    const value = `NEVER-REVEAL-${randomBytes(12).toString('hex')}`;
    const rotated = `${value}-ROTATED`;
    const outputs: string[] = [];
    const spies = (['log', 'info', 'warn', 'error', 'debug'] as const).map((m) =>
      vi.spyOn(console, m).mockImplementation((...args: unknown[]) => void outputs.push(args.map(String).join(' '))),
    );
    const answers: string[] = [];
    const keep = async (r: Response) => {
      answers.push(`${r.status} ${JSON.stringify([...r.headers])} ${await r.clone().text()}`);
      return r;
    };
    const logsBefore = svc.logs.length;
    try {
      const p = await newProject();
      // The whole flow, refusals included: every message they carry must stay value-free.
      await keep(await put(p, 'REVEAL_ME', { value }));
      await keep(await put(p, 'REVEAL_ME', { value: rotated }));
      await keep(await put(p, 'PROJECT_ID', { value }));
      await keep(await put(p, 'lower', { value }));
      await keep(await put(p, 'REVEAL_ME', { value: `${value}\u0000` }));
      await keep(await put(p, 'REVEAL_ME', { value: value.padEnd(5000, 'x') }));
      await keep(await put(p, 'REVEAL_ME', { value, unknown: value }));
      await keep(await put(p, 'REVEAL_ME', { value: [value] }));
      await keep(await put(p, 'REVEAL_ME', `{"value":"${value}"`));
      await keep(await put(p, 'REVEAL_ME', { value }, `svc1_${'a'.repeat(32)}_${'b'.repeat(64)}`));
      await keep(await svc.request('GET', secretPath(p), { token }));
      await keep(await svc.request('GET', secretPath(p, 'REVEAL_ME'), { token }));
      await keep(await svc.request('GET', `/v0/projects/${p}/receipts`, { token }));

      // The one place the value may appear: the environment the agent hands to an invocation.
      const env = await envOf(p);
      expect(env.REVEAL_ME).toBe(rotated);
      // An agent failure path (a ciphertext moved under another name) must log no value either.
      const [sealed] = await loadSealedSecrets(svc.db, p);
      await putSecret(svc.db, { project: p, name: 'COPIED', actor: accountId, requestId: 'req_test', at: new Date().toISOString() }, sealed!.sealed);
      const failed = await functionEnv(p);
      expect(failed.status).toBe(500);
      answers.push(await failed.text());
      await keep(await svc.request('DELETE', secretPath(p, 'COPIED'), { token }));
      await keep(await svc.request('DELETE', secretPath(p, 'REVEAL_ME'), { token }));
      await keep(await svc.request('GET', `/v0/projects/${p}/receipts`, { token }));
    } finally {
      for (const s of spies) s.mockRestore();
    }

    const logs = svc.logs.slice(logsBefore);
    // The failure above was logged (so the sweep looks at real lines), naming the secret only.
    expect(logs.some((l) => l.includes('COPIED'))).toBe(true);
    for (const text of [...logs, ...outputs, ...answers]) {
      expect(text).not.toContain(value);
    }

    const items: Record<string, unknown>[] = [];
    let start: Record<string, unknown> | undefined;
    do {
      const page = await svc.db.doc.send(new ScanCommand({ TableName: svc.db.table, ConsistentRead: true, ExclusiveStartKey: start }));
      items.push(...((page.Items ?? []) as Record<string, unknown>[]));
      start = page.LastEvaluatedKey;
    } while (start);
    expect(items.some((i) => i.type === 'receipt' && i.target === 'REVEAL_ME')).toBe(true);
    const encodings = [value, Buffer.from(value).toString('base64'), Buffer.from(value).toString('hex')];
    for (const item of items) {
      const { ciphertext, ...rest } = item;
      const text = JSON.stringify(rest);
      for (const e of encodings) expect(text).not.toContain(e);
      if (typeof ciphertext === 'string') {
        expect(Buffer.from(ciphertext, 'base64').includes(Buffer.from(value))).toBe(false);
      }
    }
  });
});
