/**
 * The host agent as a child process (`bin/svc-agent`), restartable over the same root and table, so
 * suites can SIGKILL it mid-operation and start it again. Its stderr (the agent's log) is kept.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { buildDeps } from '../../handlers/deps.ts';
import { createApp, type App } from '../../handlers/index.ts';
import { layoutOf, type Layout } from '../../host-agent/tenants/layout.ts';
import type { Db } from '../../shared/db/client.ts';
import { REPO, tempDir, testDeployment } from './env.ts';
import { waitFor, type Api } from './lifecycle.ts';

/** One agent process at a time over a fixed environment. */
export class ChildAgent {
  child: ChildProcess | null = null;
  /** The agent's stderr (its log) across every start, newest last, bounded. */
  output = '';
  readonly env: Record<string, string>;
  constructor(env: Record<string, string>) {
    this.env = env;
  }

  /** Starts the agent and waits for its ready line. */
  async start(): Promise<void> {
    const child = spawn(join(REPO, 'bin/svc-agent'), [], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/tmp', ...this.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    child.stderr!.setEncoding('utf8').on('data', (d: string) => {
      this.output = (this.output + d).slice(-200_000);
    });
    await new Promise<void>((resolve, reject) => {
      let buf = '';
      const timer = setTimeout(() => reject(new Error(`agent not ready: ${this.output}`)), 30_000);
      child.stdout!.setEncoding('utf8').on('data', (d: string) => {
        buf += d;
        if (buf.includes('\n')) {
          clearTimeout(timer);
          resolve();
        }
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`agent exited ${code}: ${this.output}`));
      });
    });
  }

  /** SIGKILL, awaited. */
  async kill9(): Promise<void> {
    const child = this.child!;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await exited;
    this.child = null;
  }

  /** SIGTERM (graceful shutdown), awaited. */
  async stop(): Promise<void> {
    const child = this.child;
    if (!child) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await exited;
    this.child = null;
  }

  /** Waits until the agent's log (from offset `from` of `output`) has a line matching `pattern`; answers it or null. */
  async logLine(pattern: RegExp, from = 0, ms = 10_000): Promise<string | null> {
    const found = await waitFor(() => this.output.slice(from).split('\n').find((line) => pattern.test(line)) ?? null, ms, 5);
    return found ?? null;
  }
}

/** Pids of processes whose command line contains every one of `parts` (Linux /proc). */
export function processesWith(...parts: string[]): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmd = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      if (parts.every((p) => cmd.includes(p))) pids.push(Number(entry));
    } catch {
      // Exited meanwhile.
    }
  }
  return pids;
}

/** A deployment of the crash suites: a fresh table and root, one child agent, the handlers in process. */
export interface ChildDeployment {
  agent: ChildAgent;
  app: App;
  db: Db;
  layout: Layout;
  root: { dir: string; cleanup: () => void };
  /** A signed-up account's session token. */
  token: string;
  /** The public API through `app` (a string body is sent as is, anything else as JSON). */
  api: Api;
  /** Stops the agent, kills whatever names the root (engines a crash left), removes the root. */
  stop(): Promise<void>;
}

/** Starts a child-agent deployment whose settings are `overrides` over quick crash-suite defaults. */
export async function startChildDeployment(
  prefix: string,
  overrides: Record<string, string> = {},
  handlerLog: (line: string) => void = () => {},
): Promise<ChildDeployment> {
  const root = tempDir(prefix);
  const { env, db } = await testDeployment({ SVCD_ROOT: root.dir, SVCD_HEARTBEAT_MS: '500', SVCD_ENGINE_STOP_TIMEOUT_MS: '3000', ...overrides });
  const agent = new ChildAgent(env);
  await agent.start();
  const app = createApp(buildDeps(env, handlerLog));
  const api: Api = {
    request(method, path, init = {}) {
      const headers: Record<string, string> = { ...(init.headers ?? {}) };
      if (init.token) headers.authorization = `Bearer ${init.token}`;
      let body: string | undefined;
      if (typeof init.body === 'string') body = init.body;
      else if (init.body !== undefined) {
        body = JSON.stringify(init.body);
        headers['content-type'] = 'application/json';
      }
      return app.fetch(new Request(`http://svc.test${path}`, { method, headers, body }));
    },
  };
  const r = await api.request('POST', '/v0/signup', { body: {} });
  const token = ((await r.json()) as { token: string }).token;
  return {
    agent,
    app,
    db,
    layout: layoutOf(root.dir),
    root,
    token,
    api,
    async stop() {
      await agent.stop();
      // Nothing may outlive the suite: stop any engine a crash left without an agent.
      for (const pid of processesWith(root.dir)) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // Already gone.
        }
      }
      root.cleanup();
    },
  };
}
