/**
 * The realtime hub on real Node writables whose consumer the test controls: sequence and `ts`,
 * one shared frame per event, bounded queues and overflow, drain order, heartbeats, limits.
 */
import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { ServiceError } from '../../shared/errors.ts';
import { RealtimeHub, type HubOptions } from './hub.ts';
import { commentFrame, eventFrame } from './sse.ts';

/** A writable whose consumer can stall: while stalled, accepted chunks wait and `write` soon answers false. */
class Socket extends Writable {
  chunks: Buffer[] = [];
  stalled = false;
  private waiting: (() => void)[] = [];

  constructor(highWaterMark = 64) {
    super({ highWaterMark });
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, done: (err?: Error | null) => void): void {
    this.chunks.push(chunk);
    if (this.stalled) this.waiting.push(() => done());
    else done();
  }

  resume(): void {
    this.stalled = false;
    for (const w of this.waiting.splice(0)) w();
  }

  text(): string {
    return Buffer.concat(this.chunks).toString('utf8');
  }

  events(): string[] {
    return [...this.text().matchAll(/^event: (.*)$/gm)].map((m) => m[1]!);
  }
}

const hubs: RealtimeHub[] = [];
function hub(options: Partial<HubOptions> = {}): RealtimeHub {
  const h = new RealtimeHub({ maxPerProject: 10, maxTotal: 20, queue: 4, heartbeatMs: 0, ...options });
  hubs.push(h);
  return h;
}
afterEach(() => {
  for (const h of hubs.splice(0)) h.close();
});

const P1 = 'prj_0000000000000001';
const P2 = 'prj_0000000000000002';
const tick = () => new Promise((r) => setImmediate(r));

describe('publish', () => {
  it('assigns ids from one per-process sequence starting at 1, and ts from the clock', () => {
    const h = hub({ now: () => Date.parse('2026-01-02T03:04:05.678Z') });
    const a = h.publish(P1, 'a', 'e', 1).event;
    const b = h.publish(P2, 'b', 'e', 2).event;
    const c = h.publish(P1, 'a', 'e', 3).event;
    expect([a.id, b.id, c.id]).toEqual([1, 2, 3]);
    expect(a).toEqual({ id: 1, channel: 'a', event: 'e', payload: 1, ts: '2026-01-02T03:04:05.678Z' });
    expect(h.stats().lastId).toBe(3);
  });

  it('answers the delivered event as JSON equal to the event object, payload null when absent', () => {
    const h = hub();
    const p = h.publish(P1, 'a', 'e', { x: [1, 'two', null] });
    expect(JSON.parse(p.json)).toEqual(p.event);
    expect(JSON.parse(h.publish(P1, 'a', 'e', undefined).json).payload).toBeNull();
  });

  it('enforces 32 KiB of JSON with 413 payload_too_large', () => {
    const h = hub();
    expect(() => h.publish(P1, 'a', 'e', 'x'.repeat(32 * 1024 - 2))).not.toThrow();
    try {
      h.publish(P1, 'a', 'e', 'x'.repeat(32 * 1024 - 1));
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ServiceError);
      expect((err as ServiceError).code).toBe('payload_too_large');
    }
  });

  it('writes one Buffer, the same object, to every subscriber of the channel and none to others', async () => {
    const h = hub();
    const [s1, s2, s3, s4] = [new Socket(1 << 20), new Socket(1 << 20), new Socket(1 << 20), new Socket(1 << 20)];
    h.subscribe(P1, ['a'], s1);
    h.subscribe(P1, ['a', 'b'], s2);
    h.subscribe(P1, ['b'], s3);
    h.subscribe(P2, ['a'], s4);
    const p = h.publish(P1, 'a', 'e', 1);
    expect(p.receivers).toBe(2);
    await tick(); // sockets are corked until the end of the turn
    expect(s1.chunks).toHaveLength(1);
    expect(s1.chunks[0]).toBe(s2.chunks[0]);
    expect(s3.chunks).toHaveLength(0);
    expect(s4.chunks).toHaveLength(0);
    expect(s1.text()).toBe(`id: ${p.event.id}\nevent: e\ndata: ${p.json}\n\n`);
  });

  it('emits system events on the system channel and never throws', async () => {
    const logs: string[] = [];
    const h = hub({ log: (l) => logs.push(l) });
    const s = new Socket(1 << 20);
    h.subscribe(P1, ['system'], s);
    expect(h.emitSystem(P1, 'project.running', { state: 'running' })?.channel).toBe('system');
    await tick();
    expect(s.events()).toEqual(['project.running']);
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(h.emitSystem(P1, 'project.sleeping', cyclic)).toBeNull();
    expect(logs.join('\n')).toMatch(/project.sleeping/);
  });
});

describe('backpressure', () => {
  it('queues while the socket does not drain and flushes in order when it does', async () => {
    const h = hub({ queue: 100 });
    const s = new Socket(64);
    s.stalled = true;
    h.subscribe(P1, ['a'], s);
    const ids = Array.from({ length: 20 }, (_, i) => h.publish(P1, 'a', `e${i}`, i).event.id);
    expect(h.stats().queued).toBeGreaterThan(0);
    s.resume();
    await tick();
    s.resume();
    await tick();
    expect(h.stats().queued).toBe(0);
    expect(s.events()).toEqual(ids.map((_, i) => `e${i}`));
  });

  it('cuts a subscriber off with a final overflow frame once its queue is full; the others are untouched', async () => {
    const h = hub({ queue: 4, overflowGraceMs: 50 });
    const late = new Socket(64); // stalls, then reads again
    const dead = new Socket(64); // never reads again
    const fast = new Socket(64);
    late.stalled = dead.stalled = true;
    for (const s of [late, dead, fast]) h.subscribe(P1, ['a'], s);
    const deadClosed = new Promise<void>((r) => dead.once('close', () => r()));
    const ids: number[] = [];
    for (let i = 0; i < 50; i++) {
      ids.push(h.publish(P1, 'a', 'e', { i, pad: 'x'.repeat(100) }).event.id);
      expect(h.stats().maxQueued).toBeLessThanOrEqual(4);
    }
    expect(h.stats()).toMatchObject({ subscribers: 1, overflows: 2, maxQueued: 4, queued: 0 });
    expect(fast.events()).toHaveLength(50);
    expect(h.publish(P1, 'a', 'e', 'later').receivers).toBe(1);

    // The reader that comes back gets what its socket had accepted, then overflow, then the end.
    const finished = new Promise<void>((r) => late.once('finish', () => r()));
    late.resume();
    await finished;
    expect(late.events().at(-1)).toBe('overflow');
    expect(late.events().length).toBeLessThan(50);
    expect(late.text()).toMatch(/\nevent: overflow\ndata: \{"reason":"subscriber queue full","queue":4,"dropped":\d+\}\n\n$/);
    const seen = [...late.text().matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
    expect(seen).toEqual(ids.slice(0, seen.length));
    // The one that never reads again is destroyed after the grace period: nothing is held for it.
    await deadClosed;
    expect(dead.destroyed).toBe(true);
  });
});

describe('flushes', () => {
  it('writes an event at the end of its turn when the stream was quiet, and coalesces the ones that follow within coalesceMs', async () => {
    const h = hub({ coalesceMs: 60, queue: 100 });
    const s = new Socket(1 << 20);
    h.subscribe(P1, ['a'], s);
    h.publish(P1, 'a', 'e1', 1);
    expect(s.events()).toEqual([]);
    await tick();
    expect(s.events()).toEqual(['e1']);
    h.publish(P1, 'a', 'e2', 2);
    await tick();
    h.publish(P1, 'a', 'e3', 3);
    await tick();
    // Within 60 ms of the last write: held back, corked.
    expect(s.events()).toEqual(['e1']);
    await new Promise((r) => setTimeout(r, 80));
    expect(s.events()).toEqual(['e1', 'e2', 'e3']);
  });

  it('uncorks a hundred sockets per turn, and a socket not reached yet gets later frames after the earlier ones', async () => {
    const h = hub({ maxPerProject: 1000, maxTotal: 1000, queue: 100 });
    const sockets = Array.from({ length: 250 }, () => new Socket(1 << 20));
    for (const s of sockets) h.subscribe(P1, ['a'], s);
    h.publish(P1, 'a', 'e1', 1);
    await tick();
    expect(sockets.filter((s) => s.events().length > 0)).toHaveLength(100);
    h.publish(P1, 'a', 'e2', 2);
    for (let i = 0; i < 5; i++) await tick();
    for (const s of sockets) expect(s.events()).toEqual(['e1', 'e2']);
  });
});

describe('heartbeats', () => {
  it('writes a heartbeat comment at the interval, but not to a subscriber still waiting for drain', async () => {
    const h = hub({ heartbeatMs: 20, queue: 100 });
    const idle = new Socket(1 << 20);
    const busy = new Socket(16);
    busy.stalled = true;
    h.subscribe(P1, ['a'], idle);
    h.subscribe(P1, ['b'], busy);
    h.publish(P1, 'b', 'e', 'x'.repeat(100));
    await new Promise((r) => setTimeout(r, 90));
    expect(idle.text()).toMatch(/^(: heartbeat\n\n){2,}$/);
    expect(busy.text()).not.toMatch(/heartbeat/);
  });
});

describe('subscribers', () => {
  it('refuses beyond the per-project limit (409 conflict) and the per-agent limit (503)', () => {
    const h = hub({ maxPerProject: 2, maxTotal: 3 });
    h.subscribe(P1, ['a'], new Socket());
    h.subscribe(P1, ['a'], new Socket());
    expect(() => h.subscribe(P1, ['a'], new Socket())).toThrow(expect.objectContaining({ code: 'conflict', status: 409 }));
    h.subscribe(P2, ['a'], new Socket());
    expect(() => h.subscribe(P2, ['a'], new Socket())).toThrow(expect.objectContaining({ code: 'orchestrator_unavailable', status: 503 }));
  });

  it('forgets a subscriber when its socket closes, and empty projects and channels with it', async () => {
    const h = hub();
    const s = new Socket();
    h.subscribe(P1, ['a', 'b'], s);
    expect(h.stats()).toMatchObject({ subscribers: 1, projects: 1 });
    s.destroy();
    await tick();
    expect(h.stats()).toMatchObject({ subscribers: 0, projects: 0 });
    expect(h.publish(P1, 'a', 'e', 1).receivers).toBe(0);
  });

  it('ends exactly the streams a revoked key opened', () => {
    const h = hub();
    const byKey = new Socket();
    const bySession = new Socket();
    h.subscribe(P1, ['a'], byKey, 'k'.repeat(32));
    h.subscribe(P1, ['a'], bySession, null);
    expect(h.closeKey('k'.repeat(32))).toBe(1);
    expect(byKey.writableEnded).toBe(true);
    expect(bySession.writableEnded).toBe(false);
    expect(h.stats().subscribers).toBe(1);
  });

  it('ends every stream on close', () => {
    const h = hub();
    const s = new Socket();
    h.subscribe(P1, ['a'], s);
    h.close();
    expect(s.writableEnded).toBe(true);
    expect(h.stats().subscribers).toBe(0);
  });
});

describe('SSE frames', () => {
  it('never carry a raw CR or LF in id, event or a comment', () => {
    expect(eventFrame(7, 'ok', '{}').toString()).toBe('id: 7\nevent: ok\ndata: {}\n\n');
    expect(eventFrame(null, 'overflow', '{}').toString()).toBe('event: overflow\ndata: {}\n\n');
    expect(() => eventFrame(1, 'a\nid: 9', '{}')).toThrow(/CR or LF/);
    expect(() => eventFrame(1, 'a\rb', '{}')).toThrow(/CR or LF/);
    expect(() => eventFrame(1, 'a', '{"x":1}\n\ndata: forged')).toThrow(/CR or LF/);
    expect(() => commentFrame('x\ny')).toThrow(/CR or LF/);
    expect(commentFrame('heartbeat').toString()).toBe(': heartbeat\n\n');
  });
});
