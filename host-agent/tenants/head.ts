/**
 * What head reports of a tenant (docs/lifecycle.md "head"): a live probe of a running engine, or the
 * offline status of a sleeping one. Plain values: host-agent/routes/answers.ts shapes the answer.
 */
import { existsSync } from 'node:fs';
import type { Db } from '../../shared/db/client.ts';
import { latestSnapshotId } from '../../shared/db/snapshots.ts';
import { ServiceError, errors } from '../../shared/errors.ts';
import type { ProjectState } from '../../shared/schemas/projects.ts';
import { nowIso } from '../../shared/time.ts';
import { statusCommand } from '../engine-commands.ts';
import type { Engines } from './engine.ts';
import type { Layout } from './layout.ts';
import type { TenantLogs } from './logs.ts';
import type { EnginePin } from './pin.ts';
import { probeCapabilities, type ProbeAnswer } from './processes.ts';

/** A running engine's answer to the capabilities probe. */
export interface LiveHead {
  source: 'live_probe';
  state: ProjectState;
  engine: Record<string, unknown> | null;
  host: string;
  port: number;
  probe: ProbeAnswer;
  timestamp: string;
}

/** A sleeping tenant's offline status. */
export interface OfflineHead {
  source: 'offline_status';
  state: ProjectState;
  engine: Record<string, unknown> | null;
  status: Record<string, unknown>;
  latestSnapshot: string | null;
  timestamp: string;
}

/** What head reports. */
export type Head = LiveHead | OfflineHead;

/** What head needs. */
export interface HeadDeps {
  db: Db;
  layout: Layout;
  logs: TenantLogs;
  now: () => number;
  pin: EnginePin;
  engines: Pick<Engines, 'get' | 'run' | 'startTimeoutMs'>;
}

/** Head of a tenant whose state is `state` (the caller corrected it and holds the project's queue). */
export async function headOf(deps: HeadDeps, projectId: string, state: ProjectState): Promise<Head> {
  const { engines, pin } = deps;
  const live = engines.get(projectId);
  if (live && !live.stopping) {
    let probe;
    try {
      probe = await probeCapabilities(live.host, live.port, Math.min(engines.startTimeoutMs, 10_000));
    } catch (err) {
      deps.logs.append(projectId, `head: capabilities probe failed: ${(err as Error).message}`);
      throw errors.upstream('the engine did not answer its capabilities probe');
    }
    return { source: 'live_probe', state, engine: pin.version, host: live.host, port: live.port, probe, timestamp: nowIso(deps.now()) };
  }
  const dataDir = deps.layout.dataDir(projectId);
  if (!existsSync(dataDir)) throw new ServiceError('tenant_not_running', 'the tenant has never started: it has nothing to report; wake it up first');
  await pin.ensure();
  const status = await engines.run(projectId, statusCommand, { dataDir }, 'head', engines.startTimeoutMs);
  const latestSnapshot = await latestSnapshotId(deps.db, projectId);
  return { source: 'offline_status', state, engine: pin.version, status, latestSnapshot, timestamp: nowIso(deps.now()) };
}
