/**
 * Realtime through the handlers and a real host agent (docs/realtime.md): publish per the contract, Server-Sent
 * Events subscribe for the owner session or a project key, channel and project isolation, heartbeats,
 * the reserved `system` channel.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signup, startTestService, type TestService } from '../helpers/service.ts';
import { SseReader } from '../helpers/sse.ts';

let svc: TestService;
let token: string;
let otherToken: string;
let project: string;
let otherProject: string;

const RFC3339_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

beforeAll(async () => {
  svc = await startTestService({ SVCD_REALTIME_HEARTBEAT_MS: '150' });
  token = (await signup(svc)).token;
  otherToken = (await signup(svc)).token;
  project = await createProject(token);
  otherProject = await createProject(otherToken);
});
afterAll(() => svc?.stop());

async function createProject(t: string): Promise<string> {
  const r = await svc.request('POST', '/v0/projects', { token: t, body: { name: 'rt' } });
  expect(r.status).toBe(201);
  return ((await r.json()) as { id: string }).id;
}

async function publish(body: unknown, { prj = project, t = token }: { prj?: string; t?: string } = {}): Promise<Response> {
  return svc.request('POST', `/v0/projects/${prj}/realtime/publish`, { token: t, body });
}

async function published(body: unknown, prj = project): Promise<Record<string, any>> {
  const r = await publish(body, { prj });
  expect(r.status, await r.clone().text()).toBe(200);
  return (await r.json()) as Record<string, any>;
}

async function subscribe(channels: string[], { prj = project, t = token }: { prj?: string; t?: string } = {}): Promise<Response> {
  const q = channels.map((c) => `channel=${encodeURIComponent(c)}`).join('&');
  return svc.request('GET', `/v0/projects/${prj}/realtime/subscribe?${q}`, { token: t });
}

/** Subscribes and waits for the opening comment, so the subscription is live before the test publishes. */
async function open(channels: string[], opts: { prj?: string; t?: string } = {}): Promise<SseReader> {
  const r = await subscribe(channels, opts);
  expect(r.status, r.status === 200 ? '' : await r.clone().text()).toBe(200);
  expect(r.headers.get('content-type')).toMatch(/^text\/event-stream/);
  const sse = new SseReader(r);
  expect(await sse.next()).toEqual({ comment: 'subscribed' });
  return sse;
}

async function errorOf(r: Response): Promise<{ code: string; message: string }> {
  return ((await r.json()) as { error: { code: string; message: string } }).error;
}

describe('POST /v0/projects/{id}/realtime/publish', () => {
  it('answers the event as delivered, with an id from one increasing sequence and a service ts', async () => {
    const a = await published({ channel: 'chat', event: 'message', payload: { text: 'hi', n: [1, 2] } });
    expect(Object.keys(a).sort()).toEqual(['channel', 'event', 'id', 'payload', 'ts']);
    expect(Number.isInteger(a.id)).toBe(true);
    expect(a).toMatchObject({ channel: 'chat', event: 'message', payload: { text: 'hi', n: [1, 2] } });
    expect(a.ts).toMatch(RFC3339_UTC);
    expect(Math.abs(Date.parse(a.ts) - Date.now())).toBeLessThan(5000);
    const b = await published({ channel: 'other', event: 'x', payload: 1 });
    expect(b.id).toBeGreaterThan(a.id);
  });

  it('accepts any JSON value as payload, and null when it is absent', async () => {
    for (const payload of [null, 0, 'text', true, [1, 'a', null], { deep: { a: [{}] } }]) {
      expect((await published({ channel: 'c', event: 'e', payload })).payload).toEqual(payload);
    }
    expect((await published({ channel: 'c', event: 'e' })).payload).toBeNull();
  });

  it('accepts every name the patterns allow, at their longest', async () => {
    const a = await published({ channel: `a.b_c-9${'z'.repeat(57)}`, event: `Ev.9_x:y-Z${'q'.repeat(54)}`, payload: 1 });
    expect(a.channel).toHaveLength(64);
    expect(a.event).toHaveLength(64);
  });

  it('refuses bad channel and event names with 400 naming the field', async () => {
    const cases: [unknown, string][] = [
      [{ event: 'e' }, 'channel'],
      [{ channel: 'Chat', event: 'e' }, 'channel'],
      [{ channel: '', event: 'e' }, 'channel'],
      [{ channel: 'x'.repeat(65), event: 'e' }, 'channel'],
      [{ channel: 'a b', event: 'e' }, 'channel'],
      [{ channel: 7, event: 'e' }, 'channel'],
      [{ channel: 'c' }, 'event'],
      [{ channel: 'c', event: 'a\nb' }, 'event'],
      [{ channel: 'c', event: 'a/b' }, 'event'],
      [{ channel: 'c', event: 'e'.repeat(65) }, 'event'],
    ];
    for (const [body, field] of cases) {
      const r = await publish(body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      const e = await errorOf(r);
      expect(e.code).toBe('invalid_request');
      expect(e.message).toMatch(new RegExp(`^${field}: `));
    }
  });

  it('reserves the system channel: publishing there is 400', async () => {
    const r = await publish({ channel: 'system', event: 'project.running', payload: {} });
    expect(r.status).toBe(400);
    const e = await errorOf(r);
    expect(e.code).toBe('invalid_request');
    expect(e.message).toMatch(/^channel: .*reserved/);
  });

  it('refuses unknown fields, a non-object body and invalid JSON with 400', async () => {
    for (const body of [{ channel: 'c', event: 'e', extra: 1 }, [], '"x"', '{nope']) {
      const r = await publish(body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect((await errorOf(r)).code).toBe('invalid_request');
    }
  });

  it('accepts a payload of exactly 32 KiB as JSON and answers 413 payload_too_large one byte beyond', async () => {
    const exact = 'x'.repeat(32 * 1024 - 2); // the two quotes make 32768 bytes of JSON
    expect((await published({ channel: 'c', event: 'e', payload: exact })).payload).toBe(exact);
    const r = await publish({ channel: 'c', event: 'e', payload: `${exact}x` });
    expect(r.status).toBe(413);
    expect((await errorOf(r)).code).toBe('payload_too_large');
    // Counted in UTF-8 bytes, not characters: 11,000 three-byte characters are 33,002 bytes.
    const wide = await publish({ channel: 'c', event: 'e', payload: '€'.repeat(11_000) });
    expect(wide.status).toBe(413);
  });

  it('answers 401 without a credential, 401 to a project key, 404 to a session that does not own the project', async () => {
    const anon = await svc.request('POST', `/v0/projects/${project}/realtime/publish`, { body: { channel: 'c', event: 'e' } });
    expect(anon.status).toBe(401);
    expect(anon.headers.get('www-authenticate')).toBe('Bearer realm="svc-cloud"');
    const key = await issueKey(project);
    const withKey = await publish({ channel: 'c', event: 'e' }, { t: key.key });
    expect(withKey.status).toBe(401);
    expect((await errorOf(withKey)).code).toBe('authentication_required');
    const foreign = await publish({ channel: 'c', event: 'e' }, { t: otherToken });
    expect(foreign.status).toBe(404);
    expect((await errorOf(foreign)).code).toBe('not_found');
    const badId = await svc.request('POST', '/v0/projects/prj_nothex/realtime/publish', { token, body: { channel: 'c', event: 'e' } });
    expect(badId.status).toBe(400);
  });
});

async function issueKey(prj: string, t = token): Promise<{ key: string; key_id: string }> {
  const r = await svc.request('POST', `/v0/projects/${prj}/keys`, { token: t, body: {} });
  expect(r.status).toBe(201);
  return (await r.json()) as { key: string; key_id: string };
}

describe('GET /v0/projects/{id}/realtime/subscribe', () => {
  it('streams each published event as an SSE frame: id, event name, and the delivered event as data', async () => {
    const sse = await open(['room.1']);
    try {
      const sent = await published({ channel: 'room.1', event: 'msg:new', payload: { text: 'hello' } });
      const frame = await sse.nextEvent();
      expect(frame).toEqual({ id: String(sent.id), event: 'msg:new', data: expect.any(String) });
      expect(JSON.parse(frame!.data!)).toEqual(sent);
    } finally {
      await sse.close();
    }
  });

  it('delivers only the channels asked for, to every subscriber of them, in publish order', async () => {
    const ab = await open(['a', 'b']);
    const b = await open(['b']);
    try {
      const e1 = await published({ channel: 'a', event: 'one', payload: 1 });
      await published({ channel: 'c', event: 'never', payload: 0 });
      const e2 = await published({ channel: 'b', event: 'two', payload: 2 });
      expect((await ab.nextEvent())?.id).toBe(String(e1.id));
      expect((await ab.nextEvent())?.id).toBe(String(e2.id));
      expect((await b.nextEvent())?.id).toBe(String(e2.id));
      expect(await b.quiet(300)).toBeNull();
      expect(await ab.quiet(100)).toBeNull();
    } finally {
      await ab.close();
      await b.close();
    }
  });

  it('never lets an event cross projects, even on a channel of the same name', async () => {
    const mine = await open(['shared']);
    const theirs = await open(['shared'], { prj: otherProject, t: otherToken });
    try {
      const e1 = await published({ channel: 'shared', event: 'mine', payload: 'p1' });
      expect((await mine.nextEvent())?.id).toBe(String(e1.id));
      const r = await publish({ channel: 'shared', event: 'theirs', payload: 'p2' }, { prj: otherProject, t: otherToken });
      const e2 = (await r.json()) as { id: number };
      // The other project's first event is its own one, not ours.
      expect((await theirs.nextEvent())?.id).toBe(String(e2.id));
      expect(await mine.quiet(300)).toBeNull();
    } finally {
      await mine.close();
      await theirs.close();
    }
  });

  it('keeps CR and LF in a payload inside the one data line, so no frame or field can be forged', async () => {
    const sse = await open(['inj']);
    try {
      const payload = 'a\r\n\r\nid: 999\nevent: forged\rdata: x\u2028';
      const sent = await published({ channel: 'inj', event: 'e', payload });
      const frame = await sse.nextEvent();
      expect(frame?.event).toBe('e');
      expect(frame?.id).toBe(String(sent.id));
      expect(JSON.parse(frame!.data!).payload).toBe(payload);
      expect(await sse.quiet(200)).toBeNull();
    } finally {
      await sse.close();
    }
  });

  it('sends heartbeat comments on an idle stream', async () => {
    const sse = await open(['idle']);
    try {
      expect(await sse.next(2000)).toEqual({ comment: 'heartbeat' });
      expect(await sse.next(2000)).toEqual({ comment: 'heartbeat' });
    } finally {
      await sse.close();
    }
  });

  it('forgets a subscriber whose client went away', async () => {
    const hub = svc.agent.ctx.realtime;
    await waitFor(() => hub.stats().subscribers === 0); // earlier tests' streams are gone
    const sse = await open(['gone']);
    expect(hub.stats()).toMatchObject({ subscribers: 1, projects: 1 });
    await sse.close();
    await waitFor(() => hub.stats().subscribers === 0);
    expect(hub.stats().projects).toBe(0);
  });

  it('refuses a missing, malformed or excessive channel list with 400', async () => {
    for (const q of ['', 'channel=', 'channel=Bad', 'channel=a&channel=b%20c', Array.from({ length: 33 }, (_, i) => `channel=c${i}`).join('&')]) {
      const r = await svc.request('GET', `/v0/projects/${project}/realtime/subscribe?${q}`, { token });
      expect(r.status, q).toBe(400);
      const e = await errorOf(r);
      expect(e.code).toBe('invalid_request');
      expect(e.message).toMatch(/^(query|channel)/);
    }
  });

  it('answers 401 without a credential and 404 to a session that does not own the project', async () => {
    const anon = await svc.request('GET', `/v0/projects/${project}/realtime/subscribe?channel=a`);
    expect(anon.status).toBe(401);
    expect(anon.headers.get('www-authenticate')).toBe('Bearer realm="svc-cloud"');
    const foreign = await subscribe(['a'], { t: otherToken });
    expect(foreign.status).toBe(404);
  });

  it('admits a project key of the project, 403 for a key of another project, 401 once the key is revoked', async () => {
    const key = await issueKey(project);
    const sse = await open(['keyed'], { t: key.key });
    try {
      const sent = await published({ channel: 'keyed', event: 'e', payload: 1 });
      expect((await sse.nextEvent())?.id).toBe(String(sent.id));
    } finally {
      await sse.close();
    }
    const elsewhere = await subscribe(['keyed'], { prj: otherProject, t: key.key });
    expect(elsewhere.status).toBe(403);
    expect((await errorOf(elsewhere)).code).toBe('authorization_denied');

    const revoke = await svc.request('DELETE', `/v0/projects/${project}/keys/${key.key_id}`, { token });
    expect(revoke.status).toBe(200);
    const revoked = await subscribe(['keyed'], { t: key.key });
    expect(revoked.status).toBe(401);
    expect(revoked.headers.get('www-authenticate')).toBe('Bearer realm="svc-cloud"');
    const unknown = await subscribe(['keyed'], { t: `svc1_${'0'.repeat(32)}_${'1'.repeat(64)}` });
    expect(unknown.status).toBe(401);
  });
});

describe('system channel', () => {
  it('carries the lifecycle events the service emits, to subscribers of that project only', async () => {
    const sys = await open(['system']);
    const otherSys = await open(['system'], { prj: otherProject, t: otherToken });
    try {
      const hub = svc.agent.ctx.realtime;
      const events = ['project.running', 'project.sleeping', 'snapshot.created', 'project.restored'] as const;
      for (const event of events) hub.emitSystem(project, event, { project, detail: event });
      for (const event of events) {
        const frame = await sys.nextEvent();
        expect(frame?.event).toBe(event);
        expect(JSON.parse(frame!.data!)).toMatchObject({ channel: 'system', event, payload: { project, detail: event } });
      }
      expect(await otherSys.quiet(200)).toBeNull();
    } finally {
      await sys.close();
      await otherSys.close();
    }
  });
});

async function waitFor(cond: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}
