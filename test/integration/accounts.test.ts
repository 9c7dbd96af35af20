import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { putInvite } from '../../shared/db/accounts.ts';
import { signup, startTestService, type TestService } from '../helpers/service.ts';

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService();
});
afterAll(() => svc?.stop());

describe('POST /v0/signup', () => {
  it('creates an account and answers its secret once with a session token', async () => {
    const r = await svc.request('POST', '/v0/signup', { body: { name: 'Ada' } });
    expect(r.status).toBe(201);
    expect(r.headers.get('x-request-id')).toMatch(/^req_[0-9a-f]{16}$/);
    const b = (await r.json()) as Record<string, string>;
    expect(b.account_id).toMatch(/^acct_[0-9a-f]{16}$/);
    expect(b.account_secret).toMatch(/^acs_[0-9a-f]{64}$/);
    expect(typeof b.token).toBe('string');
    expect(Date.parse(b.expires_at!)).toBeGreaterThan(Date.now());
    expect(b.expires_at).toMatch(/Z$/);
  });

  it('accepts an empty body', async () => {
    const r = await svc.request('POST', '/v0/signup');
    expect(r.status).toBe(201);
  });

  it('refuses unknown fields and bad JSON with 400 naming the problem', async () => {
    const r1 = await svc.request('POST', '/v0/signup', { body: { nme: 'x' } });
    expect(r1.status).toBe(400);
    expect(((await r1.json()) as any).error.message).toContain('nme');
    const r2 = await svc.request('POST', '/v0/signup', { body: '{"name":' });
    expect(r2.status).toBe(400);
    expect(await r2.json()).toEqual({ error: { code: 'invalid_request', message: 'body: is not valid JSON' } });
  });

  it('refuses a JSON body over 64 KiB with 413', async () => {
    const r = await svc.request('POST', '/v0/signup', { body: { name: 'x'.repeat(70 * 1024) } });
    expect(r.status).toBe(413);
    expect(((await r.json()) as any).error.code).toBe('payload_too_large');
  });
});

describe('POST /v0/sessions', () => {
  it('exchanges the account secret for a working session token', async () => {
    const a = await signup(svc);
    const r = await svc.request('POST', '/v0/sessions', { body: { account_id: a.accountId, account_secret: a.secret } });
    expect(r.status).toBe(201);
    const { token } = (await r.json()) as { token: string };
    const list = await svc.request('GET', '/v0/projects', { token });
    expect(list.status).toBe(200);
  });

  it('answers 401 for a wrong secret or an unknown account, alike', async () => {
    const a = await signup(svc);
    const wrong = await svc.request('POST', '/v0/sessions', { body: { account_id: a.accountId, account_secret: 'acs_' + '0'.repeat(64) } });
    const unknown = await svc.request('POST', '/v0/sessions', { body: { account_id: 'acct_0000000000000000', account_secret: a.secret } });
    for (const r of [wrong, unknown]) {
      expect(r.status).toBe(401);
      expect(r.headers.get('www-authenticate')).toBe('Bearer realm="svc-cloud"');
      const text = await r.text();
      expect(text).not.toContain(a.secret);
      expect(JSON.parse(text).error.code).toBe('authentication_required');
    }
  });
});

describe('invite-gated signup', () => {
  let gated: TestService;
  beforeAll(async () => {
    gated = await startTestService({ SVCD_INVITE_CODES: 'welcome-1,welcome-2' });
  });
  afterAll(() => gated?.stop());

  it('refuses signup without a valid invite code with 403 authorization_denied', async () => {
    for (const body of [{}, { invite_code: 'nope' }, { invite_code: '' }]) {
      const r = await gated.request('POST', '/v0/signup', { body });
      expect(r.status).toBe(403);
      expect(((await r.json()) as any).error.code).toBe('authorization_denied');
    }
  });

  it('admits a configured invite code', async () => {
    const r = await gated.request('POST', '/v0/signup', { body: { invite_code: 'welcome-2' } });
    expect(r.status).toBe(201);
  });

  it('admits an invite row stored in DynamoDB, and stored rows gate an open deployment', async () => {
    await putInvite(svc.db, 'row-code', new Date().toISOString());
    const refused = await svc.request('POST', '/v0/signup', { body: {} });
    expect(refused.status).toBe(403);
    const admitted = await svc.request('POST', '/v0/signup', { body: { invite_code: 'row-code' } });
    expect(admitted.status).toBe(201);
  });
});
