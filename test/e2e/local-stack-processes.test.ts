/**
 * End to end: how `infra/local/start.ts` (what `npm start` runs) keeps its processes in hand
 * (docs/local-stack.md), driven as a real process tree the way a terminal does — its own process
 * group, signals to the whole group, kill -9 — and checked in the process table.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { connect } from 'node:net';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort, portIsFree } from '../../infra/local/dynamodb.ts';
import { processStartTime } from '../../shared/procs.ts';
import { REPO, tempDir } from '../helpers/env.ts';
import { alive, cmdline, descendants, survivors } from '../helpers/procs.ts';

interface Started {
  child: ChildProcess;
  url: string;
  output: () => string;
  exited: Promise<number | null>;
}

const dirs = [tempDir('svc-e2e-procs-a-'), tempDir('svc-e2e-procs-b-'), tempDir('svc-e2e-procs-c-')];
const [dirA, dirB, dirC] = dirs.map((d) => d.dir) as [string, string, string];

// Every process these tests caused, with its start time, so the clean-up never touches a reused pid.
const seen = new Map<number, string | null>();
function note(pids: number[]): number[] {
  for (const p of pids) if (!seen.has(p)) seen.set(p, processStartTime(p));
  return pids;
}
afterAll(() => {
  for (const [pid, start] of seen) {
    if (alive(pid) && processStartTime(pid) === start) process.kill(pid, 'SIGKILL');
  }
  for (const d of dirs) d.cleanup();
});

/** Runs start.ts as a terminal runs a foreground job: the leader of its own process group. */
function launch(dir: string, env: Record<string, string>, args: string[] = []): { child: ChildProcess; output: () => string; exited: Promise<number | null> } {
  const child = spawn(join(REPO, 'node_modules/.bin/node'), [join(REPO, 'infra/local/start.ts'), '--dir', dir, ...args], {
    cwd: REPO,
    env: { PATH: process.env.PATH!, HOME: process.env.HOME ?? '/tmp', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  note([child.pid!]);
  let out = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (out += d));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return { child, output: () => out, exited };
}

async function start(dir: string, env: Record<string, string>, args: string[] = []): Promise<Started> {
  const l = launch(dir, env, args);
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setInterval(() => {
      const m = /svc-cloud ready at (\S+)/.exec(l.output());
      if (m) {
        clearInterval(timer);
        resolve(m[1]!);
      } else if (l.child.exitCode !== null) {
        clearInterval(timer);
        reject(new Error(`stack exited ${l.child.exitCode}: ${l.output()}`));
      }
    }, 50);
  });
  note(descendants(l.child.pid!));
  return { ...l, url };
}

/** A port P with P+1..P+4 free too: a stack on SVCD_PORT=P alone can take all five. */
async function freeBase(): Promise<number> {
  for (;;) {
    const p = await freePort();
    if (p + 4 > 65535) continue;
    if ((await Promise.all([1, 2, 3, 4].map((i) => portIsFree('127.0.0.1', p + i)))).every(Boolean)) return p;
  }
}

/** Tries to open a connection from local port `from` (to `to`): what a client of the stack would need to take that port. */
function connectFrom(from: number, to: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect({ port: to, host: '127.0.0.1', localAddress: '127.0.0.1', localPort: from });
    socket.once('connect', () => (socket.destroy(), resolve('connected')));
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
  });
}

async function waitFor(what: string, cond: () => boolean | Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const agentPid = (s: Started) => descendants(s.child.pid!).find((p) => cmdline(p).includes('host-agent/main.ts'));
const engines = (pids: number[]) => pids.filter((p) => cmdline(p).includes('engine/main.ts serve'));

/** Signs up, creates a project, wakes it and makes a key: a tenant with a running engine. */
async function tenant(url: string): Promise<{ token: string; project: string; key: string }> {
  const post = async (path: string, token?: string, body?: unknown) => {
    const r = await fetch(`${url}${path}`, {
      method: 'POST',
      headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    expect(r.status, `${path}: ${r.status}`).toBeLessThan(300);
    return (await r.json()) as Record<string, string>;
  };
  const { token } = await post('/v0/signup', undefined, {});
  const { id } = await post('/v0/projects', token, { name: 'procs' });
  await post(`/v0/projects/${id}/wakeup`, token);
  const { key } = await post(`/v0/projects/${id}/keys`, token, {});
  return { token: token!, project: id!, key: key! };
}

function sql(url: string, key: string): Promise<Response> {
  return fetch(`${url}/v2/sql`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'x-svc-protocol-minor': '3', 'content-type': 'application/json' },
    body: JSON.stringify({ sql: 'SELECT 41 + 1 AS answer' }),
  });
}

describe('npm start -- --help', () => {
  it('prints the usage and exits 0', async () => {
    const l = launch(dirC, {}, ['--help']);
    expect(await l.exited).toBe(0);
    expect(l.output()).toMatch(/^Usage: npm start -- \[options\]/);
    for (const flag of ['--dir', '--dynamodb-port', '--agents', '--help', 'SVCD_PORT']) expect(l.output()).toContain(flag);
  });
});

describe('the local stack as a process tree', () => {
  let a: Started;
  let b: Started;
  let baseA: number;
  let baseB: number;
  let onB: { token: string; project: string; key: string };
  let engineA: number;

  it('moves every port with SVCD_PORT alone, and its banner says where state lives, how to stop and what to try', async () => {
    baseA = await freeBase();
    a = await start(dirA, { SVCD_PORT: String(baseA) });
    expect(a.url).toBe(`http://127.0.0.1:${baseA}`);
    // The stack's own lines go through its logger and may follow the banner by a moment.
    await waitFor("the agent's ready line", () => a.output().includes('host agent agt_'), 5_000);
    expect(a.output()).toContain(`host agent agt_`);
    expect(a.output()).toContain(`ready at http://127.0.0.1:${baseA + 1} (/v2 at http://127.0.0.1:${baseA + 2}, metrics at http://127.0.0.1:${baseA + 4})`);
    const java = descendants(a.child.pid!).filter((p) => cmdline(p).startsWith('java '));
    expect(java).toHaveLength(1);
    expect(cmdline(java[0]!)).toContain(`-port ${baseA + 3} `);
    expect(a.output()).toContain(dirA);
    expect(a.output()).toContain('Ctrl-C');
    expect(a.output()).toContain(`curl -s ${a.url}/v0/health`);
    const health = await fetch(`${a.url}/v0/health`);
    expect(health.status).toBe(200);
    expect(((await health.json()) as { agents: unknown }).agents).toEqual({ live: 1, total: 1 });

    // A second copy beside it, told only its own SVCD_PORT and directory.
    baseB = await freeBase();
    b = await start(dirB, { SVCD_PORT: String(baseB) });
    await waitFor("the agent's ready line", () => b.output().includes('host agent agt_'), 5_000);
    expect(b.output()).toContain(`ready at http://127.0.0.1:${baseB + 1} (/v2 at http://127.0.0.1:${baseB + 2}, metrics at http://127.0.0.1:${baseB + 4})`);
    expect((await fetch(`${b.url}/v0/health`)).status).toBe(200);
  }, 120_000);

  it('refuses a second stack on a held directory with one line naming the holder, starting nothing', async () => {
    const before = descendants(a.child.pid!).sort();
    const ofDirBefore = processesNaming(dirA);
    const other = await freeBase();
    const l = launch(dirA, { SVCD_PORT: String(other) });
    expect(await l.exited).not.toBe(0);
    const lines = l.output().trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(`is in use by another stack (pid ${a.child.pid}, started `);
    expect(lines[0]).toContain(`${a.url}); stop it or pass --dir`);
    expect(processesNaming(dirA)).toEqual(ofDirBefore);
    expect(await portIsFree('127.0.0.1', other)).toBe(true);
    // The holder is untouched.
    expect(descendants(a.child.pid!).sort()).toEqual(before);
    expect((await fetch(`${a.url}/v0/health`)).status).toBe(200);

    // A taken DynamoDB port is named by the flag that sets it.
    const clash = launch(dirC, { SVCD_PORT: String(await freeBase()) }, ['--dynamodb-port', String(baseA + 3)]);
    expect(await clash.exited).toBe(1);
    expect(clash.output().trim().split('\n')).toEqual([`svc-cloud: port ${baseA + 3} on 127.0.0.1 is already in use: pass --dynamodb-port <another port>`]);
  }, 60_000);

  it('starts an agent killed with SIGKILL again, says so, and its tenant answers again', async () => {
    const t = await tenant(a.url);
    expect((await sql(a.url, t.key)).status).toBe(200);
    [engineA] = note(engines(descendants(a.child.pid!))) as [number];
    const old = agentPid(a)!;
    process.kill(old, 'SIGKILL');
    await waitFor('the restart line', () => /host agent agt_\w+ \(pid \d+\) exited \(signal SIGKILL\); restarting it in 0\.5 s/.test(a.output()));
    // Meanwhile its listeners stay the supervisor's (docs/local-stack.md "Ports"): none of its ports
    // can become another connection's source port (as the metrics port once did, in TIME-WAIT, and
    // the restarted agent could not bind it), and the origin still answers /v0 (the fallback front).
    for (const offset of [1, 2, 4]) expect(await connectFrom(baseA + offset, baseA)).toBe('EADDRINUSE');
    const health = await fetch(`${a.url}/v0/health`);
    expect([200, 503]).toContain(health.status);
    await health.arrayBuffer();
    await waitFor('the agent to be ready again', () => a.output().split(`ready at http://127.0.0.1:${baseA + 1}`).length === 3);
    const next = agentPid(a);
    expect(next).toBeDefined();
    expect(next).not.toBe(old);
    note([next!]);
    // Same id, same ports, the engine it left adopted: /v2 answers as before.
    const r = await sql(a.url, t.key);
    expect(r.status).toBe(200);
    expect(await r.text()).toContain('42');
  }, 60_000);

  it("stops everything on one Ctrl-C, though the terminal's and npm's copies of it arrive together", async () => {
    // The engine the restarted agent adopted is no longer below the supervisor, but must stop too.
    expect(alive(engineA)).toBe(true);
    const tree = [...note(descendants(a.child.pid!)), engineA];
    process.kill(-a.child.pid!, 'SIGINT');
    await new Promise((r) => setTimeout(r, 30));
    process.kill(-a.child.pid!, 'SIGINT');
    expect(await a.exited).toBe(0);
    expect(a.output()).not.toContain('exiting now');
    expect(await survivors(tree, 3_000)).toEqual([]);
  }, 60_000);

  it('leaves nothing running when the supervisor is killed with SIGKILL, and starts again on the same directory without help', async () => {
    onB = await tenant(b.url);
    const tree = note(descendants(b.child.pid!));
    const commands = tree.map(cmdline);
    // Every kind of child is there (the process table lists them in pid order, which may wrap).
    for (const part of ['java ', 'host-agent/main.ts', 'infra/local/worker-host.ts', 'workerd serve']) {
      expect(commands.some((c) => c.includes(part)), part).toBe(true);
    }
    expect(engines(tree)).toHaveLength(1);
    b.child.kill('SIGKILL');
    expect(await survivors(tree, 5_000)).toEqual([]);

    b = await start(dirB, { SVCD_PORT: String(baseB) });
    await waitFor("the agent's ready line", () => b.output().includes('host agent agt_'), 5_000);
    const r = await fetch(`${b.url}/v0/projects/${onB.project}`, { headers: { authorization: `Bearer ${onB.token}` } });
    expect(r.status).toBe(200);
  }, 90_000);

  it('clears what a dead stack left running (recorded in its lock) before starting on its directory', async () => {
    // The tether dies with the supervisor, so java never learns: only the record can find it. The
    // supervisor is frozen first, so it cannot see the tether go and clear its group itself.
    const tree = note(descendants(b.child.pid!));
    const tether = tree.find((p) => cmdline(p).includes('infra/local/tether.ts'))!;
    const java = tree.find((p) => cmdline(p).startsWith('java '))!;
    b.child.kill('SIGSTOP');
    process.kill(tether, 'SIGKILL');
    b.child.kill('SIGKILL');
    expect(await survivors(tree.filter((p) => p !== java), 5_000)).toEqual([]);
    expect(alive(java)).toBe(true);

    b = await start(dirB, { SVCD_PORT: String(baseB) });
    await waitFor("the agent's ready line", () => b.output().includes('host agent agt_'), 5_000);
    expect(alive(java)).toBe(false);
    expect(b.output()).toMatch(/stopped 1 process\(es\) left running in \S+ by a stack that died \(pid \d+\)/);
    expect((await fetch(`${b.url}/v0/health`)).status).toBe(200);
  }, 90_000);

  it('a genuinely later second signal forces the exit, and still leaves nothing running', async () => {
    await fetch(`${b.url}/v0/projects/${onB.project}/wakeup`, { method: 'POST', headers: { authorization: `Bearer ${onB.token}` } });
    const tree = note(descendants(b.child.pid!));
    expect(engines(tree)).toHaveLength(1);
    // A stuck agent keeps the graceful stop waiting, as an engine slow to stop would.
    process.kill(agentPid(b)!, 'SIGSTOP');
    process.kill(-b.child.pid!, 'SIGINT');
    await new Promise((r) => setTimeout(r, 1_500));
    expect(b.child.exitCode).toBeNull();
    process.kill(-b.child.pid!, 'SIGINT');
    expect(await b.exited).toBe(1);
    expect(b.output()).toContain('second SIGINT');
    expect(await survivors(tree, 3_000)).toEqual([]);
  }, 60_000);

  it('clears what a child started when that child dies alone (workerd of a killed worker host)', async () => {
    const c = await start(dirC, { SVCD_PORT: String(await freeBase()) });
    const tree = note(descendants(c.child.pid!));
    const host = tree.find((p) => cmdline(p).includes('infra/local/worker-host.ts'))!;
    const workerd = tree.filter((p) => cmdline(p).includes('workerd'));
    expect(workerd.length).toBeGreaterThan(0);
    process.kill(host, 'SIGKILL');
    expect(await survivors(workerd, 3_000)).toEqual([]);
    await waitFor('the exit to be reported', () => /worker host \(miniflare\) exited \(signal SIGKILL\)/.test(c.output()));
    c.child.kill('SIGTERM');
    expect(await c.exited).toBe(0);
    expect(await survivors(tree, 3_000)).toEqual([]);
  }, 60_000);
});

/** Live processes whose command line names `dir` (DynamoDB Local's files, engines' data). */
function processesNaming(dir: string): number[] {
  return descendants(1).filter((p) => p !== process.pid && cmdline(p).includes(dir)).sort();
}

describe('a kill -9 of the process that started the supervisor (npm start)', () => {
  const dir = tempDir('svc-e2e-procs-npm-');
  afterAll(() => dir.cleanup());

  /** Runs start.ts as `npm start` does: a parent (npm) that runs `sh -c "exec node infra/local/start.ts"`. */
  function launchUnderParent(env: Record<string, string>): { parent: ChildProcess; output: () => string } {
    const node = join(REPO, 'node_modules/.bin/node');
    const script = `const { spawn } = require('node:child_process');
      const c = spawn('sh', ['-c', 'exec "$0" "$@"', ${JSON.stringify(node)}, ${JSON.stringify(join(REPO, 'infra/local/start.ts'))}, '--dir', ${JSON.stringify(dir.dir)}], { stdio: 'inherit' });
      c.on('exit', (code) => process.exit(code ?? 1));`;
    const parent = spawn(node, ['-e', script], { cwd: REPO, env: { PATH: process.env.PATH!, HOME: process.env.HOME ?? '/tmp', ...env }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    note([parent.pid!]);
    let out = '';
    parent.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
    parent.stderr!.setEncoding('utf8').on('data', (d: string) => (out += d));
    return { parent, output: () => out };
  }

  it('leaves nothing running — DynamoDB Local, the agent, workerd, the engines — and the next start starts', async () => {
    const base = await freeBase();
    const first = launchUnderParent({ SVCD_PORT: String(base) });
    await waitFor('the stack to be ready', () => /svc-cloud ready at/.test(first.output()), 90_000);
    const url = /svc-cloud ready at (\S+)/.exec(first.output())![1]!;
    await tenant(url);
    const tree = note(descendants(first.parent.pid!));
    const commands = tree.map(cmdline);
    for (const part of ['infra/local/start.ts', 'java ', 'host-agent/main.ts', 'workerd serve', 'engine/main.ts serve']) {
      expect(commands.some((c) => c.includes(part)), part).toBe(true);
    }
    first.parent.kill('SIGKILL');
    expect(await survivors(tree, 20_000)).toEqual([]);
    expect(first.output()).toContain('is gone, stopping');
    // The directory and the ports are free again: the next start starts.
    const again = await start(dir.dir, { SVCD_PORT: String(base) });
    expect(again.url).toBe(url);
    const rest = note(descendants(again.child.pid!));
    process.kill(-again.child.pid!, 'SIGTERM');
    expect(await again.exited).toBe(0);
    expect(await survivors(rest, 5_000)).toEqual([]);
  }, 180_000);
});
