import { describe, expect, it } from 'vitest';
import type { AgentRecord } from '../../shared/db/agents.ts';
import { PlacementCache } from './placement-cache.ts';

function agent(agentId: string): AgentRecord {
  return {
    agent_id: agentId,
    internal_url: 'http://127.0.0.1:1',
    dataplane_url: 'http://127.0.0.1:2',
    capacity: 1,
    tenants: 0,
    pin_ok: true,
    engine_version: null,
    started_at: '2026-01-01T00:00:00.000Z',
    heartbeat_at: '2026-01-01T00:00:00.000Z',
  };
}

describe('PlacementCache', () => {
  it('answers what it was told, per kind', () => {
    const cache = new PlacementCache();
    expect(cache.placementOf('prj_1')).toBeUndefined();
    cache.rememberPlacement('prj_1', 'agt_a');
    cache.rememberOwner('prj_1', 'acct_x');
    expect(cache.placementOf('prj_1')).toBe('agt_a');
    expect(cache.ownerOf('prj_1')).toBe('acct_x');
    expect(cache.ownerOf('prj_2')).toBeUndefined();
    cache.rememberPlacement('prj_1', 'agt_b');
    expect(cache.placementOf('prj_1')).toBe('agt_b');
  });

  it('gives an agent record only within the asked age, and forgets it on demand', () => {
    const clock = { at: 1_000 };
    const cache = new PlacementCache({ now: () => clock.at });
    const record = agent('agt_a');
    cache.rememberAgent(record);
    clock.at += 2_000;
    expect(cache.agentRecord('agt_a', 2_000)).toBe(record);
    expect(cache.agentRecord('agt_a', 1_999)).toBeUndefined();
    cache.forgetAgent('agt_a');
    expect(cache.agentRecord('agt_a', Infinity)).toBeUndefined();
  });

  it('forgets a deleted project whole, and nothing of any other', () => {
    const cache = new PlacementCache();
    cache.rememberPlacement('prj_1', 'agt_a');
    cache.rememberOwner('prj_1', 'acct_x');
    cache.rememberOwner('prj_2', 'acct_x');
    cache.rememberAgent(agent('agt_a'));
    cache.forgetProject('prj_1');
    expect(cache.placementOf('prj_1')).toBeUndefined();
    expect(cache.ownerOf('prj_1')).toBeUndefined();
    expect(cache.ownerOf('prj_2')).toBe('acct_x');
    expect(cache.agentRecord('agt_a', Infinity)).toBeDefined();
  });

  it('keeps at most maxEntries, dropping the least recently used', () => {
    const cache = new PlacementCache({ maxEntries: 3 });
    cache.rememberPlacement('prj_1', 'agt_a');
    cache.rememberPlacement('prj_2', 'agt_a');
    cache.rememberOwner('prj_1', 'acct_x');
    expect(cache.placementOf('prj_1')).toBe('agt_a');
    cache.rememberAgent(agent('agt_a'));
    expect(cache.placementOf('prj_2')).toBeUndefined();
    expect(cache.placementOf('prj_1')).toBe('agt_a');
    expect(cache.ownerOf('prj_1')).toBe('acct_x');
    expect(cache.agentRecord('agt_a', Infinity)).toBeDefined();
  });
});
