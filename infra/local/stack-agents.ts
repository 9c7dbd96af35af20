/**
 * The local stack's host agents (docs/local-stack.md "An agent that dies"): each started as
 * `bin/svc-agent` with the listeners the supervisor holds for it (./ports.ts), the first also with
 * the stack's origin, which it is given once it is ready (until then the fallback front serves it);
 * one that dies is started again on the same root and listeners, after 0.5 s doubling to 30 s.
 */
import type { ChildProcess } from 'node:child_process';
import { join, resolve } from 'node:path';
import type { Settings } from '../../shared/config.ts';
import type { Db } from '../../shared/db/client.ts';
import { getAgent } from '../../shared/db/agents.ts';
import { giveWhenAsked, type HeldListener } from '../../shared/http/held-listeners.ts';
import type { Log } from '../../shared/log.ts';
import { awaitReadyLine, exitOf, stopChild } from './children.ts';
import { REPO_ROOT } from './paths.ts';
import { AGENT_PORTS, type AgentListeners } from './ports.ts';
import type { Supervision } from './supervision.ts';

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

/** First delay before an agent that died is started again; it doubles on each death up to the next constant. */
const RESTART_FIRST_MS = 500;
const RESTART_MAX_MS = 30_000;
/** An agent that stayed up this long starts from the first delay again when it next dies. */
const RESTART_RESET_MS = 30_000;

function seconds(ms: number): string {
  return `${ms / 1000} s`;
}

/** What the agents need of the stack. */
export interface AgentsSetup {
  supervision: Supervision;
  db: Db;
  log: Log;
  settings: Settings;
  /** The environment every agent starts from (the first agent's, as the stack's settings give it). */
  env: Record<string, string>;
  dir: string;
  listeners: AgentListeners[];
  /** The origin the first agent serves, and its arguments (where it relays, the metrics, the base URL). */
  origin: { listener: HeldListener; args: string[] };
  restart: boolean;
}

/** The stack's agents: started, restarted, stopped. */
export class StackAgents {
  readonly list: StackAgent[] = [];
  readonly #s: AgentsSetup;
  readonly #processes = new Set<ChildProcess>();
  readonly #intentional = new WeakSet<ChildProcess>();
  readonly #restarts: { delay: number; readyAt: number; timer?: NodeJS.Timeout; running?: Promise<void> }[];

  constructor(setup: AgentsSetup) {
    this.#s = setup;
    this.#restarts = setup.listeners.map(() => ({ delay: RESTART_FIRST_MS, readyAt: Date.now() }));
  }

  /** Agent `index`'s environment: its own root (so its own id) and its held ports; an id or URLs set for the stack are the first agent's. */
  #envFor(index: number): Record<string, string> {
    const e: Record<string, string> = { ...this.#s.env };
    for (const [setting] of AGENT_PORTS) e[setting] = String(this.#s.listeners[index]![setting].port);
    if (index === 0) return e;
    e.SVCD_ROOT = join(this.#s.dir, `agent-${index + 1}`);
    delete e.SVCD_AGENT_ID;
    delete e.SVCD_AGENT_URL;
    delete e.SVCD_DATAPLANE_URL;
    return e;
  }

  /** Starts agent `index` and answers it once it is ready and registered; the origin is given to the first then. */
  async #startOne(index: number): Promise<StackAgent> {
    const { supervision, db, log } = this.#s;
    const own = AGENT_PORTS.map(([setting]) => this.#s.listeners[index]![setting]);
    const held = [...own, ...(index === 0 ? [this.#s.origin.listener] : [])].map((l) => `${l.name}=${l.port}`).join(',');
    const args = ['--stop-on-stdin-eof', '--held-listeners', held, ...(index === 0 ? this.#s.origin.args : [])];
    const env = this.#envFor(index);
    const spawned = supervision.spawn(join(REPO_ROOT, 'bin/svc-agent'), args, env, true);
    supervision.track(spawned.child, 'host agent', false);
    this.#processes.add(spawned.child);
    spawned.child.once('exit', () => this.#processes.delete(spawned.child));
    // Its own listeners as soon as it asks: connections wait in it until its servers run.
    giveWhenAsked(spawned.child, own);
    try {
      const ready = await awaitReadyLine(spawned.child, 'host agent', 60_000, spawned.output);
      const registered = await getAgent(db, String(ready.agent_id));
      if (!registered) throw new Error(`host agent ${String(ready.agent_id)} is not registered`);
      if (index === 0) this.#s.origin.listener.giveTo(spawned.child);
      log(`stack: host agent ${registered.agent_id} ready at ${registered.internal_url} (/v2 at ${registered.dataplane_url}, metrics at ${String(ready.metrics_url)})`, { level: 'info', event: 'agent_ready' });
      return {
        id: registered.agent_id,
        root: resolve(REPO_ROOT, env.SVCD_ROOT!),
        process: spawned.child,
        log: spawned.output,
        internalUrl: registered.internal_url,
        dataplaneUrl: registered.dataplane_url,
        metricsUrl: String(ready.metrics_url),
      };
    } catch (err) {
      if (spawned.child.exitCode === null && spawned.child.signalCode === null) await this.#stopProcess(spawned.child);
      throw err;
    }
  }

  /** Stops one agent process, its listeners taken back first so the fallbacks serve at once. */
  async #stopProcess(child: ChildProcess): Promise<void> {
    for (const l of [this.#s.origin.listener, ...this.#s.listeners.flatMap((one) => Object.values(one))]) l.release(child);
    await stopChild(child, this.#s.settings.SVCD_ENGINE_STOP_TIMEOUT_MS + 5000);
  }

  #adopt(index: number, agent: StackAgent): void {
    this.list[index] = agent;
    this.#restarts[index]!.readyAt = Date.now();
    this.#s.supervision.record();
    agent.process.once('exit', (code, signal) => {
      if (this.#s.supervision.stopping || !this.#s.restart || this.#intentional.has(agent.process) || this.list[index] !== agent) return;
      const r = this.#restarts[index]!;
      if (Date.now() - r.readyAt >= RESTART_RESET_MS) r.delay = RESTART_FIRST_MS;
      this.#s.log(`stack: host agent ${agent.id} (pid ${agent.process.pid}) exited (${exitOf(code, signal)}); restarting it in ${seconds(r.delay)}`);
      this.#scheduleRestart(index);
    });
  }

  #scheduleRestart(index: number): void {
    const r = this.#restarts[index]!;
    const delay = r.delay;
    r.delay = Math.min(delay * 2, RESTART_MAX_MS);
    r.timer = setTimeout(() => {
      r.timer = undefined;
      r.running = (async () => {
        try {
          const next = await this.#startOne(index);
          if (this.#s.supervision.stopping) return void (await this.#stopProcess(next.process));
          this.#adopt(index, next);
        } catch (err) {
          if (this.#s.supervision.stopping) return;
          this.#s.log(`stack: host agent ${this.list[index]!.id} did not start again: ${(err as Error).message}; next try in ${seconds(r.delay)}`);
          this.#scheduleRestart(index);
        } finally {
          r.running = undefined;
        }
      })();
    }, delay);
  }

  /** Starts every agent at once; fails (after the others started) when one does not start. */
  async startAll(): Promise<void> {
    const started = await Promise.allSettled(this.#s.listeners.map((_, i) => this.#startOne(i)));
    started.forEach((r, i) => {
      if (r.status === 'fulfilled') this.#adopt(i, r.value);
    });
    const failed = started.find((r) => r.status === 'rejected');
    if (failed) throw (failed as PromiseRejectedResult).reason;
  }

  /** Starts agent `index` again on the same root and listeners: same id and addresses, its engines adopted. */
  async restart(index: number): Promise<StackAgent> {
    if (!this.list[index]) throw new Error(`no agent ${index}`);
    const r = this.#restarts[index]!;
    clearTimeout(r.timer);
    r.timer = undefined;
    await r.running;
    const current = this.list[index]!;
    this.#intentional.add(current.process);
    await this.#stopProcess(current.process);
    const next = await this.#startOne(index);
    this.#adopt(index, next);
    return next;
  }

  /** Stops every agent process there is at the time (restarted ones, and one starting), all at once. */
  async stopAll(): Promise<void> {
    for (const r of this.#restarts) clearTimeout(r.timer);
    await Promise.all([...this.#processes].map((p) => this.#stopProcess(p)));
    await Promise.all(this.#restarts.map((r) => r.running));
  }
}
