/**
 * The local stack (`npm start`, and the end-to-end tests): DynamoDB Local, the handlers bundle inside
 * miniflare (workerd) and one host agent (or N with `agents`) as child processes, behind one origin
 * on the public port. Secrets are generated once under the stack directory and handed to every
 * child; nothing needs a cloud account.
 *
 * Its phases: the directory (lock, permissions, leftovers of a dead stack), the ports (every fixed
 * listener bound once by the supervisor, ./ports.ts), DynamoDB Local, the worker host, the agents
 * (./stack-agents.ts), the origin. The first agent serves the origin (`SVCD_PORT`): `/v2`, realtime
 * and key invocations itself, everything else relayed to miniflare (docs/local-stack.md "One
 * origin"); while it does not hold it, the supervisor's fallback front does (./front-proxy.ts).
 *
 * Several agents (`npm start -- --agents 2`): each has its own `SVCD_ROOT` (`<dir>/agent` for the
 * first, then `<dir>/agent-2`, ...), hence its own persisted agent id, and its own ports. All
 * register in the one table; the first forwards `/v2` for another's project in one hop
 * (docs/dataplane.md "Several agents").
 *
 * Processes (docs/local-stack.md): one stack per directory (`lock.ts`); every child watches a pipe
 * from the supervisor and ends when it closes, so nothing outlives the stack however it ends; what a
 * dead stack left anyway is recorded in the lock and cleared by the next start (./supervision.ts).
 * With `restartAgents`, an agent that dies is started again with backoff, and the stack says so.
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { loadSettings, type Settings } from '../../shared/config.ts';
import type { Log } from '../../shared/log.ts';
import { createDb, ensureTable } from '../../shared/db/client.ts';
import { parseCorsOrigins } from '../../shared/http/cors.ts';
import type { HeldListener } from '../../shared/http/held-listeners.ts';
import { awaitReadyLine, stopChild } from './children.ts';
import { createFront } from './front-proxy.ts';
import { assertPortFree, freePort, portIsFree, startDynamoLocal } from './dynamodb.ts';
import { acquireStackLock, displayDir, type StackLock } from './lock.ts';
import { killRecorded, waitGone } from './processes.ts';
import { NODE_BIN, openRepositoryToEngines, REPO_ROOT } from './paths.ts';
import { holdStackPorts, type AgentListeners, type AgentPortSetting } from './ports.ts';
import { StackAgents, type StackAgent } from './stack-agents.ts';
import { Supervision } from './supervision.ts';

export { REPO_ROOT };
export type { StackAgent };

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

/** Phase 1: the directory — held by this stack alone, open to the engines' user, cleared of what a dead stack left. */
async function takeDirectory(dir: string, log: Log): Promise<StackLock> {
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
  return lock;
}

/** What a stack that died left running (its record in the lock we took over) goes first: it may hold the ports and the DynamoDB files. */
async function clearLeftovers(lock: StackLock, dir: string, log: Log): Promise<void> {
  const leftovers = killRecorded(lock.leftovers);
  if (leftovers.length === 0) return;
  log(`stack: stopped ${leftovers.length} process(es) left running in ${displayDir(dir)} by a stack that died (pid ${lock.previousPid})`);
  if (!(await waitGone(leftovers.map((r) => r.pid), 5_000))) log('stack: some of them are still exiting');
}

/** The settings every child starts from: the environment's `SVCD_*` over the stack's own defaults and secrets. */
function stackEnv(dir: string, fromEnv: Record<string, string>): Record<string, string> {
  return {
    SVCD_ROOT: join(dir, 'agent'),
    // Off-machine copies of snapshots, shared by the stack's agents (docs/lifecycle.md "Off-machine copies").
    SVCD_BACKUP_DIR: join(dir, 'backups'),
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
}

/** Phase 3: DynamoDB Local (unless one is given), on `--dynamodb-port`, else SVCD_PORT + 3 when free, else a free port. */
async function startDynamo(options: StackOptions, settings: Settings, env: Record<string, string>, dir: string, supervision: Supervision): Promise<void> {
  if (options.dynamoEndpoint) env.SVCD_DYNAMODB_ENDPOINT = options.dynamoEndpoint;
  if (options.dynamoEndpoint || env.SVCD_DYNAMODB_ENDPOINT) return;
  let port = options.dynamoPort;
  if (port) await assertPortFree('127.0.0.1', port, '--dynamodb-port');
  const follow = settings.SVCD_PORT + 3;
  port ??= settings.SVCD_PORT !== 0 && follow <= 65535 && (await portIsFree('127.0.0.1', follow)) ? follow : 0;
  const dynamo = await startDynamoLocal({ port, dbPath: options.persist ? join(dir, 'dynamodb') : undefined });
  supervision.track(dynamo.process, 'DynamoDB Local', true);
  supervision.record();
  supervision.onStop(() => dynamo.stop());
  env.SVCD_DYNAMODB_ENDPOINT = dynamo.endpoint;
}

/** Phase 4: the worker host (miniflare on a free internal port); answers its URL. */
async function startWorkerHost(childEnv: Record<string, string>, supervision: Supervision): Promise<{ child: ChildProcess; url: string }> {
  const worker = supervision.spawn(NODE_BIN, [join(REPO_ROOT, 'infra/local/worker-host.ts')], { ...childEnv, SVCD_PORT: '0' });
  supervision.track(worker.child, 'the worker host (miniflare)', true);
  supervision.onStop(() => stopChild(worker.child, 10_000));
  const ready = await awaitReadyLine(worker.child, 'worker host (miniflare)', 60_000, worker.output);
  supervision.record();
  return { child: worker.child, url: String(ready.url) };
}

/** The URL of a listener on `host`, with a wildcard host named as loopback. */
function urlOf(host: string, port: number): string {
  const h = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
  return `http://${h.includes(':') ? `[${h}]` : h}:${port}`;
}

/**
 * Phase 6: the origin while no agent holds it — the fallback front, relaying to the handlers, the
 * agents' metrics and their `/v2` listeners in turn; each connection it serves is closed after its
 * answer, so a client's next connection reaches the first agent once that holds the origin again.
 */
function serveFallback(origin: HeldListener, handlers: string, listeners: AgentListeners[], settings: Settings, log: Log, supervision: Supervision): void {
  const host = settings.SVCD_AGENT_HOST;
  const front = createFront(
    {
      handlers,
      // Every agent's /v2 listener, the first's too: held by the supervisor, it answers 503 while that agent is down.
      dataplane: listeners.map((l) => urlOf(host, l.SVCD_DATAPLANE_PORT.port)),
      metrics: listeners.map((l) => urlOf(host, l.SVCD_METRICS_PORT.port)),
    },
    { log, cors: parseCorsOrigins(settings.SVCD_CORS_ORIGINS), closeConnections: true },
  );
  origin.setFallback((socket) => front.serve(socket));
  supervision.onStop(() => front.close());
}

/** Starts the whole local stack. */
export async function startStack(options: StackOptions): Promise<Stack> {
  const log = options.log ?? ((line: string) => console.error(line));
  const dir = resolve(options.dir);
  const fromEnv: Record<string, string> = {};
  for (const [k, v] of Object.entries(options.env ?? {})) if (k.startsWith('SVCD_') && v !== undefined && v !== '') fromEnv[k] = v;
  const count = options.agents ?? 1;
  if (!Number.isInteger(count) || count < 1 || count > 64) throw new Error(`agents must be an integer from 1 to 64, got ${count}`);
  const lock = await takeDirectory(dir, log);
  const supervision = new Supervision(lock, log, options.agentOutput);
  try {
    await clearLeftovers(lock, dir, log);
    const env = stackEnv(dir, fromEnv);
    // Validate everything before starting anything: a bad setting fails with one line.
    let settings = loadSettings(env);
    const ports = await holdStackPorts(settings, fromEnv as Partial<Record<AgentPortSetting, string>>, count);
    supervision.onStop(ports.close);
    env.SVCD_PORT = String(ports.origin.port);
    await startDynamo(options, settings, env, dir, supervision);
    settings = loadSettings(env);
    await ensureTable(createDb(settings));
    const url = urlOf(settings.SVCD_HOST, ports.origin.port);
    // Functions see the origin as CLOUD_ORIGIN, not miniflare's internal one (docs/functions.md "Environment").
    if (fromEnv.SVCD_CLOUD_ORIGIN === undefined) env.SVCD_CLOUD_ORIGIN = url;
    // NODE_OPTIONS reaches every Node process of the stack (say --cpu-prof to profile it, docs/local-stack.md).
    const nodeOptions = options.env?.NODE_OPTIONS;
    const childEnv = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/tmp', ...(nodeOptions ? { NODE_OPTIONS: nodeOptions } : {}), ...env };
    const worker = await startWorkerHost(childEnv, supervision);
    serveFallback(ports.origin, worker.url, ports.agents, settings, log, supervision);
    const metrics = ports.agents.map((l) => urlOf(settings.SVCD_AGENT_HOST, l.SVCD_METRICS_PORT.port)).join(',');
    const agents = new StackAgents({
      supervision,
      db: createDb(settings),
      log,
      settings,
      env: childEnv,
      dir,
      listeners: ports.agents,
      origin: { listener: ports.origin, args: ['--origin-handlers', worker.url, '--origin-metrics', metrics, '--origin-url', url] },
      restart: options.restartAgents === true,
    });
    supervision.onStop(() => agents.stopAll());
    await agents.startAll();
    lock.update({ url });
    return {
      url,
      dir,
      settings,
      env,
      get agent() {
        return agents.list[0]!.process;
      },
      get agentLog() {
        return agents.list[0]!.log;
      },
      agents: agents.list,
      restartAgent: (index) => agents.restart(index),
      workerHost: worker.child,
      dynamoEndpoint: env.SVCD_DYNAMODB_ENDPOINT!,
      stop: () => supervision.stopAll(),
    };
  } catch (err) {
    await supervision.stopAll();
    throw err;
  }
}

export { freePort };
