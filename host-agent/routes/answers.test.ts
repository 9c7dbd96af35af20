/** Head and restore answers built from the supervisor's plain values. */
import { describe, expect, it } from 'vitest';
import { headAnswer, restoreAnswer } from './answers.ts';

const engine = { engine_version: '3.0.0' };
const timestamp = '2026-01-01T00:00:00.000Z';

describe('headAnswer', () => {
  it('reports a live probe with its endpoint, a numeric protocol minor and the capabilities verbatim', () => {
    const answer = headAnswer({
      source: 'live_probe',
      state: 'running',
      engine,
      host: '127.0.0.1',
      port: 4100,
      probe: { status: 200, headers: { 'x-svc-protocol-minor': '3', 'x-svc-request-id': 'r1', 'content-type': 'application/json' }, body: Buffer.from('{"a":1}') },
      timestamp,
    });
    expect(answer).toEqual({
      state: 'running',
      source: 'live_probe',
      engine,
      endpoint: { data_plane: '/v2', address: '127.0.0.1:4100', host: '127.0.0.1', port: 4100 },
      protocol_minor: 3,
      request_id: 'r1',
      capabilities: { status: 200, content_type: 'application/json', body_base64: Buffer.from('{"a":1}').toString('base64') },
      timestamp,
    });
  });

  it('keeps a protocol minor that is not a number as the engine sent it, and absent headers as null', () => {
    const answer = headAnswer({ source: 'live_probe', state: 'running', engine, host: 'h', port: 1, probe: { status: 200, headers: { 'x-svc-protocol-minor': '3a' }, body: Buffer.alloc(0) }, timestamp });
    expect(answer).toMatchObject({ protocol_minor: '3a', request_id: null, capabilities: { content_type: null } });
  });

  it('reports an offline status with the lineage, and names the latest snapshot only when there is one', () => {
    const status = { visible_csn: 7 };
    const withLatest = headAnswer({ source: 'offline_status', state: 'sleeping', engine, status, latestSnapshot: 'snap_0123456789abcdef', timestamp });
    expect(withLatest).toEqual({ state: 'sleeping', source: 'offline_status', engine, endpoint: { data_plane: '/v2', address: null }, lineage: status, latest_snapshot: 'snap_0123456789abcdef', timestamp });
    const without = headAnswer({ source: 'offline_status', state: 'sleeping', engine, status, latestSnapshot: null, timestamp });
    expect(without).not.toHaveProperty('latest_snapshot');
  });
});

describe('restoreAnswer', () => {
  it('names the snapshot, the directories and the engine output under native', () => {
    const backup = { backup_path: '/b', checkpoint_digest: 'd', file_count: 1, total_bytes: 2, status: 'verified' as const, visible_csn: 3 };
    expect(
      restoreAnswer({ state: 'sleeping', snapshotId: 'snap_0123456789abcdef', restoredAt: timestamp, dataDir: '/d', replacedDir: null, restoreOutput: { ok: true }, backup }),
    ).toEqual({ state: 'sleeping', snapshot_id: 'snap_0123456789abcdef', restored_at: timestamp, data_dir: '/d', replaced_dir: null, native: { restore: { ok: true }, backup } });
  });
});
