/**
 * The kill -9 campaign (docs/local-stack.md "Crash campaign"): runs the local stack as `npm start`
 * does (infra/local/start.ts, a real process tree) and SIGKILLs a process at a random moment inside
 * wakeup, sleep, snapshot, restore, object PUT and object DELETE — the host agent for those, and the
 * supervisor itself for `supervisor` points — then checks what every user could see afterwards:
 *
 *   lost          an acknowledged write is gone (a row inserted through /v2, a PUT's bytes, a
 *                 DELETE that comes back, a snapshot that answered 201 but cannot be restored)
 *   torn          a state that is neither before nor after (a restore half applied, an object whose
 *                 bytes are neither the old nor the new, a stored row without bytes)
 *   wrong-state   a recorded state that disagrees with the tenant (running but /v2 refuses, head
 *                 offline_status without a directory, …), or a stack that did not come back
 *   left-running  a process of a killed supervisor still alive 5 s later, or an engine still running
 *                 after the final stop
 *
 * Usage: node test/chaos/kill-campaign.ts [--points N] [--seed S]   (npm run chaos -- --points 60)
 * Exits 1 when any count is not 0. Not part of `npm test`: a full run takes minutes.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { freePort } from '../../infra/local/dynamodb.ts';
import { decodeEnvelope } from '../helpers/envelope.ts';
import { alive, descendants } from '../helpers/procs.ts';

const REPO = resolve(import.meta.dirname, '../..');
const { values: flags } = parseArgs({ options: { points: { type: 'string' }, seed: { type: 'string' } } });
const POINTS = Number(flags.points ?? 42);
let seed = Number(flags.seed ?? Date.now() % 1_000_000);
const firstSeed = seed;
/** mulberry32: a seeded generator, so a failing run can be replayed with --seed. */
function random(): number {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;

const counts = { lost: 0, torn: 0, 'wrong-state': 0, 'left-running': 0 };
type Kind = keyof typeof counts;
function fault(kind: Kind, point: string, what: string): void {
  counts[kind]++;
  console.log(`  ${kind}: ${point}: ${what}`);
}

// ---------------------------------------------------------------------------------------------
// The stack as a process tree

const dir = mkdtempSync(join(tmpdir(), 'svc-chaos-'));
const port = await freePort();
const dynamoPort = await freePort();

interface Running {
  child: ChildProcess;
  url: string;
  output: () => string;
}

async function startStack(): Promise<Running> {
  const child = spawn(join(REPO, 'node_modules/.bin/node'), [join(REPO, 'infra/local/start.ts'), '--dir', dir, '--dynamodb-port', String(dynamoPort)], {
    cwd: REPO,
    env: { PATH: process.env.PATH!, HOME: process.env.HOME ?? '/tmp', SVCD_PORT: String(port) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (out = (out + d).slice(-200_000)));
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (out = (out + d).slice(-200_000)));
  const url = await new Promise<string>((ok, fail) => {
    const deadline = Date.now() + 120_000;
    const timer = setInterval(() => {
      const m = /svc-cloud ready at (\S+)/.exec(out);
      if (m) {
        clearInterval(timer);
        ok(m[1]!);
      } else if (child.exitCode !== null || Date.now() > deadline) {
        clearInterval(timer);
        fail(new Error(`the stack did not start: ${out.slice(-2000)}`));
      }
    }, 50);
  });
  return { child, url, output: () => out };
}

function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
  } catch {
    return '';
  }
}

/** Every live process whose command line names the campaign's directory (engines, agents, java). */
function processesOfDir(): number[] {
  const out: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d) || Number(d) === process.pid) continue;
    if (cmdline(Number(d)).includes(dir)) out.push(Number(d));
  }
  return out;
}

function agentPid(stack: Running): number | undefined {
  return descendants(stack.child.pid!).find((p) => cmdline(p).includes('host-agent/main.ts'));
}

const sleepMs = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------------------------
// The public API

let stack = await startStack();
let token = '';

async function api(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: any; raw: Uint8Array }> {
  const init: RequestInit = { method, headers: { authorization: `Bearer ${token}`, ...headers }, signal: AbortSignal.timeout(60_000) };
  if (body instanceof Uint8Array) init.body = body as Uint8Array<ArrayBuffer>;
  else if (body !== undefined) init.body = JSON.stringify(body);
  try {
    const r = await fetch(stack.url + path, init);
    const raw = new Uint8Array(await r.arrayBuffer());
    let parsed: unknown;
    try {
      parsed = JSON.parse(new TextDecoder().decode(raw));
    } catch {
      parsed = undefined;
    }
    return { status: r.status, body: parsed, raw };
  } catch (err) {
    return { status: 0, body: { error: { message: (err as Error).message } }, raw: new Uint8Array() };
  }
}

async function must(method: string, path: string, body?: unknown, ok = [200, 201]): Promise<any> {
  for (let attempt = 0; ; attempt++) {
    const r = await api(method, path, body);
    if (ok.includes(r.status)) return r.body;
    // Right after a restart the agent may still be coming back: retry what is only unavailable.
    if ((r.status === 0 || r.status === 502 || r.status === 503) && attempt < 60) {
      await sleepMs(500);
      continue;
    }
    throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`);
  }
}

async function sql(key: string, text: string, params: unknown[] = []): Promise<{ status: number; body: any }> {
  try {
    const r = await fetch(`${stack.url}/v2/sql`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'x-svc-protocol-minor': '3', 'content-type': 'application/json' },
      body: JSON.stringify({ sql: text, params }),
      signal: AbortSignal.timeout(30_000),
    });
    const raw = new Uint8Array(await r.arrayBuffer());
    return { status: r.status, body: r.headers.get('content-type')?.includes('svc.product') ? decodeEnvelope(raw) : JSON.parse(new TextDecoder().decode(raw)) };
  } catch (err) {
    return { status: 0, body: (err as Error).message };
  }
}

// ---------------------------------------------------------------------------------------------
// What each project is expected to hold

interface Tracked {
  id: string;
  key: string;
  /** Rows acknowledged by /v2 (the table `t` holds 1..rows). */
  rows: number;
  /** Snapshots that answered 201, with the row count they hold. */
  snapshots: { id: string; rows: number }[];
  /** Objects: key → bytes acknowledged (null: deleted and acknowledged). */
  objects: Map<string, Uint8Array | null>;
}

function pattern(n: number, salt: number): Uint8Array {
  const out = new Uint8Array(n);
  let x = salt * 2654435761;
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    out[i] = x >>> 24;
  }
  return out;
}
const sameBytes = (a: Uint8Array, b: Uint8Array) => a.byteLength === b.byteLength && Buffer.from(a).equals(Buffer.from(b));

async function newProject(): Promise<Tracked> {
  const p = await must('POST', '/v0/projects', { name: `chaos ${Math.floor(random() * 1e6)}` });
  const k = await must('POST', `/v0/projects/${p.id}/keys`, { label: 'chaos' });
  await must('PUT', `/v0/projects/${p.id}/storage/buckets/chaos`);
  return { id: p.id, key: k.key, rows: 0, snapshots: [], objects: new Map() };
}

async function writeRows(t: Tracked, n: number): Promise<void> {
  if (t.rows === 0) {
    const r = await sql(t.key, 'CREATE TABLE IF NOT EXISTS t (v INTEGER PRIMARY KEY)');
    if (r.status !== 200) throw new Error(`create table: ${r.status} ${JSON.stringify(r.body)}`);
  }
  for (let i = 0; i < n; i++) {
    const r = await sql(t.key, 'INSERT INTO t (v) VALUES (?)', [t.rows + 1]);
    if (r.status !== 200) throw new Error(`insert: ${r.status} ${JSON.stringify(r.body)}`);
    t.rows++;
  }
}

async function countRows(t: Tracked): Promise<number | string> {
  const r = await sql(t.key, 'SELECT count(*) AS n, coalesce(max(v), 0) AS m FROM t');
  if (r.status !== 200) return `${r.status} ${JSON.stringify(r.body)}`;
  const [n, m] = r.body.results[0].rows[0];
  return n === m ? n : `holes: count ${n}, max ${m}`;
}

// ---------------------------------------------------------------------------------------------
// Recovery and checks

/** How many times the stack has said an agent is ready (the supervisor logs each start). */
const readyLines = () => stack.output().match(/stack: host agent \S+ ready at/g)?.length ?? 0;

/**
 * Waits until the supervisor has restarted the killed agent and said it is ready; a stack that does
 * not come back within 60 s is a wrong state.
 */
async function recovered(point: string, readyBefore: number): Promise<boolean> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (readyLines() > readyBefore) return true;
    await sleepMs(100);
  }
  fault('wrong-state', point, `the supervisor did not bring the agent back within 60 s`);
  return false;
}

/** What the recorded state claims must hold of the tenant; then wakes it and checks its data. */
async function checkProject(t: Tracked, point: string, rowsAllowed: number[]): Promise<void> {
  const g = await api('GET', `/v0/projects/${t.id}`);
  if (g.status !== 200) return fault('wrong-state', point, `GET project ${t.id}: ${g.status} ${JSON.stringify(g.body)}`);
  const state = g.body.state as string;
  const head = await api('GET', `/v0/projects/${t.id}/head`);
  if (state === 'running') {
    const c = await countRows(t);
    if (typeof c === 'string' && !c.includes('no such table')) fault('wrong-state', point, `recorded running but /v2 answers ${c}`);
    if (head.status !== 200 || head.body.source !== 'live_probe') fault('wrong-state', point, `running but head ${head.status} ${JSON.stringify(head.body)}`);
  } else if (state === 'sleeping') {
    const v2 = await sql(t.key, 'SELECT 1');
    if (v2.status !== 409) fault('wrong-state', point, `recorded sleeping but /v2 answers ${v2.status}`);
    if (head.status !== 200 || head.body.source !== 'offline_status') fault('wrong-state', point, `sleeping but head ${head.status} ${JSON.stringify(head.body)}`);
  } else if (state === 'stopped') {
    if (head.status !== 409 || head.body?.error?.code !== 'tenant_not_running') fault('wrong-state', point, `stopped but head ${head.status} ${JSON.stringify(head.body)}`);
    const snap = await api('POST', `/v0/projects/${t.id}/snapshots`, {});
    if (snap.status !== 409) fault('wrong-state', point, `stopped but snapshot answered ${snap.status}`);
    if (t.rows > 0) fault('lost', point, `stopped (no data directory) though ${t.rows} rows were acknowledged`);
  } else {
    fault('wrong-state', point, `unknown state ${state}`);
  }
  const w = await api('POST', `/v0/projects/${t.id}/wakeup`);
  if (w.status !== 200) return fault('wrong-state', point, `wakeup after recovery: ${w.status} ${JSON.stringify(w.body)}`);
  if (t.rows === 0 && rowsAllowed.every((n) => n === 0)) return;
  const c = await countRows(t);
  if (typeof c === 'string') return fault('lost', point, `rows unreadable: ${c}`);
  if (!rowsAllowed.includes(c)) {
    fault(c < Math.min(...rowsAllowed) ? 'lost' : 'torn', point, `${c} rows, expected one of ${rowsAllowed.join(', ')}`);
  }
  t.rows = c;
}

/** Every catalog row of the bucket has its bytes, and each tracked object is what was acknowledged. */
async function checkObjects(t: Tracked, point: string, allowed: Map<string, (Uint8Array | null)[]>): Promise<void> {
  const list = await api('GET', `/v0/projects/${t.id}/storage/objects?bucket=chaos`);
  if (list.status !== 200) return fault('wrong-state', point, `list objects: ${list.status}`);
  for (const row of list.body.objects as { key: string; size: number; state: string }[]) {
    if (row.state !== 'stored') continue;
    const got = await api('GET', `/v0/projects/${t.id}/storage/objects/chaos/${row.key}`);
    if (got.status !== 200) fault('torn', point, `row ${row.key} has no bytes: ${got.status}`);
    else if (got.raw.byteLength !== row.size) fault('torn', point, `row ${row.key} says ${row.size} bytes, blob has ${got.raw.byteLength}`);
  }
  for (const [key, options] of allowed) {
    const got = await api('GET', `/v0/projects/${t.id}/storage/objects/chaos/${key}`);
    const now = got.status === 404 ? null : got.status === 200 ? got.raw : undefined;
    if (now === undefined) {
      fault('wrong-state', point, `GET ${key}: ${got.status}`);
      continue;
    }
    const match = options.find((o) => (o === null ? now === null : now !== null && sameBytes(o, now)));
    if (match === undefined) {
      const acked = options[options.length - 1];
      fault(now === null && acked !== null ? 'lost' : 'torn', point, `object ${key} holds ${now === null ? 'nothing' : `${now.byteLength} other bytes`}`);
    } else {
      t.objects.set(key, match);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Points

type Op = 'wakeup' | 'sleep' | 'snapshot' | 'restore' | 'put' | 'delete' | 'supervisor';
const OPS: Op[] = ['wakeup', 'sleep', 'snapshot', 'restore', 'put', 'delete', 'supervisor'];

/** Kills the agent (or the supervisor) `delay` ms after `op` started; answers what the op answered. */
async function killDuring(
  point: string,
  op: () => Promise<{ status: number; body: any }>,
  target: 'agent' | 'supervisor',
  delay: number,
): Promise<{ answer: { status: number; body: any }; readyBefore: number }> {
  const agent = agentPid(stack);
  const readyBefore = readyLines();
  const tree = [stack.child.pid!, ...descendants(stack.child.pid!)];
  const pending = op();
  await sleepMs(delay);
  if (target === 'agent') {
    if (agent) process.kill(agent, 'SIGKILL');
  } else {
    process.kill(stack.child.pid!, 'SIGKILL');
  }
  const answer = await pending;
  if (target === 'supervisor') {
    await new Promise((r) => (stack.child.exitCode !== null || stack.child.signalCode !== null ? r(null) : stack.child.once('exit', r)));
    await sleepMs(5_000);
    // Engines left by a dead agent may stay for the next agent to adopt (docs/lifecycle.md); every
    // other process of the old tree must be gone.
    const left = tree.filter((p) => alive(p) && !cmdline(p).includes('engine/main.ts'));
    for (const p of left) fault('left-running', point, `pid ${p} (${cmdline(p).slice(0, 120)}) outlived its supervisor by 5 s`);
    for (const p of left) process.kill(p, 'SIGKILL');
    try {
      stack = await startStack();
    } catch (err) {
      fault('wrong-state', point, `npm start did not come back: ${(err as Error).message.slice(0, 300)}`);
      throw err;
    }
  }
  return { answer, readyBefore };
}

/**
 * How long after its start each operation is killed, at most: about its own length on this machine
 * (a wakeup spawns an engine in ~100 ms, a DELETE takes a few ms), so most kills land inside it.
 */
const KILL_WINDOW_MS: Record<Op, number> = { wakeup: 150, sleep: 120, snapshot: 200, restore: 250, put: 150, delete: 30, supervisor: 150 };
let interrupted = 0;

async function runPoint(n: number, op: Op, t: Tracked): Promise<void> {
  const delay = Math.floor(random() * KILL_WINDOW_MS[op]);
  const point = `#${n} ${op} +${delay} ms`;
  const target = op === 'supervisor' ? 'supervisor' : 'agent';
  const base = `/v0/projects/${t.id}`;
  const rowsBefore = t.rows;
  let rowsAllowed = [rowsBefore];
  const objects = new Map<string, (Uint8Array | null)[]>();

  // Arrange the state the operation starts from.
  const g = await must('GET', base);
  if (op === 'wakeup' || op === 'put' || op === 'delete' || op === 'supervisor') {
    if (g.state === 'running' && random() < 0.7) await must('POST', `${base}/sleep`);
  } else {
    if (g.state !== 'running') await must('POST', `${base}/wakeup`);
    await writeRows(t, 2 + Math.floor(random() * 5));
    rowsAllowed = [t.rows];
    if (op !== 'sleep') await must('POST', `${base}/sleep`);
  }
  let snapshot: { id: string; rows: number } | undefined;
  if (op === 'restore') {
    snapshot = t.snapshots.length ? pick(t.snapshots) : undefined;
    if (!snapshot) {
      const s = await must('POST', `${base}/snapshots`, { label: 'chaos' });
      snapshot = { id: s.id, rows: t.rows };
      t.snapshots.push(snapshot);
      await must('POST', `${base}/wakeup`);
      await writeRows(t, 3);
      await must('POST', `${base}/sleep`);
    }
    rowsAllowed = [t.rows, snapshot.rows];
  }
  const key = `k${Math.floor(random() * 3)}`;
  const size = (1 + Math.floor(random() * 4)) << 20;
  const bytes = pattern(size, n);
  if (op === 'delete' && !t.objects.get(key)) {
    const b = pattern(64 << 10, n + 1000);
    await must('PUT', `${base}/storage/objects/chaos/${key}`, b);
    t.objects.set(key, b);
  }
  const before = t.objects.get(key) ?? null;

  // Act, with the kill.
  const run = (): Promise<{ status: number; body: any }> => {
    switch (op) {
      case 'wakeup':
      case 'supervisor':
        return api('POST', `${base}/wakeup`);
      case 'sleep':
        return api('POST', `${base}/sleep`);
      case 'snapshot':
        return api('POST', `${base}/snapshots`, { label: 'chaos' });
      case 'restore':
        return api('POST', `${base}/restore`, { snapshot_id: snapshot!.id });
      case 'put':
        return api('PUT', `${base}/storage/objects/chaos/${key}`, bytes, { 'content-type': 'application/octet-stream' });
      case 'delete':
        return api('DELETE', `${base}/storage/objects`, { bucket: 'chaos', key });
    }
  };
  const { answer, readyBefore } = await killDuring(point, run, target, delay);
  const acked = answer.status >= 200 && answer.status < 300;
  if (target === 'agent' && !(await recovered(point, readyBefore))) return;

  // Assert.
  if (op === 'snapshot' && acked) t.snapshots.push({ id: answer.body.id, rows: t.rows });
  if (op === 'restore' && acked) rowsAllowed = [snapshot!.rows];
  if (op === 'put') objects.set(key, acked ? [bytes] : [before, bytes]);
  if (op === 'delete') objects.set(key, acked ? [null] : [before, null]);
  await checkProject(t, point, rowsAllowed);
  await checkObjects(t, point, objects);
  if (!acked) interrupted++;
  console.log(`  ${point}: ${acked ? 'acknowledged' : `answered ${answer.status}`}; checked`);
}

// ---------------------------------------------------------------------------------------------

console.log(`kill -9 campaign: ${POINTS} points, seed ${firstSeed}, stack at ${stack.url}, state under ${dir}`);
let exitCode = 0;
try {
  const signup = await fetch(`${stack.url}/v0/signup`, { method: 'POST', body: '{}' });
  token = ((await signup.json()) as { token: string }).token;
  const projects: Tracked[] = [];
  for (let i = 0; i < 4; i++) projects.push(await newProject());
  for (let n = 1; n <= POINTS; n++) {
    // Fresh projects now and then, so first wakeups (engine init) are hit too.
    if (random() < 0.15) projects.push(await newProject());
    const op = OPS[(n - 1) % OPS.length]!;
    await runPoint(n, op, pick(projects));
  }
} catch (err) {
  console.log(`campaign stopped early: ${(err as Error).stack}`);
  exitCode = 1;
} finally {
  const exited = new Promise((r) => (stack.child.exitCode !== null ? r(null) : stack.child.once('exit', r)));
  stack.child.kill('SIGTERM');
  await Promise.race([exited, sleepMs(60_000)]);
  await sleepMs(1_000);
  for (const p of processesOfDir()) {
    fault('left-running', 'final stop', `pid ${p} (${cmdline(p).slice(0, 120)}) still running after the stack stopped`);
    process.kill(p, 'SIGKILL');
  }
  rmSync(dir, { recursive: true, force: true });
}
console.log(`${interrupted} of ${POINTS} kills cut their operation short (the others landed just after it answered)`);
console.log(`lost ${counts.lost} / torn ${counts.torn} / wrong-state ${counts['wrong-state']} / left-running ${counts['left-running']}`);
if (Object.values(counts).some((c) => c > 0)) exitCode = 1;
process.exit(exitCode);
