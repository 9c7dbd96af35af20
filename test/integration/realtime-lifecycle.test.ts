/**
 * Realtime and the host agent's life (docs/realtime.md "The `system` channel"): the lifecycle operations emit
 * `project.running`, `project.sleeping`, `snapshot.created` and `project.restored` on the `system`
 * channel; an agent restart drops every subscriber and resets event ids, by contract.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type Agent } from '../../host-agent/agent.ts';
import { loadSettings } from '../../shared/config.ts';
import { REPO } from '../helpers/env.ts';
import { signup, startTestService, type TestService } from '../helpers/service.ts';
import { SseReader } from '../helpers/sse.ts';

let svc: TestService;
let token: string;
let project: string;
let restarted: Agent | undefined;

beforeAll(async () => {
  svc = await startTestService();
  token = (await signup(svc)).token;
  const r = await svc.request('POST', '/v0/projects', { token, body: { name: 'rt-life' } });
  expect(r.status).toBe(201);
  project = ((await r.json()) as { id: string }).id;
});
afterAll(async () => {
  await restarted?.stop();
  await svc?.stop();
});

async function open(channels: string[]): Promise<SseReader> {
  const q = channels.map((c) => `channel=${c}`).join('&');
  const r = await svc.request('GET', `/v0/projects/${project}/realtime/subscribe?${q}`, { token });
  expect(r.status).toBe(200);
  const sse = new SseReader(r);
  expect(await sse.next()).toEqual({ comment: 'subscribed' });
  return sse;
}

async function call(method: string, path: string, body?: unknown): Promise<Record<string, any>> {
  const r = await svc.request(method, `/v0/projects/${project}${path}`, { token, body });
  expect(r.status, await r.clone().text()).toBeLessThan(300);
  return (await r.json()) as Record<string, any>;
}

async function publish(channel: string, event: string, payload: unknown): Promise<Record<string, any>> {
  return call('POST', '/realtime/publish', { channel, event, payload });
}

describe('system channel', () => {
  it('carries project.running, project.sleeping, snapshot.created and project.restored as they happen', async () => {
    const sys = await open(['system']);
    try {
      const expectEvent = async (event: string) => {
        const f = await sys.nextEvent(20_000);
        expect(f?.event).toBe(event);
        const delivered = JSON.parse(f!.data!);
        expect(delivered).toMatchObject({ channel: 'system', event, payload: { project } });
        expect(f?.id).toBe(String(delivered.id));
        return delivered.payload as Record<string, unknown>;
      };
      await call('POST', '/wakeup');
      expect(await expectEvent('project.running')).toMatchObject({ state: 'running' });
      await call('POST', '/sleep');
      expect(await expectEvent('project.sleeping')).toMatchObject({ state: 'sleeping' });
      const snap = await call('POST', '/snapshots', { label: 'rt' });
      expect(await expectEvent('snapshot.created')).toMatchObject({ snapshot_id: snap.id });
      await call('POST', '/restore', { snapshot_id: snap.id });
      expect(await expectEvent('project.restored')).toMatchObject({ snapshot_id: snap.id });
      // Idempotent repeats change nothing and announce nothing.
      await call('POST', '/sleep');
      expect(await sys.quiet(300)).toBeNull();
    } finally {
      await sys.close();
    }
  });
});

describe('not durable', () => {
  it('drops every subscriber and restarts ids at 1 when the agent restarts', async () => {
    const sse = await open(['room']);
    const first = await publish('room', 'before', 1);
    const second = await publish('room', 'before', 2);
    expect(second.id).toBe(first.id + 1);
    expect((await sse.nextEvent())?.id).toBe(String(first.id));
    expect((await sse.nextEvent())?.id).toBe(String(second.id));

    await svc.agent.stop();
    // The stream ends: the subscriber is gone with the process that held it.
    const end = await sse.nextEvent(10_000).then(
      (f) => f,
      (err: Error) => (/timed out/.test(err.message) ? 'still open' : null), // a reset counts as the end
    );
    expect(end).toBeNull();

    restarted = await startAgent(loadSettings(svc.env), { db: svc.db, cwd: REPO, log: (l) => svc.logs.push(l) });
    expect(restarted.ctx.realtime.stats()).toMatchObject({ subscribers: 0, lastId: 0 });
    const fresh = await open(['room']);
    try {
      const after = await publish('room', 'after', 3);
      expect(after.id).toBe(1);
      expect((await fresh.nextEvent())?.id).toBe('1');
    } finally {
      await fresh.close();
    }
  });
});
