/**
 * The local stack (`npm start`, and the end-to-end tests): DynamoDB Local, one host agent (or N with
 * `agents`) as child processes, and the handlers bundle inside miniflare (workerd) behind the front on
 * the public port. Secrets are generated once under the stack directory and handed to every child;
 * nothing needs a cloud account.
 *
 * Several agents (`npm start -- --agents 2`): each has its own `SVCD_ROOT` (`<dir>/agent` for the
 * first, so a single agent's state stays where it was, then `<dir>/agent-2`, ...), hence its own
 * persisted agent id, and its own ports (the first keeps `SVCD_AGENT_PORT`/`SVCD_DATAPLANE_PORT`, the
 * others take free ones and register their real URLs). All register in the one table; the front
 * sends `/v2` round-robin over their listeners (docs/dataplane.md "Several agents").
 *
 * Processes (docs/local-stack.md): one stack per directory (`lock.ts`); every child watches a pipe
 * from the supervisor and ends when it closes, so nothing outlives the stack however it ends; what a
 * dead stack left anyway is recorded in the lock and cleared by the next start. Ports follow
 * SVCD_PORT (+1 agent, +2 `/v2`, +3 DynamoDB Local) unless set. With `restartAgents`, an agent
 * that dies is started again with backoff, and the stack says so.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { loadSettings, type Settings } from '../../shared/config.ts';
import type { Log } from '../../shared/log.ts';
import { createDb, ensureTable } from '../../shared/db/client.ts';
import { getAgent } from '../../shared/db/agents.ts';
import { parseCorsOrigins } from '../../shared/http/cors.ts';
import { awaitReadyLine, exitOf, stopChild } from './children.ts';
import { startFront, type Handoff } from './front-proxy.ts';
import { handOver } from '../../shared/http/handoff.ts';
import { assertPortFree, freePort, portIsFree, startDynamoLocal, type DynamoLocal } from './dynamodb.ts';
import { acquireStackLock, displayDir } from './lock.ts';
import { groupMembers, killRecorded, signalGroup, waitGone } from './processes.ts';
import { NODE_BIN, openRepositoryToEngines, REPO_ROOT } from './paths.ts';

export { REPO_ROOT };

/** Options of a stack. */
export interface StackOptions {
  /** Stack directory (`.svc` for `npm start`): secrets, DynamoDB files, agent roots. */
  dir: string;
  /** Settings from the environment (`SVCD_*`); the stack fills in what it owns. */
  env?: Record<string, string | undefined>;
  /** Keep DynamoDB on disk under `dir` (npm start) or in memory (tests). */
  persist?: boolean;
  /** Use this DynamoDB instead of starting one. */
  dynamoEndpoint?: string;
  /**
   * Port of DynamoDB Local when the stack starts it (0: any free one). Unset: SVCD_PORT + 3 when
   * that is free, else a free one.
   */
  dynamoPort?: number;
  log?: Log;
  /** Pass the agent's stderr through (npm start) or collect it (tests). */
  agentOutput?: 'inherit' | 'collect';
  /** How many host agents to run (default 1). */
  agents?: number;
  /**
   * Start an agent that dies again, on the same root and ports, after 0.5 s doubling to 30 s
   * (`npm start`). Off by default: tests kill agents on purpose and watch what follows.
   */
  restartAgents?: boolean;
}

/** One host agent of a stack. */
export interface StackAgent {
  /** Its registered id (persisted under its root). */
  id: string;
  /** Its `SVCD_ROOT`. */
  root: string;
  process: ChildProcess;
  log: () => string;
  internalUrl: string;
  dataplaneUrl: string;
  /** Its Prometheus listener (`GET /metrics`), from its ready line. */
  metricsUrl: string;
}

/** A running stack. */
export interface Stack {
  url: string;
  /** The stack directory (absolute). */
  dir: string;
  settings: Settings;
  env: Record<string, string>;
  /** The first agent's current process and log (a single-agent stack's only agent). */
  readonly agent: ChildProcess;
  readonly agentLog: () => string;
  /** Every agent, the first first (an entry is replaced when its agent is started again). */
  agents: StackAgent[];
  /**
   * Starts agent `index` again (after it was stopped or killed) on the same root and ports, so it
   * comes back with the same id and addresses, adopts the engines it left and heartbeats again.
   */
  restartAgent(index: number): Promise<StackAgent>;
  workerHost: ChildProcess;
  dynamoEndpoint: string;
  stop(): Promise<void>;
}

/** Local secrets, created once with owner-only permissions. */
export function localSecrets(dir: string): Record<string, string> {
  const file = join(dir, 'secrets.json');
  if (existsSync(file)) return JSON.parse(readFileSync(file, 'utf8'));
  mkdirSync(dir, { recursive: true });
  const secrets = {
    SVCD_SESSION_SECRET: randomBytes(32).toString('hex'),
    SVCD_KEY_PEPPER: randomBytes(32).toString('hex'),
    SVCD_INTERNAL_SECRET: randomBytes(32).toString('hex'),
    SVCD_SECRETS_KEYS: `k1:${randomBytes(32).toString('base64')}`,
  };
  writeFileSync(file, JSON.stringify(secrets, null, 2), { mode: 0o600 });
  return secrets;
}

/** First delay before an agent that died is started again; it doubles on each death up to the next constant. */
const RESTART_FIRST_MS = 500;
const RESTART_MAX_MS = 30_000;
/** An agent that stayed up this long starts from the first delay again when it next dies. */
const RESTART_RESET_MS = 30_000;

function seconds(ms: number): string {
  return `${ms / 1000} s`;
}

/** Starts the whole local stack. */
export async function startStack(options: StackOptions): Promise<Stack> {
  const log = options.log ?? ((line: string) => console.error(line));
  const dir = resolve(options.dir);
  const fromEnv: Record<string, string> = {};
  for (const [k, v] of Object.entries(options.env ?? {})) if (k.startsWith('SVCD_') && v !== undefined && v !== '') fromEnv[k] = v;

  const count = options.agents ?? 1;
  if (!Number.isInteger(count) || count < 1 || count > 64) throw new Error(`agents must be an integer from 1 to 64, got ${count}`);
  mkdirSync(dir, { recursive: true });
  // First of all: a directory held by a live stack starts nothing (docs/local-stack.md).
  const lock = await acquireStackLock(dir);
  // An agent running as root runs its engines as their own user (docs/lifecycle.md "Engine
  // isolation"), who must reach the agents' roots inside: search permission only, no listing; the
  // secrets file is the owner's alone and DynamoDB Local's files sit in a directory of their own.
  const mode = statSync(dir).mode & 0o7777;
  if ((mode & 0o001) === 0) chmodSync(dir, mode | 0o001);
  // And the engine program with its Node, inside this repository, wherever the repository lies.
  const opened = openRepositoryToEngines();
  if (opened.length > 0) log(`stack: gave others search permission on ${opened.join(', ')} so engines, run as their own user, reach the repository`);

  // Every process the stack spawned and that still runs. Each leads its own process group; the
  // members of those groups are recorded in the lock, for the next start to clear if this
  // supervisor dies in a way its children's pipes did not cover (a child killed with SIGKILL).
  // Groups are kept after their leader exits: what the leader started (java under a killed tether)
  // still carries the group id and must stay recorded.
  const groups = new Set<number>();
  const record = () => {
    try {
      lock.update({ children: groupMembers(groups) });
    } catch (err) {
      log(`stack: cannot record its processes in ${lock.file}: ${(err as Error).message}`);
    }
  };
  let stopping = false;
  const track = (child: ChildProcess, what: string, unexpected: boolean) => {
    if (child.pid) groups.add(child.pid);
    child.once('exit', (code, signal) => {
      if (stopping) return;
      // What the child started in its group (java, workerd) must not outlive it.
      if (child.pid) signalGroup(child.pid, 'SIGKILL');
      record();
      if (unexpected) log(`stack: ${what} exited (${exitOf(code, signal)}); stop the stack (Ctrl-C) and start it again`);
    });
  };
  /**
   * Spawns a service child; stderr passes through or is kept (last 1 MB) for error reports. With
   * `ipc`, the child has an IPC channel too (the agents: the front hands connections over it).
   */
  const spawnService = (bin: string, args: string[], env: Record<string, string>, ipc = false) => {
    let output = '';
    // Own process group: a terminal's Ctrl-C reaches only the supervisor, which stops children in
    // order. stdin is a pipe the child watches: its end means the supervisor is gone.
    const stderr = options.agentOutput === 'inherit' ? 'inherit' : 'pipe';
    const child = spawn(bin, args, { cwd: REPO_ROOT, env, detached: true, stdio: ipc ? ['pipe', 'pipe', stderr, 'ipc'] : ['pipe', 'pipe', stderr] });
    child.stdin!.on('error', () => {});
    child.stderr?.setEncoding('utf8').on('data', (d: string) => {
      output = (output + d).slice(-1_000_000);
    });
    return { child, output: () => output };
  };

  const cleanups: (() => Promise<void>)[] = [async () => lock.release()];
  const stopAll = async () => {
    stopping = true;
    for (const c of cleanups.splice(0).reverse()) await c().catch((err) => log(`stack: stop failed: ${(err as Error).message}`));
  };
  try {
    // What a stack that died left running (its record in the lock we took over) goes first: it
    // may hold the ports and the DynamoDB files.
    const leftovers = killRecorded(lock.leftovers);
    if (leftovers.length > 0) {
      log(`stack: stopped ${leftovers.length} process(es) left running in ${displayDir(dir)} by a stack that died (pid ${lock.previousPid})`);
      if (!(await waitGone(leftovers.map((r) => r.pid), 5_000))) log('stack: some of them are still exiting');
    }

    const env: Record<string, string> = {
      SVCD_ROOT: join(dir, 'agent'),
      SVCD_AWS_ACCESS_KEY_ID: 'local',
      SVCD_AWS_SECRET_ACCESS_KEY: 'local',
      // A page on any local origin may call the stack (docs/api.md "Browsers and CORS").
      SVCD_CORS_ORIGINS: '*',
      // Function runtimes get the OS sandbox wherever this host can give it; the agent falls back to
      // none only where it cannot (no root, no namespaces), and says so (docs/functions.md "Isolation").
      SVCD_FUNCTION_SANDBOX: 'auto',
      ...localSecrets(dir),
      ...fromEnv,
    };
    // Validate everything before starting anything: a bad setting fails with one line.
    let settings = loadSettings(env);
    await assertPortFree(settings.SVCD_HOST, settings.SVCD_PORT, 'SVCD_PORT');
    // The stack's other ports follow SVCD_PORT (the defaults 8787..8790 are that rule), so one
    // setting moves the whole stack; one that is taken is replaced by a free one. A port set
    // explicitly is used as given, and a taken one fails the start naming its setting.
    const follow = async (offset: number, host: string): Promise<number> => {
      const p = settings.SVCD_PORT + offset;
      return settings.SVCD_PORT !== 0 && p <= 65535 && (await portIsFree(host, p)) ? p : 0;
    };
    for (const [setting, offset] of [['SVCD_AGENT_PORT', 1], ['SVCD_DATAPLANE_PORT', 2], ['SVCD_METRICS_PORT', 4]] as const) {
      if (fromEnv[setting] === undefined) env[setting] = String(await follow(offset, settings.SVCD_AGENT_HOST));
      else if (settings[setting]) await assertPortFree(settings.SVCD_AGENT_HOST, settings[setting], setting);
    }

    let dynamo: DynamoLocal | undefined;
    if (!options.dynamoEndpoint && !fromEnv.SVCD_DYNAMODB_ENDPOINT) {
      let port = options.dynamoPort;
      if (port) await assertPortFree('127.0.0.1', port, '--dynamodb-port');
      port ??= await follow(3, '127.0.0.1');
      dynamo = await startDynamoLocal({ port, dbPath: options.persist ? join(dir, 'dynamodb') : undefined });
      track(dynamo.process, 'DynamoDB Local', true);
      record();
      cleanups.push(() => dynamo!.stop());
      env.SVCD_DYNAMODB_ENDPOINT = dynamo.endpoint;
    } else if (options.dynamoEndpoint) {
      env.SVCD_DYNAMODB_ENDPOINT = options.dynamoEndpoint;
    }
    settings = loadSettings(env);
    await ensureTable(createDb(settings));
    // Functions see the front's origin as CLOUD_ORIGIN, not miniflare's internal one (docs/functions.md "Environment").
    if (fromEnv.SVCD_CLOUD_ORIGIN === undefined && settings.SVCD_PORT !== 0) {
      const host = settings.SVCD_HOST === '0.0.0.0' || settings.SVCD_HOST === '::' ? '127.0.0.1' : settings.SVCD_HOST;
      env.SVCD_CLOUD_ORIGIN = `http://${host.includes(':') ? `[${host}]` : host}:${settings.SVCD_PORT}`;
    }

    // NODE_OPTIONS reaches every Node process of the stack (say --cpu-prof to profile it, docs/local-stack.md).
    const nodeOptions = options.env?.NODE_OPTIONS;
    const childEnv = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/tmp', ...(nodeOptions ? { NODE_OPTIONS: nodeOptions } : {}), ...env };
    const db = createDb(settings);
    const agentEnvs: Record<string, string>[] = [];
    for (let i = 0; i < count; i++) {
      if (i === 0) {
        agentEnvs.push(childEnv);
        continue;
      }
      // Its own root (so its own id) and free ports; an id or URLs set for the stack are the first agent's.
      const e: Record<string, string> = { ...childEnv, SVCD_ROOT: join(dir, `agent-${i + 1}`), SVCD_AGENT_PORT: '0', SVCD_DATAPLANE_PORT: '0', SVCD_METRICS_PORT: '0' };
      delete e.SVCD_AGENT_ID;
      delete e.SVCD_AGENT_URL;
      delete e.SVCD_DATAPLANE_URL;
      agentEnvs.push(e);
    }
    const agents: StackAgent[] = [];
    const agentProcesses = new Set<ChildProcess>();
    const startOne = async (agentEnv: Record<string, string>): Promise<StackAgent> => {
      const spawned = spawnService(join(REPO_ROOT, 'bin/svc-agent'), ['--stop-on-stdin-eof'], agentEnv, true);
      track(spawned.child, 'host agent', false);
      agentProcesses.add(spawned.child);
      spawned.child.once('exit', () => agentProcesses.delete(spawned.child));
      const exited = () => spawned.child.exitCode !== null || spawned.child.signalCode !== null;
      try {
        const ready = await awaitReadyLine(spawned.child, 'host agent', 60_000, spawned.output);
        const registered = await getAgent(db, String(ready.agent_id));
        if (!registered) throw new Error(`host agent ${String(ready.agent_id)} is not registered`);
        log(`stack: host agent ${registered.agent_id} ready at ${registered.internal_url} (/v2 at ${registered.dataplane_url}, metrics at ${String(ready.metrics_url)})`, { level: 'info', event: 'agent_ready' });
        return {
          id: registered.agent_id,
          root: resolve(REPO_ROOT, agentEnv.SVCD_ROOT!),
          process: spawned.child,
          log: spawned.output,
          internalUrl: registered.internal_url,
          dataplaneUrl: registered.dataplane_url,
          metricsUrl: String(ready.metrics_url),
        };
      } catch (err) {
        if (!exited()) await stopChild(spawned.child, 5_000);
        throw err;
      }
    };
    // An agent started again takes the ports it had, so the front and its registration keep working.
    const envFor = (index: number): Record<string, string> => {
      const e = { ...agentEnvs[index]! };
      const current = agents[index];
      if (current && e.SVCD_AGENT_PORT === '0') e.SVCD_AGENT_PORT = new URL(current.internalUrl).port;
      if (current && e.SVCD_DATAPLANE_PORT === '0') e.SVCD_DATAPLANE_PORT = new URL(current.dataplaneUrl).port;
      if (current && e.SVCD_METRICS_PORT === '0') e.SVCD_METRICS_PORT = new URL(current.metricsUrl).port;
      return e;
    };

    // Restarts of agents that died (docs/local-stack.md "An agent that dies").
    const restarts = agentEnvs.map(() => ({ delay: RESTART_FIRST_MS, readyAt: Date.now(), timer: undefined as NodeJS.Timeout | undefined, running: undefined as Promise<void> | undefined }));
    const intentional = new WeakSet<ChildProcess>();
    const adopt = (index: number, agent: StackAgent) => {
      agents[index] = agent;
      restarts[index]!.readyAt = Date.now();
      record();
      agent.process.once('exit', (code, signal) => {
        if (stopping || !options.restartAgents || intentional.has(agent.process) || agents[index] !== agent) return;
        const r = restarts[index]!;
        if (Date.now() - r.readyAt >= RESTART_RESET_MS) r.delay = RESTART_FIRST_MS;
        log(`stack: host agent ${agent.id} (pid ${agent.process.pid}) exited (${exitOf(code, signal)}); restarting it in ${seconds(r.delay)}`);
        scheduleRestart(index);
      });
    };
    const scheduleRestart = (index: number) => {
      const r = restarts[index]!;
      const delay = r.delay;
      r.delay = Math.min(delay * 2, RESTART_MAX_MS);
      r.timer = setTimeout(() => {
        r.timer = undefined;
        r.running = (async () => {
          try {
            const next = await startOne(envFor(index));
            if (stopping) return void (await stopChild(next.process, settings.SVCD_ENGINE_STOP_TIMEOUT_MS + 5000));
            adopt(index, next);
          } catch (err) {
            if (stopping) return;
            log(`stack: host agent ${agents[index]!.id} did not start again: ${(err as Error).message}; next try in ${seconds(r.delay)}`);
            scheduleRestart(index);
          } finally {
            r.running = undefined;
          }
        })();
      }, delay);
    };
    // Stops every agent process there is at the time (restarted ones, and one starting), all at once.
    cleanups.push(async () => {
      for (const r of restarts) clearTimeout(r.timer);
      await Promise.all([...agentProcesses].map((p) => stopChild(p, settings.SVCD_ENGINE_STOP_TIMEOUT_MS + 5000)));
      await Promise.all(restarts.map((r) => r.running));
    });
    const started = await Promise.allSettled(agentEnvs.map((e) => startOne(e)));
    started.forEach((r, i) => {
      if (r.status === 'fulfilled') adopt(i, r.value);
    });
    const failed = started.find((r) => r.status === 'rejected');
    if (failed) throw (failed as PromiseRejectedResult).reason;

    // miniflare listens on a free internal port; the front owns SVCD_PORT and sends /v2 to the
    // agent's /v2 listener, the rest to miniflare: one origin for /v0 and /v2 (docs/dataplane.md).
    const worker = spawnService(NODE_BIN, [join(REPO_ROOT, 'infra/local/worker-host.ts')], { ...childEnv, SVCD_PORT: '0' });
    track(worker.child, 'the worker host (miniflare)', true);
    cleanups.push(() => stopChild(worker.child, 10_000));
    const workerReady = await awaitReadyLine(worker.child, 'worker host (miniflare)', 60_000, worker.output);
    record();
    // One agent: connections whose first request it serves itself (/v2, realtime subscribe and
    // publish) are handed to its process, so they cost one hop as in production (docs/local-stack.md
    // "One hop for `/v2`"). Several: the front stays the load balancer of every /v2 request.
    const handoff: Handoff | undefined =
      count === 1
        ? (socket, head, origin) => {
            const child = agents[0]?.process;
            return !stopping && child !== undefined && handOver(child, socket, head, origin);
          }
        : undefined;
    const front = await startFront(
      { handlers: String(workerReady.url), dataplane: agents.map((a) => a.dataplaneUrl), metrics: agents.map((a) => a.metricsUrl), handoff },
      { host: settings.SVCD_HOST, port: settings.SVCD_PORT, log, cors: parseCorsOrigins(settings.SVCD_CORS_ORIGINS) },
    );
    cleanups.push(() => front.close());
    const url = front.url;
    lock.update({ url });

    return {
      url,
      dir,
      settings,
      env,
      get agent() {
        return agents[0]!.process;
      },
      get agentLog() {
        return agents[0]!.log;
      },
      agents,
      async restartAgent(index: number) {
        if (!agents[index]) throw new Error(`no agent ${index}`);
        const r = restarts[index]!;
        clearTimeout(r.timer);
        r.timer = undefined;
        await r.running;
        const current = agents[index]!;
        intentional.add(current.process);
        await stopChild(current.process, settings.SVCD_ENGINE_STOP_TIMEOUT_MS + 5000);
        const next = await startOne(envFor(index));
        adopt(index, next);
        return next;
      },
      workerHost: worker.child,
      dynamoEndpoint: env.SVCD_DYNAMODB_ENDPOINT!,
      stop: stopAll,
    };
  } catch (err) {
    await stopAll();
    throw err;
  }
}

export { freePort };
