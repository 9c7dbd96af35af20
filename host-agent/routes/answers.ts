/**
 * The answers of the internal lifecycle routes, which the handlers pass on as the public ones (the
 * interface contract, docs/interface.md; docs/lifecycle.md "head", "Restore answer"), built from the
 * supervisor's plain values.
 */
import { DATA_PLANE } from '../../shared/schemas/projects.ts';
import type { Head, RestoreResult } from '../tenants/tenants.ts';

/** The answer of head (contract "GET /v0/projects/{id}/head"). */
export function headAnswer(head: Head): Record<string, unknown> {
  if (head.source === 'live_probe') {
    const { probe } = head;
    const minor = headerValue(probe.headers['x-svc-protocol-minor']);
    return {
      state: head.state,
      source: head.source,
      engine: head.engine,
      endpoint: { data_plane: DATA_PLANE, address: `${head.host}:${head.port}`, host: head.host, port: head.port },
      protocol_minor: minor !== null && /^\d+$/.test(minor) ? Number(minor) : minor,
      request_id: headerValue(probe.headers['x-svc-request-id']),
      capabilities: {
        status: probe.status,
        content_type: headerValue(probe.headers['content-type']),
        body_base64: probe.body.toString('base64'),
      },
      timestamp: head.timestamp,
    };
  }
  return {
    state: head.state,
    source: head.source,
    engine: head.engine,
    endpoint: { data_plane: DATA_PLANE, address: null },
    lineage: head.status,
    ...(head.latestSnapshot ? { latest_snapshot: head.latestSnapshot } : {}),
    timestamp: head.timestamp,
  };
}

/** The answer of a restore (contract "POST /v0/projects/{id}/restore"). */
export function restoreAnswer(result: RestoreResult): Record<string, unknown> {
  return {
    state: result.state,
    snapshot_id: result.snapshotId,
    restored_at: result.restoredAt,
    data_dir: result.dataDir,
    replaced_dir: result.replacedDir,
    native: { restore: result.restoreOutput, backup: result.backup },
  };
}

function headerValue(value: string | string[] | undefined): string | null {
  if (value === undefined) return null;
  return Array.isArray(value) ? value.join(', ') : value;
}
