/**
 * Realtime through the local stack's base URL (docs/realtime.md "Subscribe"): the handlers bundle in miniflare
 * (workerd) passes the agent's event stream through as it is written — the opening comment, events,
 * heartbeats — and a client that goes away frees its place on the agent.
 * Needs dist/worker.js (`npm test` builds it first).
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { startStack, type Stack } from '../../infra/local/stack.ts';
import { tempDir } from '../helpers/env.ts';
import { SseReader } from '../helpers/sse.ts';

const dir = tempDir('svc-rt-stack-');
let stack: Stack;
let token: string;
let project: string;

beforeAll(async () => {
  stack = await startStack({
    dir: dir.dir,
    dynamoEndpoint: inject('dynamoEndpoint'),
    env: {
      SVCD_TABLE: `rt_${randomBytes(6).toString('hex')}`,
      SVCD_PORT: '0',
      SVCD_AGENT_PORT: '0',
      SVCD_DATAPLANE_PORT: '0',
      SVCD_REALTIME_HEARTBEAT_MS: '200',
      SVCD_REALTIME_MAX_SUBSCRIBERS_PER_PROJECT: '1',
    },
    agentOutput: 'collect',
    log: () => {},
  });
  const su = await fetch(`${stack.url}/v0/signup`, { method: 'POST', body: '{}' });
  expect(su.status).toBe(201);
  token = ((await su.json()) as { token: string }).token;
  const cp = await fetch(`${stack.url}/v0/projects`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'rt-stack' }),
  });
  expect(cp.status).toBe(201);
  project = ((await cp.json()) as { id: string }).id;
}, 120_000);
afterAll(async () => {
  await stack?.stop();
  dir.cleanup();
});

function subscribe(signal?: AbortSignal): Promise<Response> {
  return fetch(`${stack.url}/v0/projects/${project}/realtime/subscribe?channel=live`, {
    headers: { authorization: `Bearer ${token}` },
    signal,
  });
}

describe('realtime through the local stack', () => {
  it('streams events and heartbeats through miniflare as they are written', async () => {
    const abort = new AbortController();
    const r = await subscribe(abort.signal);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(r.headers.get('x-request-id')).toMatch(/^req_/);
    const sse = new SseReader(r);
    try {
      expect(await sse.next()).toEqual({ comment: 'subscribed' });
      const pub = await fetch(`${stack.url}/v0/projects/${project}/realtime/publish`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ channel: 'live', event: 'hello', payload: { n: 1 } }),
      });
      expect(pub.status).toBe(200);
      const sent = (await pub.json()) as { id: number };
      const frame = await sse.nextEvent(5000);
      expect(frame?.id).toBe(String(sent.id));
      expect(JSON.parse(frame!.data!)).toEqual(sent);
      // Each frame arrives on its own, not when a buffer fills: a heartbeat comment makes it through too.
      expect(await sse.next(3000)).toEqual({ comment: 'heartbeat' });
    } finally {
      abort.abort();
      await sse.close();
    }
  });

  it('frees the subscriber on the agent when the client goes away', async () => {
    // The limit is 1 per project: a new subscription succeeds only once the previous one is gone.
    const deadline = Date.now() + 10_000;
    let r: Response;
    for (;;) {
      r = await subscribe();
      if (r.status === 200 || Date.now() > deadline) break;
      expect(r.status).toBe(409);
      await r.body?.cancel();
      await new Promise((ok) => setTimeout(ok, 100));
    }
    expect(r.status).toBe(200);
    await r.body!.cancel();
    // ...and again: the cancel above closes the upstream too.
    const deadline2 = Date.now() + 10_000;
    for (;;) {
      r = await subscribe();
      if (r.status === 200 || Date.now() > deadline2) break;
      await r.body?.cancel();
      await new Promise((ok) => setTimeout(ok, 100));
    }
    expect(r.status).toBe(200);
    await r.body!.cancel();
  });
});
