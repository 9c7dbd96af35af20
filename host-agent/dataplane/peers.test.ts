import { afterEach, describe, expect, it } from 'vitest';
import type { AgentRecord } from '../../shared/db/agents.ts';
import { Peers } from './peers.ts';

const STALE = 1_500;
const REFRESH = 300;
const ID = 'agt_00000000000000bb';

function record(heartbeatAt: number, port = 9001): AgentRecord {
  const at = new Date(heartbeatAt).toISOString();
  return {
    agent_id: ID,
    internal_url: 'http://127.0.0.1:9000',
    dataplane_url: `http://127.0.0.1:${port}`,
    capacity: 10,
    tenants: 0,
    pin_ok: true,
    engine_version: '3.0.0',
    started_at: at,
    heartbeat_at: at,
  };
}

let open: Peers[] = [];
afterEach(async () => {
  await Promise.all(open.map((p) => p.close()));
  open = [];
});

/** A directory over a mutable registration; `now` is the test's clock. */
function directory(initial: AgentRecord | null) {
  const d = {
    now: 1_000_000,
    stored: initial,
    fail: false,
    peers: undefined as unknown as Peers,
  };
  d.peers = new Peers({
    load: async () => {
      if (d.fail) throw new Error('DynamoDB unavailable');
      return d.stored;
    },
    staleMs: STALE,
    refreshMs: REFRESH,
    now: () => d.now,
  });
  open.push(d.peers);
  return d;
}

describe('Peers', () => {
  it('reads a peer once, then forwards from memory while it looks live', async () => {
    const d = directory(record(1_000_000));
    const first = await d.peers.resolve(ID);
    expect(first).toMatchObject({ agentId: ID, dataplaneUrl: 'http://127.0.0.1:9001' });
    d.now += 100;
    expect(await d.peers.resolve(ID)).toMatchObject({ agentId: ID });
    expect(d.peers.reads).toBe(1);
  });

  it('re-reads a live copy in the background once older than refreshMs (a new address is picked up)', async () => {
    const d = directory(record(1_000_000));
    await d.peers.resolve(ID);
    d.now += REFRESH + 1;
    d.stored = record(d.now, 9002);
    // This request still uses the copy; the re-read runs beside it.
    expect(await d.peers.resolve(ID)).toMatchObject({ dataplaneUrl: 'http://127.0.0.1:9001' });
    await new Promise((r) => setTimeout(r, 0));
    expect(await d.peers.resolve(ID)).toMatchObject({ dataplaneUrl: 'http://127.0.0.1:9002' });
    expect(d.peers.reads).toBe(2);
  });

  it('re-reads a copy that looks stale before refusing, so a live peer is never refused for an old copy', async () => {
    const d = directory(record(1_000_000));
    await d.peers.resolve(ID);
    d.now += STALE + 100;
    d.stored = record(d.now - 50);
    expect(await d.peers.resolve(ID)).toMatchObject({ agentId: ID });
    expect(d.peers.reads).toBe(2);
  });

  it('refuses a peer whose heartbeat is older than staleMs, reading at most once per refreshMs', async () => {
    const d = directory(record(1_000_000));
    d.now += STALE + 1;
    expect(await d.peers.resolve(ID)).toEqual({ reason: 'stale', heartbeatAt: new Date(1_000_000).toISOString() });
    for (let i = 0; i < 5; i++) expect(await d.peers.resolve(ID)).toMatchObject({ reason: 'stale' });
    expect(d.peers.reads).toBe(1);
    d.now += REFRESH + 1;
    await d.peers.resolve(ID);
    expect(d.peers.reads).toBe(2);
  });

  it('refuses an unregistered peer, and a stale copy stays refused while the store is unavailable', async () => {
    const gone = directory(null);
    expect(await gone.peers.resolve(ID)).toEqual({ reason: 'unregistered' });
    const d = directory(record(1_000_000));
    await d.peers.resolve(ID);
    d.now += STALE + 1;
    d.fail = true;
    expect(await d.peers.resolve(ID)).toMatchObject({ reason: 'stale' });
    // No copy at all and no store: the failure is the caller's (a 500, not a guess).
    const cold = directory(record(1_000_000));
    cold.fail = true;
    await expect(cold.peers.resolve(ID)).rejects.toThrow('DynamoDB unavailable');
  });

  it('re-reads a suspected peer on its next request', async () => {
    const d = directory(record(1_000_000));
    await d.peers.resolve(ID);
    d.peers.suspect(ID);
    d.stored = record(d.now, 9003);
    await d.peers.resolve(ID);
    await new Promise((r) => setTimeout(r, 0));
    expect(await d.peers.resolve(ID)).toMatchObject({ dataplaneUrl: 'http://127.0.0.1:9003' });
    expect(d.peers.reads).toBe(2);
  });
});
