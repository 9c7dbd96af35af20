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
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { loadSettings, type Settings } from '../../shared/config.ts';
import { createDb, ensureTable } from '../../shared/db/client.ts';
import { getAgent } from '../../shared/db/agents.ts';
import { startFront } from './front-proxy.ts';
import { assertPortFree, freePort, startDynamoLocal, type DynamoLocal } from './dynamodb.ts';

import { NODE_BIN, REPO_ROOT } from './paths.ts';

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
  /** Port of DynamoDB Local when the stack starts it (0: any free one). */
  dynamoPort?: number;
  log?: (line: string) => void;
  /** Pass the agent's stderr through (npm start) or collect it (tests). */
  agentOutput?: 'inherit' | 'collect';
  /** How many host agents to run (default 1). */
  agents?: number;
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
}

/** A running stack. */
export interface Stack {
  url: string;
  settings: Settings;
  env: Record<string, string>;
  /** The first agent's process and log (a single-agent stack's only agent). */
  agent: ChildProcess;
  agentLog: () => string;
  /** Every agent, the first first. */
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

/** Starts the child and resolves with its first stdout line parsed as JSON (its ready line). */
function awaitReadyLine(child: ChildProcess, what: string, timeoutMs: number, output: () => string): Promise<Record<string, unknown>> {
  return new Promise((ok, fail) => {
    let buf = '';
    const timer = setTimeout(() => fail(new Error(`${what} did not become ready within ${timeoutMs} ms: ${output()}`)), timeoutMs);
    child.stdout!.setEncoding('utf8').on('data', function onData(d: string) {
      buf += d;
      const nl = buf.indexOf('\n');
      if (nl < 0) return;
      child.stdout!.off('data', onData);
      // Keep draining stdout so the child never blocks on a full pipe.
      child.stdout!.on('data', () => {});
      clearTimeout(timer);
      try {
        ok(JSON.parse(buf.slice(0, nl)));
      } catch {
        fail(new Error(`${what} printed an unexpected first line: ${buf.slice(0, nl)}`));
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      fail(new Error(`${what} exited with ${code} during start: ${output().trim().split('\n').slice(-3).join(' | ')}`));
    });
  });
}

/** Stops a child: SIGTERM, then SIGKILL after `graceMs`; resolves when it has exited. */
export async function stopChild(child: ChildProcess, graceMs = 10_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill('SIGTERM');
  const t = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(t);
}

/** Spawns a service child; stderr passes through or is kept (last 1 MB) for error reports. */
function spawnService(bin: string, args: string[], env: Record<string, string>, inherit: boolean) {
  let output = '';
  // Own process group: a terminal's Ctrl-C reaches only the supervisor, which stops children in order.
  const child = spawn(bin, args, { cwd: REPO_ROOT, env, detached: true, stdio: ['ignore', 'pipe', inherit ? 'inherit' : 'pipe'] });
  child.stderr?.setEncoding('utf8').on('data', (d: string) => {
    output = (output + d).slice(-1_000_000);
  });
  return { child, output: () => output };
}

/** Starts the whole local stack. */
export async function startStack(options: StackOptions): Promise<Stack> {
  const log = options.log ?? ((line: string) => console.error(line));
  const dir = resolve(options.dir);
  const fromEnv: Record<string, string> = {};
  for (const [k, v] of Object.entries(options.env ?? {})) if (k.startsWith('SVCD_') && v !== undefined && v !== '') fromEnv[k] = v;

  const count = options.agents ?? 1;
  if (!Number.isInteger(count) || count < 1 || count > 64) throw new Error(`agents must be an integer from 1 to 64, got ${count}`);
  const env: Record<string, string> = {
    SVCD_ROOT: join(dir, 'agent'),
    SVCD_AWS_ACCESS_KEY_ID: 'local',
    SVCD_AWS_SECRET_ACCESS_KEY: 'local',
    ...localSecrets(dir),
    ...fromEnv,
  };
  // Validate everything before starting anything: a bad setting fails with one line.
  let settings = loadSettings(env);
  await assertPortFree(settings.SVCD_HOST, settings.SVCD_PORT, 'SVCD_PORT');
  if (settings.SVCD_AGENT_PORT) await assertPortFree(settings.SVCD_AGENT_HOST, settings.SVCD_AGENT_PORT, 'SVCD_AGENT_PORT');

  const cleanups: (() => Promise<void>)[] = [];
  const stopAll = async () => {
    for (const c of cleanups.splice(0).reverse()) await c().catch((err) => log(`stack: stop failed: ${(err as Error).message}`));
  };
  try {
    let dynamo: DynamoLocal | undefined;
    if (!options.dynamoEndpoint && !fromEnv.SVCD_DYNAMODB_ENDPOINT) {
      const port = options.dynamoPort ?? 0;
      if (port) await assertPortFree('127.0.0.1', port, 'SVCD_LOCAL_DYNAMODB_PORT');
      dynamo = await startDynamoLocal({ port, dbPath: options.persist ? join(dir, 'dynamodb') : undefined });
      cleanups.push(() => dynamo!.stop());
      env.SVCD_DYNAMODB_ENDPOINT = dynamo.endpoint;
    } else if (options.dynamoEndpoint) {
      env.SVCD_DYNAMODB_ENDPOINT = options.dynamoEndpoint;
    }
    settings = loadSettings(env);
    await ensureTable(createDb(settings));

    const childEnv = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/tmp', ...env };
    const db = createDb(settings);
    const agentEnvs: Record<string, string>[] = [];
    for (let i = 0; i < count; i++) {
      if (i === 0) {
        agentEnvs.push(childEnv);
        continue;
      }
      // Its own root (so its own id) and free ports; an id or URLs set for the stack are the first agent's.
      const e: Record<string, string> = { ...childEnv, SVCD_ROOT: join(dir, `agent-${i + 1}`), SVCD_AGENT_PORT: '0', SVCD_DATAPLANE_PORT: '0' };
      delete e.SVCD_AGENT_ID;
      delete e.SVCD_AGENT_URL;
      delete e.SVCD_DATAPLANE_URL;
      agentEnvs.push(e);
    }
    const agents: StackAgent[] = [];
    const startOne = async (agentEnv: Record<string, string>): Promise<StackAgent> => {
      const spawned = spawnService(join(REPO_ROOT, 'bin/svc-agent'), [], agentEnv, options.agentOutput === 'inherit');
      const exited = () => spawned.child.exitCode !== null || spawned.child.signalCode !== null;
      try {
        const ready = await awaitReadyLine(spawned.child, 'host agent', 60_000, spawned.output);
        const registered = await getAgent(db, String(ready.agent_id));
        if (!registered) throw new Error(`host agent ${String(ready.agent_id)} is not registered`);
        log(`stack: host agent ${registered.agent_id} ready at ${registered.internal_url} (/v2 at ${registered.dataplane_url})`);
        return {
          id: registered.agent_id,
          root: resolve(REPO_ROOT, agentEnv.SVCD_ROOT!),
          process: spawned.child,
          log: spawned.output,
          internalUrl: registered.internal_url,
          dataplaneUrl: registered.dataplane_url,
        };
      } catch (err) {
        if (!exited()) await stopChild(spawned.child, 5_000);
        throw err;
      }
    };
    // Stops whichever process each agent has at the time (a restarted one included), all at once.
    cleanups.push(() => Promise.all(agents.map((a) => stopChild(a.process, settings.SVCD_ENGINE_STOP_TIMEOUT_MS + 5000))).then(() => {}));
    const started = await Promise.allSettled(agentEnvs.map((e) => startOne(e)));
    for (const r of started) if (r.status === 'fulfilled') agents.push(r.value);
    const failed = started.find((r) => r.status === 'rejected');
    if (failed) throw (failed as PromiseRejectedResult).reason;

    // miniflare listens on a free internal port; the front owns SVCD_PORT and sends /v2 to the
    // agent's /v2 listener, the rest to miniflare: one origin for /v0 and /v2 (docs/dataplane.md).
    const worker = spawnService(NODE_BIN, [join(REPO_ROOT, 'infra/local/worker-host.ts')], { ...childEnv, SVCD_PORT: '0' }, options.agentOutput === 'inherit');
    cleanups.push(() => stopChild(worker.child, 10_000));
    const workerReady = await awaitReadyLine(worker.child, 'worker host (miniflare)', 60_000, worker.output);
    const front = await startFront(
      { handlers: String(workerReady.url), dataplane: agents.map((a) => a.dataplaneUrl) },
      { host: settings.SVCD_HOST, port: settings.SVCD_PORT, log },
    );
    cleanups.push(() => front.close());
    const url = front.url;

    return {
      url,
      settings,
      env,
      agent: agents[0]!.process,
      agentLog: agents[0]!.log,
      agents,
      async restartAgent(index: number) {
        const current = agents[index];
        if (!current) throw new Error(`no agent ${index}`);
        await stopChild(current.process, settings.SVCD_ENGINE_STOP_TIMEOUT_MS + 5000);
        // An agent that took free ports takes the same ones again: the front and the registration keep working.
        const e = { ...agentEnvs[index]! };
        if (e.SVCD_AGENT_PORT === '0') e.SVCD_AGENT_PORT = new URL(current.internalUrl).port;
        if (e.SVCD_DATAPLANE_PORT === '0') e.SVCD_DATAPLANE_PORT = new URL(current.dataplaneUrl).port;
        const next = await startOne(e);
        agents[index] = next;
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
