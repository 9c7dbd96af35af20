/**
 * Engines a previous agent left running (docs/lifecycle.md "Crash safety: agent start"): the engine a
 * pid record under `run/` names is adopted when it is alive, is this tenant's, and answers; it is
 * stopped otherwise. An adopted engine is not our child: its exit is polled.
 */
import { nowIso } from '../../shared/time.ts';
import { readJsonRecord } from './files.ts';
import { ENGINE_HOST, removeRecordQuietly, type Live } from './engine.ts';
import type { Layout } from './layout.ts';
import type { Log } from '../../shared/log.ts';
import type { TenantLogs } from './logs.ts';
import { adoptProcess, isSameProcessAlive, probeCapabilities, processCommandLine, stopProcess } from './processes.ts';

/** What adoption needs. */
export interface AdoptionDeps {
  layout: Layout;
  logs: TenantLogs;
  now: () => number;
  log: Log;
  /** Poll interval of an adopted engine's exit. */
  pollMs: number;
  /** `SVCD_ENGINE_STOP_TIMEOUT_MS`. */
  stopTimeoutMs: number;
  /** Takes an adopted engine into the running ones. */
  track: (live: Live) => void;
}

/** Adopts the engine the pid record of `projectId` names when it is alive and answering; stops it otherwise. */
export async function adoptOrStop(deps: AdoptionDeps, projectId: string): Promise<void> {
  const { layout, logs, log } = deps;
  const path = layout.runRecord(projectId);
  const raw = readJsonRecord(path);
  const pid = typeof raw?.pid === 'number' ? raw.pid : null;
  const port = typeof raw?.port === 'number' ? raw.port : null;
  const startTime = typeof raw?.start_time === 'string' ? raw.start_time : null;
  const dataDir = layout.dataDir(projectId);
  if (pid === null || port === null || !isSameProcessAlive(pid, startTime)) {
    removeRecordQuietly(path, log);
    if (pid !== null) logs.append(projectId, `engine (pid ${pid}) of a previous agent is gone`);
    return;
  }
  const commandLine = processCommandLine(pid);
  if (commandLine !== null && !commandLine.includes(dataDir)) {
    // Not an engine of this tenant (a pid reused where start times are unknown): never signal it.
    removeRecordQuietly(path, log);
    return;
  }
  const proc = adoptProcess(pid, startTime, deps.pollMs);
  let answering = false;
  try {
    answering = (await probeCapabilities(ENGINE_HOST, port, 2000)).status === 200;
  } catch {
    answering = false;
  }
  if (answering && proc.alive()) {
    deps.track({
      projectId,
      host: ENGINE_HOST,
      port,
      proc,
      startedAt: typeof raw?.started_at === 'string' ? raw.started_at : nowIso(deps.now()),
      adopted: true,
      stopping: false,
      cleaned: false,
    });
    logs.append(projectId, `engine (pid ${pid}) on port ${port} adopted from a previous agent`);
    log(`agent: adopted the engine of ${projectId} (pid ${pid}, port ${port})`, { level: 'info', event: 'adoption', project_id: projectId, pid, port });
    return;
  }
  logs.append(projectId, `engine (pid ${pid}) of a previous agent does not answer: stopping it`);
  const how = await stopProcess(proc, deps.stopTimeoutMs);
  proc.dispose();
  if (how !== 'lingering') removeRecordQuietly(path, log);
}
