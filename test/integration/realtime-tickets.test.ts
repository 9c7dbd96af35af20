/**
 * Browser realtime tickets through the handlers and a real host agent over DynamoDB Local
 * (docs/realtime.md "Browsers: tickets"): issue with the owner session or a project key, redeem once
 * (also when two handler instances race for it), expiry, project and channel binding, revocation,
 * and no long-lived credential in a URL.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '../../client/index.ts';
import { buildDeps } from '../../handlers/deps.ts';
import { createApp, type App } from '../../handlers/index.ts';
import { signup, startTestService, type TestService } from '../helpers/service.ts';
import { SseReader } from '../helpers/sse.ts';

let svc: TestService;
let token: string;
let project: string;
let otherProject: string;

beforeAll(async () => {
  svc = await startTestService();
  token = (await signup(svc)).token;
  project = await createProject(token);
  otherProject = await createProject(token);
});
afterAll(() => svc?.stop());

async function createProject(t: string): Promise<string> {
  const r = await svc.request('POST', '/v0/projects', { token: t, body: { name: 'tickets' } });
  expect(r.status).toBe(201);
  return ((await r.json()) as { id: string }).id;
}

interface Ticket {
  ticket: string;
  project: string;
  channels: string[];
  expires_at: string;
  subscribe_url: string;
}

async function issue(channels: unknown, { prj = project, t = token }: { prj?: string; t?: string } = {}): Promise<Response> {
  return svc.request('POST', `/v0/projects/${prj}/realtime/tickets`, { token: t, body: { channels } });
}

async function ticketFor(channels: string[], opts: { prj?: string; t?: string } = {}): Promise<Ticket> {
  const r = await issue(channels, opts);
  expect(r.status, await r.clone().text()).toBe(201);
  return (await r.json()) as Ticket;
}

/** A GET of `path` with no credential but what the URL holds (a browser's EventSource). */
function get(path: string, app: App = svc.app): Promise<Response> {
  return app.fetch(new Request(`http://svc.test${path}`));
}

async function errorOf(r: Response): Promise<{ code: string; message: string }> {
  return ((await r.json()) as { error: { code: string; message: string } }).error;
}

async function newKey(): Promise<{ key: string; key_id: string }> {
  const r = await svc.request('POST', `/v0/projects/${project}/keys`, { token, body: {} });
  expect(r.status).toBe(201);
  return (await r.json()) as { key: string; key_id: string };
}

describe('POST /v0/projects/{id}/realtime/tickets', () => {
  it('answers a ticket bound to the project and channels, expiring in 60 s, with its subscribe URL', async () => {
    const before = Date.now();
    const t = await ticketFor(['chat', 'system', 'chat']);
    expect(t.ticket).toMatch(/^rtt_[0-9a-f]{64}$/);
    expect(t.project).toBe(project);
    expect(t.channels).toEqual(['chat', 'system']);
    const ttl = Date.parse(t.expires_at) - before;
    expect(ttl).toBeGreaterThan(55_000);
    expect(ttl).toBeLessThanOrEqual(61_000);
    expect(t.subscribe_url).toBe(`/v0/projects/${project}/realtime/subscribe?channel=chat&channel=system&ticket=${t.ticket}`);
  });

  it('is issued to a project key of the project, not to a key of another', async () => {
    const { key } = await newKey();
    expect((await issue(['chat'], { t: key })).status).toBe(201);
    const denied = await issue(['chat'], { prj: otherProject, t: key });
    expect(denied.status).toBe(403);
    expect((await errorOf(denied)).code).toBe('authorization_denied');
  });

  it('refuses a missing credential, a stranger and bad channels', async () => {
    expect((await svc.request('POST', `/v0/projects/${project}/realtime/tickets`, { body: { channels: ['a'] } })).status).toBe(401);
    const stranger = (await signup(svc)).token;
    expect((await issue(['chat'], { t: stranger })).status).toBe(404);
    for (const channels of [[], ['Bad Channel'], 'chat', Array.from({ length: 33 }, (_, i) => `c${i}`)]) {
      const r = await issue(channels);
      expect(r.status, JSON.stringify(channels)).toBe(400);
      expect((await errorOf(r)).message).toMatch(/^channels/);
    }
  });
});

describe('GET .../realtime/subscribe?ticket=', () => {
  it('opens the stream once; the same ticket again is 401', async () => {
    const t = await ticketFor(['chat']);
    const r = await get(t.subscribe_url);
    expect(r.status).toBe(200);
    const sse = new SseReader(r);
    expect(await sse.next()).toEqual({ comment: 'subscribed' });
    const published = await svc.request('POST', `/v0/projects/${project}/realtime/publish`, { token, body: { channel: 'chat', event: 'hello', payload: 1 } });
    expect(published.status).toBe(200);
    expect((await sse.nextEvent())?.event).toBe('hello');
    await sse.close();

    const again = await get(t.subscribe_url);
    expect(again.status).toBe(401);
    expect(again.headers.get('www-authenticate')).toMatch(/^Bearer/);
    expect((await errorOf(again)).message).toMatch(/already used/);
  });

  it('of two handler instances redeeming one ticket at once, exactly one succeeds', async () => {
    const second = createApp(buildDeps(svc.env, () => {}));
    for (let round = 0; round < 3; round++) {
      const t = await ticketFor(['race']);
      const answers = await Promise.all([get(t.subscribe_url), get(t.subscribe_url, second), get(t.subscribe_url), get(t.subscribe_url, second)]);
      const statuses = answers.map((a) => a.status).sort();
      expect(statuses).toEqual([200, 401, 401, 401]);
      for (const a of answers) await a.body?.cancel();
    }
  });

  it('is refused once expired', async () => {
    const t = await ticketFor(['chat']);
    const deps = buildDeps(svc.env, () => {});
    const later = createApp({ ...deps, now: () => Date.now() + 61_000 });
    const r = await get(t.subscribe_url, later);
    expect(r.status).toBe(401);
    expect((await errorOf(r)).message).toMatch(/expired/);
  });

  it('is bound to its project and channels, and a refused use does not use it up', async () => {
    const t = await ticketFor(['a', 'b']);
    const wrongProject = await get(`/v0/projects/${otherProject}/realtime/subscribe?channel=a&ticket=${t.ticket}`);
    expect(wrongProject.status).toBe(403);
    const wrongChannel = await get(`/v0/projects/${project}/realtime/subscribe?channel=a&channel=c&ticket=${t.ticket}`);
    expect(wrongChannel.status).toBe(403);
    expect((await errorOf(wrongChannel)).message).toMatch(/channel/);
    const badQuery = await get(`/v0/projects/${project}/realtime/subscribe?channel=a&ticket=${t.ticket}&x=1`);
    expect(badQuery.status).toBe(400);
    // A subset of its channels is fine.
    const ok = await get(`/v0/projects/${project}/realtime/subscribe?channel=b&ticket=${t.ticket}`);
    expect(ok.status).toBe(200);
    await ok.body?.cancel();
  });

  it('refuses a malformed or unknown ticket with 401', async () => {
    for (const ticket of ['nope', `rtt_${'0'.repeat(64)}`, '']) {
      const r = await get(`/v0/projects/${project}/realtime/subscribe?channel=a&ticket=${ticket}`);
      expect(r.status, ticket).toBe(401);
      expect((await errorOf(r)).code).toBe('authentication_required');
    }
  });

  it('refuses a ticket beside an Authorization header', async () => {
    const t = await ticketFor(['chat']);
    const r = await svc.app.fetch(new Request(`http://svc.test${t.subscribe_url}`, { headers: { authorization: `Bearer ${token}` } }));
    expect(r.status).toBe(400);
  });

  it('is refused when the key it was issued to was revoked since, and the stream it opened ends at revocation', async () => {
    const { key, key_id } = await newKey();
    const unused = await ticketFor(['chat'], { t: key });
    const used = await ticketFor(['chat'], { t: key });
    const r = await get(used.subscribe_url);
    expect(r.status).toBe(200);
    const sse = new SseReader(r);
    expect(await sse.next()).toEqual({ comment: 'subscribed' });

    expect((await svc.request('DELETE', `/v0/projects/${project}/keys/${key_id}`, { token })).status).toBe(200);
    expect(await sse.nextEvent(5000)).toBeNull();
    const late = await get(unused.subscribe_url);
    expect(late.status).toBe(401);
    expect((await errorOf(late)).message).toMatch(/revoked/);
  });
});

describe('long-lived credentials in a URL', () => {
  it.each(['token', 'key', 'access_token', 'apikey'])('?%s= is refused with 400, never read', async (name) => {
    const { key } = await newKey();
    for (const value of [token, key]) {
      const r = await get(`/v0/projects/${project}/realtime/subscribe?channel=a&${name}=${encodeURIComponent(value)}`);
      expect(r.status).toBe(400);
      const { message } = await errorOf(r);
      expect(message).toMatch(new RegExp(`^${name}: credentials are not accepted in a URL`));
      expect(message).not.toContain(value);
    }
  });
});

describe('the SDK with tickets (what it does in browsers)', () => {
  it('subscribes through a fresh ticket per connection, never a credential in the URL', async () => {
    const urls: string[] = [];
    const client = createClient({
      baseUrl: 'http://svc.test',
      token,
      fetch: (async (input: RequestInfo | URL, init?: RequestInit) => {
        const request = new Request(input, init);
        urls.push(`${request.method} ${new URL(request.url).pathname}${new URL(request.url).search}`);
        return svc.app.fetch(request);
      }) as typeof fetch,
    });
    const abort = new AbortController();
    const opened = new Promise<void>((resolve) => {
      void (async () => {
        const events = client.project(project).realtime.subscribe(['sdk'], { tickets: true, signal: abort.signal, onOpen: resolve });
        try {
          for await (const event of events) if (event.event === 'done') abort.abort();
        } catch {
          // aborted
        }
      })();
    });
    await opened;
    expect(urls[0]).toBe(`POST /v0/projects/${project}/realtime/tickets`);
    expect(urls[1]).toMatch(new RegExp(`^GET /v0/projects/${project}/realtime/subscribe\\?channel=sdk&ticket=rtt_[0-9a-f]{64}$`));
    await client.project(project).realtime.publish('sdk', 'done');
    abort.abort();
  });
});
