/**
 * Realtime backpressure and limits (docs/realtime.md "Backpressure", "Limits"): a subscriber that stops reading is cut
 * off with a final `event: overflow` once its bounded queue is full, while the others get every event;
 * subscriber limits per project and per agent answer clear errors.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signup, startTestService, type TestService } from '../helpers/service.ts';
import { SseReader, type SseFrame } from '../helpers/sse.ts';

const QUEUE = 8;
let svc: TestService;
let token: string;
let projectA: string;
let projectB: string;

beforeAll(async () => {
  svc = await startTestService({
    SVCD_REALTIME_QUEUE: String(QUEUE),
    SVCD_REALTIME_MAX_SUBSCRIBERS_PER_PROJECT: '3',
    SVCD_REALTIME_MAX_SUBSCRIBERS: '4',
  });
  token = (await signup(svc)).token;
  projectA = await createProject();
  projectB = await createProject();
});
afterAll(() => svc?.stop());

async function createProject(): Promise<string> {
  const r = await svc.request('POST', '/v0/projects', { token, body: { name: 'bp' } });
  expect(r.status).toBe(201);
  return ((await r.json()) as { id: string }).id;
}

function subscribe(project: string, channel = 'feed'): Promise<Response> {
  return svc.request('GET', `/v0/projects/${project}/realtime/subscribe?channel=${channel}`, { token });
}

async function open(project: string, channel = 'feed'): Promise<SseReader> {
  const r = await subscribe(project, channel);
  expect(r.status).toBe(200);
  const sse = new SseReader(r);
  expect(await sse.next()).toEqual({ comment: 'subscribed' });
  return sse;
}

async function waitFor(cond: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Reads events in the background, recording their ids. */
function drain(sse: SseReader): { ids: number[]; done: Promise<SseFrame | null> } {
  const ids: number[] = [];
  const done = (async () => {
    for (;;) {
      const f = await sse.nextEvent(60_000);
      if (f === null || f.event === 'overflow') return f;
      ids.push(Number(f.id));
    }
  })();
  return { ids, done };
}

describe('backpressure', () => {
  it('cuts a stalled reader off with a final overflow event, never slowing the others or queueing past the bound', async () => {
    const hub = svc.agent.ctx.realtime;
    const healthy = [await open(projectA), await open(projectA)];
    const stalled = await open(projectA); // opened, then never read until the end
    const readers = healthy.map(drain);
    const payload = { blob: 'x'.repeat(16 * 1024) };

    // Publish until the hub cuts the stalled reader off; the healthy readers keep up as they would
    // on their own, and never fall more than a few events behind.
    const published: number[] = [];
    for (let i = 0; i < 20_000 && hub.stats().overflows === 0; i++) {
      published.push(hub.publish(projectA, 'feed', 'tick', { i, ...payload }).event.id);
      await waitFor(() => readers.every((r) => r.ids.length >= published.length - 4));
      expect(hub.stats().maxQueued).toBeLessThanOrEqual(QUEUE);
    }
    expect(hub.stats().overflows).toBe(1);
    expect(hub.stats().subscribers).toBe(2);

    // The others carry on, unaffected, and receive everything, in order.
    for (let i = 0; i < 10; i++) published.push(hub.publish(projectA, 'feed', 'after', i).event.id);
    await waitFor(() => readers.every((r) => r.ids.length === published.length));
    for (const r of readers) expect(r.ids).toEqual(published);
    expect(hub.stats().maxQueued).toBeLessThanOrEqual(QUEUE);

    // The stalled reader, once it reads again, finds a prefix of the events in order, then
    // `overflow` as the very last frame, then the end of the stream.
    const seen: number[] = [];
    let last: SseFrame | null = null;
    for (;;) {
      const f = await stalled.nextEvent(10_000);
      if (f === null) break;
      last = f;
      if (f.event === 'overflow') {
        expect(f.id).toBeUndefined();
        expect(JSON.parse(f.data!)).toMatchObject({ reason: 'subscriber queue full', queue: QUEUE });
        expect(await stalled.next(10_000)).toBeNull();
        break;
      }
      seen.push(Number(f.id));
    }
    expect(last?.event).toBe('overflow');
    expect(seen.length).toBeGreaterThan(0);
    expect(seen).toEqual(published.slice(0, seen.length));
    expect(seen.length).toBeLessThan(published.length);

    for (const s of healthy) await s.close();
    await waitFor(() => hub.stats().subscribers === 0);
    expect(hub.stats().queued).toBe(0);
  });
});

describe('limits', () => {
  it('refuses a subscriber beyond the per-project limit with 409 and beyond the per-agent limit with 503', async () => {
    const hub = svc.agent.ctx.realtime;
    await waitFor(() => hub.stats().subscribers === 0);
    const a = [await open(projectA), await open(projectA), await open(projectA, 'other')];

    const fourthA = await subscribe(projectA);
    expect(fourthA.status).toBe(409);
    const e1 = ((await fourthA.json()) as { error: { code: string; message: string } }).error;
    expect(e1.code).toBe('conflict');
    expect(e1.message).toMatch(/realtime subscribers/);

    const b = await open(projectB); // the fourth on this agent
    const fifth = await subscribe(projectB);
    expect(fifth.status).toBe(503);
    const e2 = ((await fifth.json()) as { error: { code: string; message: string } }).error;
    expect(e2.code).toBe('orchestrator_unavailable');
    expect(e2.message).toMatch(/limit of 4 realtime subscribers/);

    // A closed stream frees its place.
    await a[0]!.close();
    await waitFor(() => hub.stats().subscribers === 3);
    const again = await open(projectB);
    const sent = hub.publish(projectB, 'feed', 'e', 1).event;
    expect((await again.nextEvent())?.id).toBe(String(sent.id));
    expect((await b.nextEvent())?.id).toBe(String(sent.id));

    for (const s of [...a.slice(1), b, again]) await s.close();
    await waitFor(() => hub.stats().subscribers === 0);
  });
});
