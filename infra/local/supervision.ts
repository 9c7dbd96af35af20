/**
 * What the local stack's supervisor keeps of the processes it starts (docs/local-stack.md
 * "Processes"): each child leads its own process group (a terminal's Ctrl-C reaches only the
 * supervisor) and watches a pipe from it (its stdin: the supervisor's end closes it, however the
 * supervisor ends); the members of those groups are recorded in the stack's lock, for the next start
 * to clear if this supervisor dies in a way the pipes did not cover; and what was started is
 * stopped in reverse order.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type { Log } from '../../shared/log.ts';
import { exitOf } from './children.ts';
import type { StackLock } from './lock.ts';
import { REPO_ROOT } from './paths.ts';
import { groupMembers, signalGroup } from './processes.ts';

/** A spawned service child and what it printed on stderr (the last 1 MB, unless passed through). */
export interface Spawned {
  child: ChildProcess;
  output: () => string;
}

/** The supervisor's record of its children and of how to stop what it started. */
export class Supervision {
  readonly #lock: StackLock;
  readonly #log: Log;
  readonly #inherit: boolean;
  /** Groups are kept after their leader exits: what it started (java under a killed tether) still carries the group id. */
  readonly #groups = new Set<number>();
  readonly #cleanups: (() => Promise<void>)[] = [];
  stopping = false;

  constructor(lock: StackLock, log: Log, agentOutput: 'inherit' | 'collect' | undefined) {
    this.#lock = lock;
    this.#log = log;
    this.#inherit = agentOutput === 'inherit';
    this.#cleanups.push(async () => lock.release());
  }

  /** Records the members of every child's process group in the lock. */
  record(): void {
    try {
      this.#lock.update({ children: groupMembers(this.#groups) });
    } catch (err) {
      this.#log(`stack: cannot record its processes in ${this.#lock.file}: ${(err as Error).message}`);
    }
  }

  /** Watches `child`: when it exits, what it started in its group goes too, and (`unexpected`) the stack says so. */
  track(child: ChildProcess, what: string, unexpected: boolean): void {
    if (child.pid) this.#groups.add(child.pid);
    child.once('exit', (code, signal) => {
      if (this.stopping) return;
      // What the child started in its group (java, workerd) must not outlive it.
      if (child.pid) signalGroup(child.pid, 'SIGKILL');
      this.record();
      if (unexpected) this.#log(`stack: ${what} exited (${exitOf(code, signal)}); stop the stack (Ctrl-C) and start it again`);
    });
  }

  /** Spawns a service child in its own group, stdin a pipe it watches; `ipc` adds an IPC channel (the agents). */
  spawn(bin: string, args: string[], env: Record<string, string>, ipc = false): Spawned {
    let output = '';
    const stderr = this.#inherit ? 'inherit' : 'pipe';
    const child = spawn(bin, args, { cwd: REPO_ROOT, env, detached: true, stdio: ipc ? ['pipe', 'pipe', stderr, 'ipc'] : ['pipe', 'pipe', stderr] });
    child.stdin!.on('error', () => {});
    child.stderr?.setEncoding('utf8').on('data', (d: string) => {
      output = (output + d).slice(-1_000_000);
    });
    return { child, output: () => output };
  }

  /** Adds what to do when the stack stops; done in reverse order of adding. */
  onStop(cleanup: () => Promise<void>): void {
    this.#cleanups.push(cleanup);
  }

  /** Stops everything started, in reverse order, once. */
  async stopAll(): Promise<void> {
    this.stopping = true;
    for (const c of this.#cleanups.splice(0).reverse()) await c().catch((err) => this.#log(`stack: stop failed: ${(err as Error).message}`));
  }
}
