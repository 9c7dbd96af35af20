/**
 * The `fs` store's host agent as the byte routes find it (handlers/domain/placement.ts): a record read in the
 * last seconds stands in for a fresh read, but never makes a dead or stale agent look live, and one
 * that does not answer is read again before the request is answered. Real DynamoDB Local and a real
 * host agent; the agent's heartbeat is set far apart so the tests decide its `heartbeat_at`, and each
 * test's app has a clock of its own.
 */
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDeps } from '../../handlers/deps.ts';
import { createApp, type App } from '../../handlers/index.ts';
import { AGENT_RECORD_REUSE_MS } from '../../handlers/domain/placement.ts';
import { PlacementCache } from '../../handlers/domain/placement-cache.ts';
import { getAgent, heartbeatAgent, registerAgent, type AgentRecord } from '../../shared/db/agents.ts';
import { signup, startTestService, type TestService } from '../helpers/service.ts';
import { patternBytes } from '../helpers/bytes.ts';
import { issueInternalToken } from '../../shared/auth.ts';
import { blobName, newWriteId } from '../../shared/blobs/names.ts';

const STALE_MS = 20_000;

let svc: TestService;
let token: string;
let prj: string;
let agentId: string;
let registered: AgentRecord;
const objectUrl = (key: string) => `/v0/projects/${prj}/storage/objects/files/${key}`;

beforeAll(async () => {
  svc = await startTestService({ SVCD_HEARTBEAT_MS: '600000', SVCD_AGENT_STALE_MS: String(STALE_MS) });
  ({ token } = await signup(svc));
  const r = await svc.request('POST', '/v0/projects', { token, body: { name: 'storage-agent' } });
  prj = ((await r.json()) as { id: string }).id;
  expect((await svc.request('PUT', `/v0/projects/${prj}/storage/buckets/files`, { token })).status).toBe(201);
  const put = await svc.app.fetch(
    new Request(`http://svc.test${objectUrl('a')}`, { method: 'PUT', headers: { authorization: `Bearer ${token}` }, body: patternBytes(5000, 1) }),
  );
  expect(put.status).toBe(201);
  agentId = svc.agent.ctx.agentId;
  registered = (await getAgent(svc.db, agentId))!;
});
afterAll(() => svc?.stop());

/** Registers the agent at `internalUrl` with a heartbeat at `heartbeatAt` (ms). */
async function reregister(internalUrl: string, heartbeatAt: number): Promise<void> {
  await registerAgent(svc.db, { ...registered, internal_url: internalUrl, heartbeat_at: new Date(heartbeatAt).toISOString() });
}

/** An app of its own with a clock the test moves. */
function appWithClock(at: number): { app: App; clock: { at: number }; deps: ReturnType<typeof buildDeps>; get: (key: string) => Promise<Response>; put: (key: string, bytes: Uint8Array<ArrayBuffer>) => Promise<Response> } {
  const clock = { at };
  const now = () => clock.at;
  const deps = { ...buildDeps(svc.env, () => {}), now, placement: new PlacementCache({ now }) };
  const app = createApp(deps);
  const send = (method: string, key: string, body?: Uint8Array<ArrayBuffer>) =>
    app.fetch(new Request(`http://svc.test${objectUrl(key)}`, { method, headers: { authorization: `Bearer ${token}` }, body }));
  return { app, clock, deps, get: (key) => send('GET', key), put: (key, bytes) => send('PUT', key, bytes) };
}

/** A TCP relay to the agent's internal listener that can be shut, counting its connections. */
async function relay(): Promise<{ url: string; connections: () => number; close: () => Promise<void> }> {
  const target = new URL(svc.agent.internalUrl);
  const sockets = new Set<Socket>();
  let count = 0;
  const server: Server = createServer((inbound) => {
    count++;
    const outbound = connect(Number(target.port), target.hostname);
    for (const s of [inbound, outbound]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => {});
    }
    inbound.pipe(outbound).pipe(inbound);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    connections: () => count,
    close: () =>
      new Promise<void>((r) => {
        server.close(() => r());
        for (const s of sockets) s.destroy();
      }),
  };
}

async function errorOf(r: Response): Promise<{ code: string; message: string }> {
  return ((await r.json()) as { error: { code: string; message: string } }).error;
}

describe('the agent of the fs store', () => {
  it('is read once and then remembered for a few seconds', async () => {
    await reregister(svc.agent.internalUrl, Date.now());
    const { get, clock, deps } = appWithClock(Date.now());
    expect((await get('a')).status).toBe(200);
    const first = deps.placement.agentRecord(agentId, Infinity)!;
    expect(first.internal_url).toBe(svc.agent.internalUrl);
    clock.at += AGENT_RECORD_REUSE_MS;
    expect((await get('a')).status).toBe(200);
    expect(deps.placement.agentRecord(agentId, Infinity)).toBe(first);
    clock.at += 1;
    expect((await get('a')).status).toBe(200);
    expect(deps.placement.agentRecord(agentId, Infinity)).not.toBe(first);
  });

  it('that moved is found at its new address: a remembered record that does not answer is read again', async () => {
    const old = await relay();
    try {
      await reregister(old.url, Date.now());
      const { get } = appWithClock(Date.now());
      expect((await get('a')).status).toBe(200);
      expect(old.connections()).toBeGreaterThan(0);
      // The agent now registers its real address; the remembered one stops answering.
      await old.close();
      await reregister(svc.agent.internalUrl, Date.now());
      const r = await get('a');
      expect(r.status).toBe(200);
      expect(new Uint8Array(await r.arrayBuffer())).toEqual(patternBytes(5000, 1));
    } finally {
      await old.close();
      await reregister(svc.agent.internalUrl, Date.now());
    }
  });

  it('that does not answer is 502 upstream_unavailable, a PUT stores nothing, and its record is read afresh next time', async () => {
    const gone = await relay();
    await reregister(gone.url, Date.now());
    const { get, put, deps } = appWithClock(Date.now());
    try {
      expect((await get('a')).status).toBe(200);
      await gone.close();
      const g = await get('a');
      expect(g.status).toBe(502);
      expect((await errorOf(g)).code).toBe('upstream_unavailable');
      expect(deps.placement.agentRecord(agentId, Infinity)).toBeUndefined();
      // Remembered again by the GET's re-read (same address), forgotten again by the PUT's failure.
      const p = await put('a', patternBytes(100, 9));
      expect(p.status).toBe(502);
      expect((await errorOf(p)).code).toBe('upstream_unavailable');
      expect(deps.placement.agentRecord(agentId, Infinity)).toBeUndefined();
      // Back at its address: served at once, with the clock not moved, since nothing stale is remembered.
      await reregister(svc.agent.internalUrl, Date.now());
      const back = await get('a');
      expect(back.status).toBe(200);
      expect(new Uint8Array(await back.arrayBuffer())).toEqual(patternBytes(5000, 1));
    } finally {
      await reregister(svc.agent.internalUrl, Date.now());
    }
  });

  it('whose remembered record looks stale is read again before it is judged', async () => {
    const t0 = Date.now();
    await reregister(svc.agent.internalUrl, t0 - STALE_MS + 1000);
    const { get, clock } = appWithClock(t0);
    expect((await get('a')).status).toBe(200);
    // Within the reuse window the remembered heartbeat is too old; the registry has a newer one.
    clock.at = t0 + 1500;
    await heartbeatAgent(svc.db, agentId, new Date(t0 + 1000).toISOString(), true);
    expect((await get('a')).status).toBe(200);
  });

  it('that stopped heartbeating is 502 upstream_unavailable, remembered or not', async () => {
    const t0 = Date.now();
    await reregister(svc.agent.internalUrl, t0 - STALE_MS + 500);
    try {
      const { get, clock } = appWithClock(t0);
      expect((await get('a')).status).toBe(200);
      clock.at = t0 + 1000;
      const r = await get('a');
      expect(r.status).toBe(502);
      const error = await errorOf(r);
      expect(error.code).toBe('upstream_unavailable');
      expect(error.message).toMatch(/not answering/);
    } finally {
      await reregister(svc.agent.internalUrl, Date.now());
    }
  });
});

describe('an over-limit body of unknown length sent to the agent', () => {
  it('is answered 413 while the rest is read, then the connection closes cleanly: never stalled, never reset', async () => {
    const name = await blobName(prj, 'files', 'big', newWriteId());
    const token = await issueInternalToken(svc.env.SVCD_INTERNAL_SECRET!);
    const url = new URL(svc.agent.internalUrl);
    const socket = connect(Number(url.port), url.hostname);
    let answer = '';
    let failure: Error | null = null;
    socket.setEncoding('latin1').on('data', (d: string) => (answer += d));
    socket.on('error', (err) => (failure = err));
    const closed = new Promise<void>((r) => socket.once('close', () => r()));
    socket.write(
      `PUT /internal/v1/blobs/${prj}/${name} HTTP/1.1\r\nhost: ${url.host}\r\nauthorization: Bearer ${token}\r\n` +
        `x-svc-max-bytes: ${1024 * 1024}\r\ntransfer-encoding: chunked\r\n\r\n`,
    );
    // 16 MiB against a 1 MiB limit, written as fast as the socket takes it, then the last chunk.
    const chunk = patternBytes(64 * 1024, 3);
    const head = Buffer.from(`${chunk.byteLength.toString(16)}\r\n`);
    const send = async () => {
      for (let i = 0; i < 256 && !socket.destroyed; i++) {
        if (!socket.write(Buffer.concat([head, chunk, Buffer.from('\r\n')]))) await new Promise((r) => socket.once('drain', r));
      }
      socket.end('0\r\n\r\n');
      await closed;
    };
    let timer: NodeJS.Timeout | undefined;
    const stuck = new Promise<string>((r) => (timer = setTimeout(() => r('stuck'), 10_000)));
    const outcome = await Promise.race([send().then(() => 'closed'), stuck]);
    clearTimeout(timer);
    socket.destroy();
    expect(outcome, 'the agent stopped reading the body but kept the connection open').toBe('closed');
    expect(failure).toBeNull();
    expect(answer).toMatch(/^HTTP\/1\.1 413 /);
    expect(answer).toContain('payload_too_large');
  });
});
