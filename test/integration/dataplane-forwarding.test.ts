/**
 * The one-hop forward between agents' `/v2` listeners (docs/dataplane.md "Several agents"), in
 * process: an "edge" listener (an agent that does not own the project) in front of the "owner"
 * listener (the agent the project is placed on), whose engine is a plain node:http byte sink (the
 * reference engine cannot take 50 MiB; see dataplane-streaming.test.ts). Keys, the project and its
 * placement are real (handlers and DynamoDB Local); both listeners are the agent's own code with
 * their own key caches. The edge reaches the owner through its registration, with the registered
 * `dataplane_url` pointed at the owner listener here.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect } from 'node:net';
import { Client } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyCache } from '../../host-agent/dataplane/key-cache.ts';
import { Peers } from '../../host-agent/dataplane/peers.ts';
import { startDataplane, type Dataplane } from '../../host-agent/dataplane/server.ts';
import { getAgent } from '../../shared/db/agents.ts';
import { lookupKey } from '../../shared/db/keys.ts';
import { getProject } from '../../shared/db/projects.ts';
import { rssGrowth } from '../helpers/memory.ts';
import { signup, startTestService, type TestService } from '../helpers/service.ts';
import { lazyBytes } from '../helpers/bytes.ts';

const MiB = 1024 * 1024;
const EDGE_ID = 'agt_00000000000000ed';


/** The engine stand-in: counts bytes, streams downloads, records headers, remembers open requests. */
interface Sink {
  server: Server;
  port: number;
  open: Set<IncomingMessage>;
  seen: { url: string; headers: IncomingMessage['headers']; bytes: number; complete: boolean }[];
  closed: Promise<void>[];
}

async function startSink(): Promise<Sink> {
  const sink: Sink = { server: undefined as unknown as Server, port: 0, open: new Set(), seen: [], closed: [] };
  sink.server = createServer((req: IncomingMessage, res: ServerResponse) => {
    sink.open.add(req);
    const record = { url: req.url!, headers: req.headers, bytes: 0, complete: false };
    sink.seen.push(record);
    sink.closed.push(new Promise((r) => res.once('close', () => (sink.open.delete(req), r()))));
    const url = new URL(req.url!, 'http://sink');
    if (url.pathname === '/v2/download') {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': url.searchParams.get('bytes')! });
      return void lazyBytes(Number(url.searchParams.get('bytes'))).pipe(res);
    }
    req.on('data', (c: Buffer) => (record.bytes += c.length));
    req.on('end', () => {
      record.complete = true;
      res.writeHead(207, { 'content-type': 'application/vnd.svc.product-v1', 'x-svc-request-id': 'req_00000000000000aa', 'set-cookie': ['a=1', 'b=2'] });
      res.end(JSON.stringify({ bytes: record.bytes }));
    });
  });
  await new Promise<void>((r) => sink.server.listen(0, '127.0.0.1', r));
  sink.port = (sink.server.address() as AddressInfo).port;
  return sink;
}

let svc: TestService;
let sink: Sink;
let owner: Dataplane;
let edge: Dataplane;
let peers: Peers;
let ownerId: string;
let ownerUrl: () => string;
let key: string;
let projectId: string;
let client: Client;
let edgeKeys: KeyCache;
const logs: string[] = [];

function cache(): KeyCache {
  return new KeyCache({
    pepper: svc.env.SVCD_KEY_PEPPER!,
    load: (id) => lookupKey(svc.db, id),
    placement: async (p) => (await getProject(svc.db, p))?.agent_id ?? null,
  });
}

beforeAll(async () => {
  svc = await startTestService();
  const { token } = await signup(svc);
  const p = await svc.request('POST', '/v0/projects', { token, body: { name: 'forward' } });
  projectId = ((await p.json()) as { id: string }).id;
  key = ((await (await svc.request('POST', `/v0/projects/${projectId}/keys`, { token, body: {} })).json()) as { key: string }).key;
  ownerId = svc.agent.ctx.agentId;
  sink = await startSink();
  const endpoints = { liveEndpoint: (id: string) => (id === projectId ? { host: '127.0.0.1', port: sink.port } : null) };
  owner = await startDataplane({ host: '127.0.0.1', port: 0, maxBytes: 64 * MiB, endpoints, keys: cache(), agentId: ownerId, log: (l) => logs.push(l) });
  ownerUrl = () => owner.url;
  // The owner's real registration (heartbeat and all), its dataplane_url pointed at the owner listener.
  peers = new Peers({
    load: async (id) => {
      const r = await getAgent(svc.db, id);
      return r && { ...r, dataplane_url: ownerUrl() };
    },
    staleMs: 20_000,
    refreshMs: 5_000,
  });
  edge = await startDataplane({
    host: '127.0.0.1',
    port: 0,
    maxBytes: 64 * MiB,
    endpoints: { liveEndpoint: () => null },
    keys: (edgeKeys = cache()),
    agentId: EDGE_ID,
    peers,
    log: (l) => logs.push(l),
  });
  client = new Client(edge.url);
});
afterAll(async () => {
  await client?.close();
  await edge?.close();
  await owner?.close();
  await new Promise((r) => sink?.server.close(r));
  await svc?.stop();
});

const auth = () => ({ authorization: `Bearer ${key}`, 'x-svc-protocol-minor': '3' });


describe('a request for a project another agent owns', () => {
  it("is forwarded to the owner with the key, marked, and the owner's answer comes back unchanged", async () => {
    const r = await client.request({ method: 'POST', path: '/v2/sql?x=1', headers: { ...auth(), 'x-custom': 'kept' }, body: '{"sql":"SELECT 1"}' });
    expect(r.statusCode).toBe(207);
    expect(r.headers['content-type']).toBe('application/vnd.svc.product-v1');
    expect(r.headers['x-svc-request-id']).toBe('req_00000000000000aa');
    expect(r.headers['set-cookie']).toEqual(['a=1', 'b=2']);
    // One request id: the owner's (the agent that served it).
    expect(r.headers['x-request-id']).toMatch(/^req_[0-9a-f]{16}$/);
    expect(await r.body.json()).toEqual({ bytes: 18 });
    const seen = sink.seen.at(-1)!;
    expect(seen.url).toBe('/v2/sql?x=1');
    expect(seen.headers['x-custom']).toBe('kept');
    // The key and the forwarding mark end at the owner; neither reaches an engine.
    expect(seen.headers.authorization).toBeUndefined();
    expect(seen.headers['x-svc-forwarded-by']).toBeUndefined();
  });

  it('reads nothing from DynamoDB on the edge once warm: key, placement and owner from memory', async () => {
    const reads = peers.reads;
    const loads = { ...edgeKeys.stats };
    for (let i = 0; i < 5; i++) {
      const r = await client.request({ method: 'POST', path: '/v2/sql', headers: auth(), body: '{}' });
      expect(r.statusCode).toBe(207);
      await r.body.dump();
    }
    expect(peers.reads).toBe(reads);
    expect(edgeKeys.stats.loads).toBe(loads.loads);
    expect(edgeKeys.stats.placementLoads).toBe(loads.placementLoads);
    expect(edgeKeys.stats.hits).toBe(loads.hits + 5);
  });

  it('warms up (so first-use allocations do not count as growth)', async () => {
    for (const length of [true, false]) {
      const r = await client.request({ method: 'PUT', path: '/v2/blob', headers: { ...auth(), ...(length ? { 'content-length': String(8 * MiB) } : {}) }, body: lazyBytes(8 * MiB) });
      expect(await r.body.json()).toEqual({ bytes: 8 * MiB });
    }
    const d = await client.request({ method: 'GET', path: `/v2/download?bytes=${8 * MiB}`, headers: auth() });
    await d.body.dump({ limit: Infinity });
  });

  it('uploads 50 MiB through both hops (with and without a length): RSS grows by less than 20 MiB', async () => {
    for (const length of [true, false]) {
      let answer: unknown;
      const growth = await rssGrowth(async () => {
        const r = await client.request({
          method: 'PUT',
          path: '/v2/blob',
          headers: { ...auth(), ...(length ? { 'content-length': String(50 * MiB) } : {}) },
          body: lazyBytes(50 * MiB),
        });
        answer = await r.body.json();
      });
      expect(answer).toEqual({ bytes: 50 * MiB });
      console.log(`RSS growth ${(growth / MiB).toFixed(1)} MiB (upload, ${length ? 'Content-Length' : 'chunked'})`);
      expect(growth).toBeLessThan(20 * MiB);
    }
  });

  it('downloads 50 MiB through both hops: RSS grows by less than 20 MiB, the length passed through', async () => {
    let bytes = 0;
    let length: unknown;
    const growth = await rssGrowth(async () => {
      const r = await client.request({ method: 'GET', path: `/v2/download?bytes=${50 * MiB}`, headers: auth() });
      length = r.headers['content-length'];
      for await (const c of r.body) bytes += (c as Buffer).length;
    });
    expect(length).toBe(String(50 * MiB));
    expect(bytes).toBe(50 * MiB);
    console.log(`RSS growth ${(growth / MiB).toFixed(1)} MiB (download)`);
    expect(growth).toBeLessThan(20 * MiB);
  });

  it('a client that goes away mid-upload aborts both hops: nothing stays open', async () => {
    const before = sink.seen.length;
    const socket = connect(edge.port, '127.0.0.1');
    await new Promise((r) => socket.once('connect', r));
    socket.write(`POST /v2/sql HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${key}\r\ncontent-length: ${10 * MiB}\r\n\r\n`);
    socket.write(Buffer.alloc(MiB));
    for (let i = 0; i < 200 && sink.seen.length === before; i++) await new Promise((r) => setTimeout(r, 10));
    expect(sink.seen.length).toBe(before + 1);
    socket.destroy();
    await Promise.all(sink.closed);
    await new Promise((r) => setTimeout(r, 50));
    expect(sink.open.size).toBe(0);
    expect(sink.seen.at(-1)!.complete).toBe(false);
  });

  it('answers Expect: 100-continue after the edge checks, and a refused upload is never sent', async () => {
    const exchange = async (length: number, token: string) => {
      const socket = connect(edge.port, '127.0.0.1');
      const closed = new Promise((r) => socket.once('close', r));
      let text = '';
      socket.setEncoding('latin1').on('data', (d: string) => (text += d));
      socket.write(`POST /v2/sql HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${token}\r\ncontent-length: ${length}\r\nexpect: 100-continue\r\nconnection: close\r\n\r\n`);
      for (let i = 0; i < 200 && !/\r\n\r\n/.test(text); i++) await new Promise((r) => setTimeout(r, 5));
      const first = text;
      if (first.startsWith('HTTP/1.1 100')) socket.write(Buffer.alloc(length, 0x62));
      await closed;
      return { first, all: text };
    };
    const before = sink.seen.length;
    expect((await exchange(65 * MiB, key)).first).toMatch(/^HTTP\/1\.1 413 /);
    expect((await exchange(10, key.slice(0, -64) + '0'.repeat(64))).first).toMatch(/^HTTP\/1\.1 401 /);
    expect(sink.seen.length).toBe(before);
    const accepted = await exchange(1000, key);
    expect(accepted.first).toMatch(/^HTTP\/1\.1 100 Continue/);
    expect(accepted.all).toContain('{"bytes":1000}');
  });

  it('answers 503 orchestrator_unavailable when the owner listener does not answer, and re-reads its registration', async () => {
    const gone = createServer();
    await new Promise<void>((r) => gone.listen(0, '127.0.0.1', r));
    const deadUrl = `http://127.0.0.1:${(gone.address() as AddressInfo).port}`;
    await new Promise((r) => gone.close(r));
    const fresh = new Peers({ load: async (id) => ({ ...(await getAgent(svc.db, id))!, dataplane_url: deadUrl }), staleMs: 20_000, refreshMs: 5_000 });
    const p = await startDataplane({ host: '127.0.0.1', port: 0, maxBytes: MiB, endpoints: { liveEndpoint: () => null }, keys: cache(), agentId: EDGE_ID, peers: fresh, log: () => {} });
    try {
      const r = await fetch(`${p.url}/v2/sql`, { method: 'POST', headers: auth(), body: '{}' });
      expect(r.status).toBe(503);
      expect(r.headers.get('x-request-id')).toMatch(/^req_[0-9a-f]{16}$/);
      expect(((await r.json()) as any).error).toEqual({ code: 'orchestrator_unavailable', message: `the host agent of project ${projectId} did not answer` });
      expect(fresh.reads).toBe(1);
      await (await fetch(`${p.url}/v2/sql`, { method: 'POST', headers: auth(), body: '{}' })).arrayBuffer();
      await new Promise((r) => setTimeout(r, 50));
      expect(fresh.reads).toBe(2);
    } finally {
      await p.close();
    }
  });
});
