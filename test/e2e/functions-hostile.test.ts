/**
 * Hostile tenants (DESIGN.md §9 "Tenant code is hostile by assumption"; docs/functions.md
 * "Isolation"): the local stack as `npm start` runs it, account A deploying attacking functions in
 * project A while account B's project B runs beside it, woken, with a secret marker row in its
 * database. Each attack is a test that asserts the attack reached nothing, judged on the victim (B's
 * data read back through B's own key, DynamoDB read by the test process, listeners and processes
 * read from the host's /proc, canary listeners that count every connection) and not only on what the
 * attacker's function answered.
 *
 * A deploy refused with 400 or an invocation that fails is an acceptable end for any attack; what is
 * asserted is that nothing happened. The stack runs with its default settings but two: engines take
 * ports from a small range of their own (so the port-squatting attack cannot disturb any other stack
 * on this machine), and `SVCD_ENGINE_STATEMENT_TIMEOUT_MS=1000` when the stack knows that setting
 * (the runaway-query test fails naming it when it does not). Addresses this host does not have (the
 * link-local metadata address 169.254.169.254, private ranges) are never connected to by the test:
 * a function's request to them must be refused by the egress filter itself, which answers 403 with
 * `x-svc-egress-refused` before any connection is made. The stack directory is made 0755, as
 * `npm start`'s `.svc` is, so that engines running as an unprivileged user reach their directories.
 *
 * Attacks that cannot disturb each other run concurrently (1, 3, 10, the DynamoDB listener); the
 * ones that change shared state or measure the host (metrics, DynamoDB writes, process signals,
 * memory, CPU, ports with B's lifecycle, fairness, the runaway query) run one at a time, and put back
 * what a successful attack changed (B's project item, B's engine's nice value and state, files the
 * attacker created, ports it holds) so that one hole does not fail the tests after it.
 */
import { execFileSync } from 'node:child_process';
import { lookup } from 'node:dns/promises';
import { chmodSync, existsSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { homedir, hostname, networkInterfaces, setPriority, tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { DeleteCommand, GetCommand, PutCommand, ScanCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT, type Stack } from '../../infra/local/stack.ts';
import { portIsFree } from '../../infra/local/dynamodb.ts';
import { settingsSchema } from '../../shared/config.ts';
import { createDb, type Db } from '../../shared/db/client.ts';
import { startSuiteStack } from '../helpers/stack.ts';
import { tempDir } from '../helpers/env.ts';
import { callJson } from '../helpers/http.ts';
import { decodeEnvelope } from '../helpers/envelope.ts';
import { FunctionsClient, httpSend, MODULES } from '../helpers/functions.ts';
import { alive, cmdline } from '../helpers/procs.ts';
import { cpuOver, listeners, niceOf, peakRss, processesMentioning, stateOf, treeOf, type Listener } from '../helpers/host.ts';

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;
const STATEMENT_TIMEOUT_SETTING = 'SVCD_ENGINE_STATEMENT_TIMEOUT_MS';
/** How many engine ports the stack gets (the port-squatting attack binds all of them). */
const ENGINE_RANGE = 24;

// ---------------------------------------------------------------------------------------------
// The attackers: each a small module. They take their targets in the request body (a function could
// as well scan for them) and answer what each attempt got, never an error message (which may quote a
// path the test passed in, and the answers are searched for the victim's data).
// ---------------------------------------------------------------------------------------------

/** fetch() to each `{label, url, method, headers, body}`; answers the status and body text each got. */
const FETCHER = `
export default {
  async fetch(request) {
    const { attempts } = await request.json();
    const results = await Promise.all(attempts.map(async (a) => {
      try {
        const r = await fetch(a.url, { method: a.method || 'GET', headers: a.headers || {}, body: a.body, redirect: 'manual', signal: AbortSignal.timeout(5000) });
        const body = new TextDecoder().decode(new Uint8Array(await r.arrayBuffer())).slice(0, 65536);
        return { label: a.label, answered: true, status: r.status, body };
      } catch (e) {
        return { label: a.label, answered: false, error: String((e && ((e.cause && e.cause.code) || e.name)) || 'error') };
      }
    }));
    return Response.json({ results });
  },
};`;

/** connect() of cloudflare:sockets to each `{label, host, port, raw}`: writes `raw`, answers what came back. */
const CF_SOCKETS = `
export default {
  async fetch(request) {
    const { attempts } = await request.json();
    let connect;
    try { ({ connect } = await import('cloudflare:sockets')); } catch (e) { return Response.json({ unavailable: String(e && e.name) }); }
    const results = await Promise.all(attempts.map(async (a) => {
      try {
        const socket = connect({ hostname: a.host, port: a.port });
        await Promise.race([socket.opened, new Promise((_, no) => setTimeout(() => no(new Error('timeout')), 5000))]);
        const writer = socket.writable.getWriter();
        await writer.write(new TextEncoder().encode(a.raw));
        const reader = socket.readable.getReader();
        const decoder = new TextDecoder();
        let received = '';
        const all = (async () => { for (;;) { const { value, done } = await reader.read(); if (done) break; received += decoder.decode(value, { stream: true }); if (received.length > 65536) break; } })();
        await Promise.race([all.catch(() => {}), new Promise((r) => setTimeout(r, 3000))]);
        socket.close().catch(() => {});
        return { label: a.label, opened: true, received };
      } catch (e) {
        return { label: a.label, opened: false, error: String(e && e.name) };
      }
    }));
    return Response.json({ results });
  },
};`;

/** node:net connect() to each `{label, host, port, raw}`: writes `raw`, answers what came back. */
const NET_CONNECT = `
export default {
  async fetch(request) {
    const { attempts } = await request.json();
    let net;
    try { net = await import('node:net'); } catch (e) { return Response.json({ unavailable: String(e && e.name) }); }
    const one = (a) => new Promise((resolve) => {
      let received = '';
      let opened = false;
      let done = false;
      let s;
      const finish = (extra) => { if (done) return; done = true; try { s.destroy(); } catch {} resolve({ label: a.label, opened, received, ...extra }); };
      try { s = net.connect({ host: a.host, port: a.port }); } catch (e) { resolve({ label: a.label, opened: false, error: String(e && (e.code || e.name)) }); return; }
      s.setEncoding('latin1');
      s.on('connect', () => { opened = true; s.write(a.raw); });
      s.on('data', (d) => { received += d; });
      s.on('end', () => finish({}));
      s.on('close', () => finish({}));
      s.on('error', (e) => finish({ error: String(e && (e.code || e.name)) }));
      setTimeout(() => finish({ timedOut: true }), 5000);
    });
    return Response.json({ results: await Promise.all(attempts.map(one)) });
  },
};`;

/** node:sqlite on another tenant's database file and on host paths, and 100 MiB written to the host. */
const SQLITE = `
export default {
  async fetch(request) {
    const { victim, victimDir, dirs, token } = await request.json();
    const out = [];
    const step = async (label, f) => {
      try { out.push({ label, ok: true, value: String(await f()).slice(0, 4000) }); }
      catch (e) { out.push({ label, ok: false, error: String(e && (e.code || e.name)) }); }
    };
    let DatabaseSync;
    await step('import node:sqlite', async () => { ({ DatabaseSync } = await import('node:sqlite')); return typeof DatabaseSync; });
    await step('open the victim', () => {
      const db = new DatabaseSync(victim);
      const rows = db.prepare('SELECT v FROM vault').all();
      db.exec("INSERT INTO vault (v) VALUES ('pwned-by-A-sqlite-open')");
      db.close();
      return JSON.stringify(rows);
    });
    await step('attach the victim', () => {
      const db = new DatabaseSync(':memory:');
      db.exec("ATTACH DATABASE '" + victim + "' AS b");
      const rows = db.prepare('SELECT v FROM b.vault').all();
      db.exec("INSERT INTO b.vault (v) VALUES ('pwned-by-A-sqlite-attach')");
      db.close();
      return JSON.stringify(rows);
    });
    for (const [i, dir] of dirs.entries()) {
      await step('create in dir ' + i, () => { const db = new DatabaseSync(dir + '/' + token + '.db'); db.exec('CREATE TABLE t (x)'); db.close(); return 'created'; });
    }
    await step('create relative', () => { const db = new DatabaseSync(token + '-relative.db'); db.exec('CREATE TABLE t (x)'); db.close(); return 'created'; });
    await step('vacuum into', () => { const db = new DatabaseSync(':memory:'); db.exec('CREATE TABLE t (x)'); db.exec("VACUUM INTO '/tmp/" + token + "-vacuum.db'"); db.close(); return 'vacuumed'; });
    await step('100 MiB through sqlite', () => {
      const db = new DatabaseSync(':memory:');
      db.exec("ATTACH DATABASE '/tmp/" + token + "-big.db' AS big");
      db.exec('CREATE TABLE big.t (x)');
      db.exec('WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100) INSERT INTO big.t SELECT randomblob(1048576) FROM n');
      db.close();
      return 'written';
    });
    let fs;
    await step('import node:fs', async () => { fs = await import('node:fs'); return 'imported'; });
    await step('100 MiB through fs', () => { fs.writeFileSync('/tmp/' + token + '-fs-big', new Uint8Array(100 * 1024 * 1024).fill(7)); return 'written'; });
    await step('a file beside the victim', () => { fs.writeFileSync(victimDir + '/' + token + '-beside', 'x'); return 'written'; });
    return Response.json({ steps: out });
  },
};`;

/**
 * Binds every port of `ports` it can on 127.0.0.1, and keeps trying those it could not get (one freed
 * by an engine that stops is taken at once) until `holdMs` has passed; binds `extra` [port, host]
 * pairs; tries the listen APIs of other runtimes. Answers what it bound.
 */
const LISTENER = `
export default {
  async fetch(request) {
    const { ports, extra, holdMs } = await request.json();
    const out = { bound: [], extra: [], errors: {} };
    let net = null;
    try { net = await import('node:net'); } catch (e) { out.errors.importNet = String(e && e.name); }
    const listen = (port, host) => new Promise((resolve) => {
      try {
        const srv = net.createServer((c) => c.end('HTTP/1.1 200 OK\\r\\ncontent-length: 8\\r\\n\\r\\nhijacked'));
        srv.once('error', (e) => resolve({ error: String(e && (e.code || e.name)) }));
        srv.listen({ port, host, exclusive: true }, () => resolve({ port: srv.address().port }));
      } catch (e) { resolve({ error: String(e && (e.code || e.name)) }); }
    });
    try { const s = await import('cloudflare:sockets'); out.cloudflareListen = typeof s.listen === 'function' ? String(await s.listen({ port: extra[0][0] })) : 'no listen'; }
    catch (e) { out.errors.cloudflareListen = String(e && e.name); }
    try { out.deno = typeof Deno !== 'undefined' && Deno.listen ? String(Deno.listen({ port: extra[0][0] })) : 'no Deno'; }
    catch (e) { out.errors.deno = String(e && e.name); }
    if (net) {
      for (const [port, host] of extra) { const r = await listen(port, host); if (r.port !== undefined) out.extra.push([r.port, host]); else out.errors[host + ':' + port] = r.error; }
      const end = Date.now() + holdMs;
      const missing = new Set(ports);
      while (Date.now() < end) {
        for (const port of [...missing]) { const r = await listen(port, '127.0.0.1'); if (r.port !== undefined) { missing.delete(port); out.bound.push(port); } }
        await new Promise((r) => setTimeout(r, 20));
      }
    }
    return Response.json(out);
  },
};`;

/** Signals and renices another process, and starts processes. */
const PROCESSES = `
export default {
  async fetch(request) {
    const { pid, token, dir } = await request.json();
    const out = {};
    const attempt = async (name, f) => { try { out[name] = String(await f()).slice(0, 200); } catch (e) { out[name] = 'error ' + String(e && (e.code || e.name)); } };
    await attempt('setPriority', async () => { const os = await import('node:os'); os.setPriority(pid, 15); return os.getPriority(pid); });
    await attempt('kill', () => process.kill(pid, 'SIGSTOP'));
    await attempt('_kill', () => process._kill(pid, 19));
    await attempt('spawn', async () => {
      const cp = await import('node:child_process');
      const c = cp.spawn('/bin/sh', ['-c', 'touch ' + dir + '/' + token + '-spawn; sleep 8'], { detached: true, stdio: 'ignore' });
      return c.pid;
    });
    await attempt('execSync', async () => { const cp = await import('node:child_process'); return cp.execSync('touch ' + dir + '/' + token + '-exec; echo done'); });
    await attempt('Worker', async () => { const wt = await import('node:worker_threads'); return new wt.Worker('1', { eval: true }).threadId; });
    return Response.json(out);
  },
};`;

/** Reads each path with every API there is; answers the contents each got (errors as their code only). */
const FILES = `
export default {
  async fetch(request) {
    const { paths } = await request.json();
    let fs = null;
    try { fs = await import('node:fs'); } catch {}
    const clip = (v) => String(v).slice(0, 262144);
    const sync = (f) => { try { return { ok: true, value: clip(f()) }; } catch (e) { return { ok: false, error: String(e && (e.code || e.name)) }; } };
    const later = async (f) => { try { return { ok: true, value: clip(await f()) }; } catch (e) { return { ok: false, error: String(e && (e.code || e.name)) }; } };
    const results = [];
    for (const path of paths) {
      results.push({
        readFileSync: sync(() => fs.readFileSync(path, 'latin1')),
        readdirSync: sync(() => fs.readdirSync(path).join('\\n')),
        promises: await later(() => fs.promises.readFile(path, 'latin1')),
        stream: await later(() => new Promise((ok, no) => { let s = ''; fs.createReadStream(path, { encoding: 'latin1' }).on('data', (d) => { s += d; }).on('end', () => ok(s)).on('error', no); })),
        fetchFile: await later(async () => (await fetch('file://' + path)).text()),
        importJson: await later(async () => JSON.stringify((await import('file://' + path, { with: { type: 'json' } })).default)),
        importText: await later(async () => (await import('file://' + path)).default),
      });
    }
    let sqlite = null;
    try { sqlite = await import('node:sqlite'); } catch {}
    const viaSqlite = paths.map((path) => sync(() => { const db = new sqlite.DatabaseSync(path, { readOnly: true }); const out = JSON.stringify(db.prepare('SELECT v FROM vault').all()); db.close(); return out; }));
    return Response.json({ results, viaSqlite });
  },
};`;

/** Holds 1 GiB of array buffers (every page touched) for half a second. */
const HOG = `
export default {
  async fetch() {
    const held = [];
    for (let i = 0; i < 64; i++) { const b = new Uint8Array(16 * 1024 * 1024); b.fill(1 + (i % 200)); held.push(b); }
    await new Promise((r) => setTimeout(r, 500));
    return new Response('held ' + held.length * 16 + ' MiB');
  },
};`;

const SPIN = `export default { fetch() { for (;;) {} } };`;
/** Waits `ms` then answers. */
const NAP = (ms: number) => `export default { async fetch() { await new Promise((r) => setTimeout(r, ${ms})); return new Response('rested'); } };`;

// ---------------------------------------------------------------------------------------------

interface Tenant {
  token: string;
  account: string;
  project: string;
  key: string;
}

let stack: Stack;
let dir: ReturnType<typeof tempDir>;
let fns: FunctionsClient;
let db: Db;
let A: Tenant;
let B: Tenant;
/** The secret row of B's database. */
const MARKER = `b-secret-${randomBytes(12).toString('hex')}`;
let statementLimitKnown = false;
let enginePorts: [number, number];
/** Ports of the canary listeners of this file, which are not the stack's. */
const canaryPorts = new Set<number>();

async function signup(name: string): Promise<Tenant> {
  const s = await callJson(stack.url, 'POST', '/v0/signup', undefined, {}, 201);
  const project = (await callJson(stack.url, 'POST', '/v0/projects', s.token, { name }, 201)).id as string;
  const key = (await callJson(stack.url, 'POST', `/v0/projects/${project}/keys`, s.token, {}, 201)).key as string;
  return { token: s.token, account: s.account_id, project, key };
}

/** `POST /v2/sql` through the base URL with `key`; the envelope decoded when there is one. */
async function sql(key: string, text: string, timeoutMs = 15_000): Promise<{ status: number; body: any; ms: number }> {
  const t0 = performance.now();
  const r = await fetch(`${stack.url}/v2/sql`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'x-svc-protocol-minor': '3', 'content-type': 'application/json' },
    body: JSON.stringify({ sql: text }),
    signal: AbortSignal.timeout(timeoutMs),
  });
  const raw = new Uint8Array(await r.arrayBuffer());
  let body: any;
  try {
    body = decodeEnvelope(raw);
  } catch {
    body = new TextDecoder().decode(raw);
  }
  return { status: r.status, body, ms: performance.now() - t0 };
}

/** Rows of a query B runs with its own key (which must succeed). */
async function victimRows(text: string): Promise<unknown[][]> {
  const r = await sql(B.key, text);
  if (r.status !== 200) throw new Error(`B's own /v2 query failed: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body.results[0].rows;
}

/**
 * Deploys `source` as `name` in `t`'s project and invokes it with `input` as its JSON body. A deploy
 * refused with 400 ends the attack there (it had no chance to act); any other refusal fails the test.
 */
async function attack(t: Tenant, name: string, source: string, input: unknown, query = '?timeout_ms=30000'): Promise<{ deployed: boolean; status: number; text: string; json: any }> {
  const d = await fns.deploy(t.token, t.project, name, source, query);
  if (d.status === 400) return { deployed: false, status: 400, text: await d.text(), json: null };
  if (d.status !== 200 && d.status !== 201) throw new Error(`deploy of ${name} answered ${d.status} ${await d.text()}`);
  await d.body?.cancel();
  const r = await fns.invoke(t.key, t.project, name, '', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(input) });
  const text = await r.text();
  let json: any = null;
  try {
    json = JSON.parse(text);
  } catch {
    // not JSON: an error page, or nothing
  }
  return { deployed: true, status: r.status, text, json };
}

/** Invokes `name` of `t` with a GET; status, error code and message, and milliseconds taken. */
async function invoke(t: Tenant, name: string, signal?: AbortSignal): Promise<{ status: number; code?: string; message?: string; ms: number; text: string }> {
  const t0 = performance.now();
  const r = await fns.invoke(t.key, t.project, name, '', signal ? { signal } : {});
  const text = await r.text();
  let code: string | undefined;
  let message: string | undefined;
  try {
    const e = JSON.parse(text).error;
    code = e?.code;
    message = e?.message;
  } catch {
    // a function's own answer
  }
  return { status: r.status, code, message, ms: performance.now() - t0, text };
}

/** Every string inside `value`, joined: what the attacker could read, whatever the shape it answered. */
function strings(value: unknown): string {
  if (typeof value === 'string') return value;
  if (Array.isArray(value)) return value.map(strings).join('\n');
  if (value && typeof value === 'object') return Object.values(value).map(strings).join('\n');
  return '';
}

/** The pid of the engine serving `project`, from the host's process table. */
function enginePid(project: string): number {
  const candidates = treeOf([stack.agent.pid!]).filter((p) => {
    const c = cmdline(p);
    return c.includes(project) && / serve /.test(` ${c} `) && c.includes('--data-dir');
  });
  // The engine itself, not a wrapper that started it (one whose descendants match too).
  const innermost = candidates.filter((p) => !candidates.some((q) => q !== p && treeOf([p]).includes(q)));
  if (innermost.length !== 1) throw new Error(`expected one engine process of ${project}, found ${JSON.stringify(candidates.map((p) => `${p} ${cmdline(p)}`))}`);
  return innermost[0]!;
}

/** True when `pid` is an engine (its command line serves a data directory). */
function isEngine(pid: number): boolean {
  const c = cmdline(pid);
  return c.includes(' serve ') && c.includes('--data-dir');
}

/** The pids of every process the stack started (its agent and worker host, and all below them). */
function stackProcesses(): number[] {
  return treeOf([stack.agent.pid!, stack.workerHost.pid!]);
}

/** B's data directory on the host. */
function victimDataDir(): string {
  return join(stack.agents[0]!.root, 'tenants', B.project, 'data');
}

/** A listener counting every connection made to it, on every address of the host. */
async function canary(): Promise<{ port: number; hits: string[]; close: () => Promise<void> }> {
  const hits: string[] = [];
  const open = new Set<import('node:net').Socket>();
  const server: Server = createServer((socket) => {
    open.add(socket);
    socket.once('close', () => open.delete(socket));
    let head = '';
    socket.setEncoding('latin1');
    socket.on('data', (d: string) => {
      head += d;
      const line = head.split('\r\n')[0]!;
      if (head.includes('\r\n')) {
        hits.push(line);
        socket.end('HTTP/1.1 200 OK\r\ncontent-length: 6\r\nconnection: close\r\n\r\ncanary');
      }
    });
    socket.on('error', () => {});
    // A connection that never sends a request line is a hit too.
    socket.on('close', () => {
      if (!head.includes('\r\n')) hits.push(`connection without a request (${head.length} bytes)`);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host: '::', port: 0, ipv6Only: false }, () => resolve());
  });
  const port = (server.address() as { port: number }).port;
  canaryPorts.add(port);
  return {
    port,
    hits,
    close: () =>
      new Promise((r) => {
        server.close(() => r());
        for (const socket of open) socket.destroy();
      }),
  };
}


/** A run of `n` consecutive ports, all free now, below the ephemeral range and away from the default 20000-20999. */
async function freeRange(n: number): Promise<[number, number]> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const first = 22_000 + Math.floor(Math.random() * 8_000);
    let ok = true;
    for (let p = first; p < first + n && ok; p++) ok = await portIsFree('127.0.0.1', p);
    if (ok) return [first, first + n - 1];
  }
  throw new Error(`no ${n} consecutive free ports found`);
}

/** The value of `svc_function_invocations_total{outcome}` for every outcome, from the agent's metrics listener. */
async function invocationCounts(): Promise<Record<string, number>> {
  const text = await (await fetch(`${stack.agents[0]!.metricsUrl}/metrics`)).text();
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^svc_function_invocations_total\{outcome="([a-z_]+)"\} (\S+)$/gm)) out[m[1]!] = Number(m[2]);
  return out;
}

// ---------------------------------------------------------------------------------------------

beforeAll(async () => {
  dir = tempDir('svc-e2e-hostile-');
  // As `npm start`'s `.svc` is (mkdtemp makes 0700): engines running as an unprivileged user must
  // reach their directories below it, and no isolation may rest on a parent directory's mode.
  chmodSync(dir.dir, 0o755);
  statementLimitKnown = STATEMENT_TIMEOUT_SETTING in settingsSchema.shape;
  enginePorts = await freeRange(ENGINE_RANGE);
  stack = await startSuiteStack(dir.dir, {
    SVCD_ENGINE_PORTS: `${enginePorts[0]}-${enginePorts[1]}`,
    ...(statementLimitKnown ? { [STATEMENT_TIMEOUT_SETTING]: '1000' } : {}),
  });
  fns = new FunctionsClient(httpSend(stack.url));
  db = createDb(stack.settings);
  [A, B] = await Promise.all([signup('attacker'), signup('victim')]);
  await callJson(stack.url, 'POST', `/v0/projects/${B.project}/wakeup`, B.token, undefined, 200);
  expect((await sql(B.key, 'CREATE TABLE vault (id INTEGER PRIMARY KEY, v TEXT NOT NULL)')).status).toBe(200);
  expect((await sql(B.key, `INSERT INTO vault (v) VALUES ('${MARKER}')`)).status).toBe(200);
  // A small function in each project, warm: B's so that its runtime runs beside A's attacks.
  await Promise.all([fns.deployed(A.token, A.project, 'hello', MODULES.hello), fns.deployed(B.token, B.project, 'hello', MODULES.hello)]);
  for (const t of [A, B]) expect((await invoke(t, 'hello')).status).toBe(200);
}, 120_000);

afterAll(async () => {
  await stack?.stop();
  dir?.cleanup();
});

describe.concurrent('a function of project A reaches nothing outside its isolate', () => {
  it('1. cannot reach B engine over loopback (any spelling of it) nor any loopback, private, link-local or own address', { timeout: 60_000 }, async () => {
    const trap = await canary();
    const violations: string[] = [];
    try {
      const head = await callJson(stack.url, 'GET', `/v0/projects/${B.project}/head`, B.token, undefined, 200);
      const port = Number(head.endpoint?.port ?? JSON.parse(readFileSync(join(stack.agents[0]!.root, 'run', `${B.project}.json`), 'utf8')).port);
      expect(port).toBeGreaterThan(0);

      // Every name of the loopback listener the engine has; the host name when it resolves to it here.
      const engineHosts: [string, string][] = [
        ['127.0.0.1', '127.0.0.1'],
        ['localhost', 'localhost'],
        ['0.0.0.0', '0.0.0.0'],
        ['127.1', '127.1'],
        ['decimal', '2130706433'],
        ['hex', '0x7f000001'],
        ['v4-mapped v6', '[::ffff:127.0.0.1]'],
      ];
      const own = hostname();
      if ((await lookup(own, { family: 4 }).catch(() => null))?.address === '127.0.0.1') engineHosts.push(['host name', own]);
      // Every address of this host and the classic forbidden ones, seen by the canary (bound to all of them).
      const trapHosts: [string, string][] = [...engineHosts, ['127.0.0.2', '127.0.0.2'], ['[::1]', '[::1]'], ['[::]', '[::]'], ['host name', own]];
      for (const [nic, addrs] of Object.entries(networkInterfaces())) {
        for (const a of addrs ?? []) {
          if (a.internal || a.address.startsWith('fe80')) continue;
          trapHosts.push([`${nic} ${a.address}`, a.family === 'IPv6' ? `[${a.address}]` : a.address]);
        }
      }
      // Addresses this host does not have: refused by the egress filter before any connection (never sent).
      const refusedOnly: [string, string][] = [
        ['metadata 169.254.169.254', 'http://169.254.169.254/latest/meta-data/'],
        ['private 10.0.0.1', 'http://10.0.0.1/'],
        ['private 192.168.1.1', 'http://192.168.1.1/'],
        ['unique local fd00::1', 'http://[fd00::1]/'],
      ];

      const engineHeaders = { 'x-svc-protocol-minor': '3', 'content-type': 'application/json' };
      const attempts = [
        ...engineHosts.flatMap(([label, h]) => [
          { label: `engine via ${label}: read`, url: `http://${h}:${port}/v2/sql`, method: 'POST', headers: engineHeaders, body: JSON.stringify({ sql: 'SELECT v FROM vault' }) },
          { label: `engine via ${label}: insert`, url: `http://${h}:${port}/v2/sql`, method: 'POST', headers: engineHeaders, body: JSON.stringify({ sql: `INSERT INTO vault (v) VALUES ('pwned-by-A-net-${label}')` }) },
        ]),
        ...trapHosts.map(([label, h]) => ({ label: `canary via ${label}`, url: `http://${h}:${trap.port}/canary/${encodeURIComponent(label)}` })),
        ...refusedOnly.map(([label, url]) => ({ label: `refused ${label}`, url })),
      ];
      const got = await attack(A, 'reach-loopback', FETCHER, { attempts });
      for (const [label] of refusedOnly) {
        const result = (got.json?.results ?? []).find((r: any) => r.label === `refused ${label}`);
        if (!result || result.status !== 403 || !String(result.body).startsWith('egress refused')) violations.push(`${label} was not refused by the egress filter: ${JSON.stringify(result)}`);
      }
      if (got.text.includes(MARKER)) {
        const leaking = (got.json?.results ?? []).filter((r: any) => strings(r).includes(MARKER)).map((r: any) => r.label);
        violations.push(`the function read B's marker: ${JSON.stringify(leaking)}`);
      }
    } finally {
      await new Promise((r) => setTimeout(r, 200));
      await trap.close();
    }
    if (trap.hits.length > 0) violations.push(`the canary on every host address was reached: ${JSON.stringify(trap.hits)}`);
    // The victim: its own key sees its row and none of A's.
    const rows = await victimRows(`SELECT v FROM vault ORDER BY id`);
    const inserted = rows.filter((r) => String(r[0]).startsWith('pwned-by-A-net'));
    if (inserted.length > 0) violations.push(`rows A inserted into B's database: ${JSON.stringify(inserted)}`);
    expect(rows.map((r) => r[0])).toContain(MARKER);
    expect(violations).toEqual([]);
  });

  it("3. node:sqlite cannot open B's database or write host files, 100 MiB included", { timeout: 60_000 }, async () => {
    const token = `hostile-${randomBytes(6).toString('hex')}`;
    const victimDir = victimDataDir();
    const victim = join(victimDir, 'data.sqlite');
    expect(existsSync(victim)).toBe(true);
    const dirs = [tmpdir(), '/tmp', REPO_ROOT, stack.dir, stack.agents[0]!.root, victimDir, homedir(), '/'];
    const got = await attack(A, 'sqlite', SQLITE, { victim, victimDir, dirs, token });

    const violations: string[] = [];
    if (got.text.includes(MARKER)) violations.push("the function read B's marker");
    const rows = await victimRows('SELECT v FROM vault ORDER BY id');
    const inserted = rows.filter((r) => String(r[0]).startsWith('pwned-by-A-sqlite'));
    if (inserted.length > 0) violations.push(`rows A inserted into B's database: ${JSON.stringify(inserted)}`);
    expect(rows.map((r) => r[0])).toContain(MARKER);
    // Every file the function tried to create, wherever it might have landed (a relative path lands in
    // the working directory of whatever ran it).
    const created: string[] = [];
    const look = (d: string, depth: number) => {
      let entries: import('node:fs').Dirent[];
      try {
        entries = readdirSync(d, { withFileTypes: true });
      } catch {
        return;
      }
      for (const e of entries) {
        if (e.name.includes(token)) created.push(join(d, e.name));
        if (depth > 0 && e.isDirectory() && !e.isSymbolicLink()) look(join(d, e.name), depth - 1);
      }
    };
    for (const d of new Set(dirs)) look(d, d === stack.dir ? 8 : 0);
    for (const pid of stackProcesses()) {
      try {
        look(readlinkSync(`/proc/${pid}/cwd`), 0);
      } catch {
        // gone
      }
    }
    const files = [...new Set(created)];
    // What the attack left on the host goes (its names carry this test's token).
    for (const f of files) rmSync(f, { force: true });
    if (files.length > 0) violations.push(`host files the function created: ${JSON.stringify(files)}`);
    expect(violations).toEqual([]);
  });

  it('10. reads nothing of the host: /etc/passwd, /proc, the agent state directory, .svc/secrets.json, B data', { timeout: 60_000 }, async () => {
    const agentPid = stack.agent.pid!;
    const root = stack.agents[0]!.root;
    const victim = join(victimDataDir(), 'data.sqlite');
    const secrets = JSON.parse(readFileSync(join(stack.dir, 'secrets.json'), 'utf8')) as Record<string, string>;
    const readable = (p: string) => {
      try {
        return readFileSync(p, 'latin1');
      } catch {
        return '';
      }
    };
    // What the real files hold, read by the test process: none of it may appear in the answer.
    const needles: [string, string][] = [];
    const passwd = readable('/etc/passwd').split('\n')[0]!;
    if (passwd.length >= 8) needles.push(['/etc/passwd', passwd]);
    for (const p of ['/proc/1/environ', '/proc/1/cmdline', `/proc/${agentPid}/cmdline`]) {
      for (const part of readable(p).split('\0')) if (part.length >= 12) needles.push([p, part]);
    }
    for (const [name, value] of Object.entries(secrets)) needles.push([`secrets.json ${name}`, value]);
    const agentId = readable(join(root, 'agent-id')).trim();
    if (agentId.length >= 8) needles.push(['agent id', agentId]);
    needles.push(["B's marker", MARKER]);
    needles.push(["B's project id (a directory name of the state dir)", B.project]);
    needles.push(['a SQLite file', 'SQLite format 3']);
    const paths = [
      '/etc/passwd',
      '/proc/1/environ',
      '/proc/1/cmdline',
      `/proc/${agentPid}/environ`,
      `/proc/${agentPid}/cmdline`,
      stack.dir,
      join(stack.dir, 'secrets.json'),
      root,
      join(root, 'agent-id'),
      join(root, 'tenants'),
      victim,
      `${victim}-wal`,
    ];
    const got = await attack(A, 'files', FILES, { paths });
    const text = got.json ? strings(got.json) : got.text;
    const leaked = needles.filter(([, n]) => n && text.includes(n)).map(([what]) => what);
    // A directory listing, in whatever order it came.
    const listing = readdirSync(root).sort().slice(0, 3);
    if (listing.every((n) => new RegExp(`(^|\\n)${n}(\\n|$)`).test(text))) leaked.push('the agent state dir listing (any order)');
    expect([...new Set(leaked)]).toEqual([]);
  });

  it('DynamoDB Local listens on 127.0.0.1 only', () => {
    const port = Number(new URL(stack.dynamoEndpoint).port);
    const found = listeners().filter((l) => l.port === port);
    expect(found.length).toBeGreaterThan(0);
    // Java listens on an IPv6 socket; its IPv4-mapped loopback (::ffff:127.0.0.1) is the same loopback address.
    expect(found.map((l: Listener) => l.address.replace(/^::ffff:/, ''))).toEqual(found.map(() => '127.0.0.1'));
  });
});

/**
 * DynamoDB as the test process reads it: items outside A's own partition (which A's deploys write),
 * B's project item, and the item the attacker tried to put.
 */
async function tableState(token: string): Promise<{ count: number; victimOwner: unknown; planted: unknown }> {
  let count = 0;
  let start: Record<string, unknown> | undefined;
  do {
    const page = await db.doc.send(
      new ScanCommand({ TableName: db.table, Select: 'COUNT', FilterExpression: 'pk <> :a', ExpressionAttributeValues: { ':a': `PRJ#${A.project}` }, ExclusiveStartKey: start, ConsistentRead: true }),
    );
    count += page.Count ?? 0;
    start = page.LastEvaluatedKey;
  } while (start);
  const victimProject = (await db.doc.send(new GetCommand({ TableName: db.table, Key: { pk: `PRJ#${B.project}`, sk: 'PRJ' }, ConsistentRead: true }))).Item;
  const planted = (await db.doc.send(new GetCommand({ TableName: db.table, Key: { pk: `PWNED#${token}`, sk: 'X' }, ConsistentRead: true }))).Item ?? null;
  return { count, victimOwner: victimProject?.owner, planted };
}

describe('one at a time: metrics, resources and lifecycle under attack', () => {
  it('11. svc_function_invocations_total counts each invocation by its outcome', { timeout: 60_000 }, async () => {
    await Promise.all([
      fns.deployed(A.token, A.project, 'throws', MODULES.throws),
      fns.deployed(A.token, A.project, 'late', NAP(5000), '?timeout_ms=300'),
    ]);
    const before = await invocationCounts();
    const statuses: number[] = [];
    for (const name of ['hello', 'hello', 'hello', 'throws', 'throws', 'late', 'late']) statuses.push((await invoke(A, name)).status);
    expect(statuses).toEqual([200, 200, 200, 502, 502, 504, 504]);
    await new Promise((r) => setTimeout(r, 300));
    const after = await invocationCounts();
    const delta = (o: string) => (after[o] ?? 0) - (before[o] ?? 0);
    expect({ ok: delta('ok'), thrown: delta('error') + delta('bad_output'), timeout: delta('timeout') }).toEqual({ ok: 3, thrown: 2, timeout: 2 });
  });

  it("2. cannot reach DynamoDB Local, the agent's listeners, the metrics port, the front or workerd (fetch, cloudflare:sockets, node:net)", { timeout: 90_000 }, async () => {
    const table = stack.settings.SVCD_TABLE;
    const token = randomBytes(6).toString('hex');
    const dynamoPort = Number(new URL(stack.dynamoEndpoint).port);
    const ddb = (op: string, body: unknown) => ({
      method: 'POST',
      path: '/',
      headers: {
        'content-type': 'application/x-amz-json-1.0',
        'x-amz-target': `DynamoDB_20120810.${op}`,
        'x-amz-date': '20260101T000000Z',
        authorization: `AWS4-HMAC-SHA256 Credential=local/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=content-type;host;x-amz-date;x-amz-target, Signature=${'0'.repeat(64)}`,
      },
      body: JSON.stringify(body),
    });
    interface Target {
      name: string;
      port: number;
      method: string;
      path: string;
      headers: Record<string, string>;
      body?: string;
      /** A substring of the target's own answer to this request: seeing it means it was reached. */
      signature?: string;
      status?: number;
    }
    const targets: Target[] = [
      { name: 'DynamoDB ListTables', port: dynamoPort, ...ddb('ListTables', {}), signature: '"TableNames"' },
      { name: 'DynamoDB Scan', port: dynamoPort, ...ddb('Scan', { TableName: table, Limit: 25 }), signature: '"Items"' },
      {
        name: "DynamoDB UpdateItem (B's owner := A)",
        port: dynamoPort,
        ...ddb('UpdateItem', {
          TableName: table,
          Key: { pk: { S: `PRJ#${B.project}` }, sk: { S: 'PRJ' } },
          UpdateExpression: 'SET #o = :a',
          ExpressionAttributeNames: { '#o': 'owner' },
          ExpressionAttributeValues: { ':a': { S: A.account } },
        }),
      },
      { name: 'DynamoDB PutItem', port: dynamoPort, ...ddb('PutItem', { TableName: table, Item: { pk: { S: `PWNED#${token}` }, sk: { S: 'X' } } }) },
      { name: 'agent internal API', port: Number(new URL(stack.agents[0]!.internalUrl).port), method: 'GET', path: `/internal/v1/projects/${B.project}/functions/hello/invoke`, headers: {} },
      { name: 'agent /v2 listener', port: Number(new URL(stack.agents[0]!.dataplaneUrl).port), method: 'POST', path: '/v2/sql', headers: { 'x-svc-protocol-minor': '3' }, body: '{"sql":"SELECT 1"}' },
      { name: 'agent metrics', port: Number(new URL(stack.agents[0]!.metricsUrl).port), method: 'GET', path: '/metrics', headers: {} },
      { name: 'the front (base URL)', port: Number(new URL(stack.url).port), method: 'GET', path: '/v0/health', headers: {} },
    ];
    // Every other listener of the stack's processes (workerd's own, the worker host's, the front's
    // second port, engines), found on the host.
    const named = new Set(targets.map((t) => t.port));
    const mine = new Set([...stackProcesses(), process.pid]);
    for (const l of listeners()) {
      if (named.has(l.port) || canaryPorts.has(l.port) || !l.pids.some((p) => mine.has(p))) continue;
      named.add(l.port);
      const owner = l.pids.find((p) => mine.has(p))!;
      targets.push({ name: `listener ${l.address}:${l.port} of ${owner === process.pid ? 'the front' : cmdline(owner).split(' ')[0]!.split('/').pop()}`, port: l.port, method: 'GET', path: '/', headers: {} });
    }
    // What each answers the test process: the part that does not change between two asks, digits
    // masked (a time or a request id in the answer changes between the test's ask and the attack's).
    const norm = (text: string) => text.replace(/[0-9]/g, '0');
    for (const t of targets) {
      if (t.signature || t.name.startsWith('DynamoDB')) continue;
      const ask = async () => {
        const r = await fetch(`http://127.0.0.1:${t.port}${t.path}`, { method: t.method, headers: t.headers, body: t.body, signal: AbortSignal.timeout(5000) });
        return { status: r.status, body: await r.text() };
      };
      try {
        const [x, y] = [await ask(), await ask()].map((a) => ({ ...a, body: norm(a.body) })) as [{ status: number; body: string }, { status: number; body: string }];
        let n = 0;
        while (n < x.body.length && x.body[n] === y.body[n]) n++;
        t.status = x.status;
        if (n >= 8) t.signature = x.body.slice(0, Math.min(n, 48));
      } catch {
        // not HTTP to the test process either: only a connection that answers anything counts
      }
    }
    // A control: a port nothing listens on. What the function gets there is what a refusal looks like
    // (an egress filter may answer one itself); the same answer from a target is that refusal too.
    let closed = 0;
    while (closed === 0 || named.has(closed)) closed = (await freeRange(1))[0];
    targets.push({ name: 'control: nothing listens', port: closed, method: 'GET', path: '/', headers: {} });
    const raw = (t: Target) =>
      `${t.method} ${t.path} HTTP/1.1\r\nhost: 127.0.0.1:${t.port}\r\nconnection: close\r\n` +
      Object.entries(t.headers).map(([k, v]) => `${k}: ${v}\r\n`).join('') +
      (t.body !== undefined ? `content-length: ${Buffer.byteLength(t.body)}\r\n` : '') +
      `\r\n${t.body ?? ''}`;

    const before = await tableState(token);
    expect(before).toMatchObject({ victimOwner: B.account, planted: null });
    const victimItem = (await db.doc.send(new GetCommand({ TableName: db.table, Key: { pk: `PRJ#${B.project}`, sk: 'PRJ' }, ConsistentRead: true }))).Item!;
    let viaFetch, viaSockets, viaNet, after;
    try {
      [viaFetch, viaSockets, viaNet] = await Promise.all([
        attack(A, 'reach-fetch', FETCHER, { attempts: targets.map((t) => ({ label: t.name, url: `http://127.0.0.1:${t.port}${t.path}`, method: t.method, headers: t.headers, body: t.body })) }),
        attack(A, 'reach-sockets', CF_SOCKETS, { attempts: targets.map((t) => ({ label: t.name, host: '127.0.0.1', port: t.port, raw: raw(t) })) }),
        attack(A, 'reach-net', NET_CONNECT, { attempts: targets.map((t) => ({ label: t.name, host: '127.0.0.1', port: t.port, raw: raw(t) })) }),
      ]);
      after = await tableState(token);
    } finally {
      // B gets its project back if the attack took it, so that the later tests still find it B's.
      await db.doc.send(new PutCommand({ TableName: db.table, Item: victimItem }));
      await db.doc.send(new DeleteCommand({ TableName: db.table, Key: { pk: `PWNED#${token}`, sk: 'X' } }));
    }
    const reached: string[] = [];
    const byLabel = new Map(targets.map((t) => [t.name, t]));
    for (const [how, got] of [['fetch', viaFetch], ['cloudflare:sockets', viaSockets], ['node:net', viaNet]] as const) {
      const results = (got.json?.results ?? []) as any[];
      const refusal = results.find((r) => r.label === 'control: nothing listens');
      const asRefused = (r: any) => refusal !== undefined && ['answered', 'status', 'body', 'opened', 'received'].every((k) => r[k] === refusal[k]);
      for (const r of results) {
        const t = byLabel.get(r.label);
        if (!t || t.name.startsWith('control') || asRefused(r)) continue;
        const text = norm(String(r.body ?? r.received ?? ''));
        const hit = t.signature ? text.includes(t.signature) : how === 'fetch' ? r.answered === true && r.status === t.status : text.startsWith('HTTP/1.');
        if (hit) reached.push(`${how} → ${t.name}`);
      }
    }
    expect({ reached, table: after }).toEqual({ reached: [], table: before });
  });

  it('8. cannot renice, signal or spawn processes', { timeout: 60_000 }, async () => {
    const pid = enginePid(B.project);
    const nice = niceOf(pid);
    const token = `hostile-${randomBytes(6).toString('hex')}`;
    const scratch = tmpdir();
    let got: Awaited<ReturnType<typeof attack>>;
    let after: { nice: number | null; state: string | null; files: string[]; processes: string[] };
    try {
      got = await attack(A, 'processes', PROCESSES, { pid, token, dir: scratch });
      after = {
        nice: niceOf(pid),
        state: stateOf(pid),
        files: readdirSync(scratch).filter((n) => n.includes(token)),
        processes: processesMentioning(token).map((p) => `${p} ${cmdline(p)}`),
      };
    } finally {
      // Put B back whatever happened, so that the later tests find it as it was.
      if (stateOf(pid) === 'T') process.kill(pid, 'SIGCONT');
      if (nice !== null && niceOf(pid) !== nice) setPriority(pid, nice);
      for (const p of processesMentioning(token)) if (alive(p)) process.kill(p, 'SIGKILL');
    }
    expect(
      { nice: after.nice, stopped: after.state === 'T', files: after.files, processes: after.processes },
      `the function answered ${got.status} ${got.text.slice(0, 400)}`,
    ).toEqual({ nice, stopped: false, files: [], processes: [] });
    expect((await victimRows('SELECT v FROM vault WHERE id = 1'))[0]).toEqual([MARKER]);
  });

  it('6. a function past its memory_mb ends 502 naming the limit, nothing on the host grows to 1 GiB, the next invocations answer', { timeout: 60_000 }, async () => {
    await fns.deployed(A.token, A.project, 'hog', HOG, '?memory_mb=128&timeout_ms=30000');
    const { result, peak, who } = await peakRss(stackProcesses, () => invoke(A, 'hog'));
    const next = await Promise.all([invoke(A, 'hello'), invoke(B, 'hello')]);
    expect(
      {
        status: result.status,
        code: result.code,
        namesTheLimit: /memory/i.test(result.message ?? '') && /128/.test(result.message ?? ''),
        hostProcessBelow1GiB: peak < GiB,
        next: next.map((n) => n.status),
        nextPrompt: Math.max(...next.map((n) => n.ms)) < 5_000,
      },
      `the hog answered ${result.status} ${result.text.slice(0, 300)}; largest RSS ${Math.round(peak / MiB)} MiB (${who}); next in ${next.map((n) => Math.round(n.ms))} ms`,
    ).toEqual({ status: 502, code: 'function_bad_output', namesTheLimit: true, hostProcessBelow1GiB: true, next: [200, 200], nextPrompt: true });
  });

  it('7. while(true) with timeout_ms=1000 ends 504 within seconds and frees the CPU; other projects answer meanwhile', { timeout: 60_000 }, async () => {
    await fns.deployed(A.token, A.project, 'spin', SPIN, '?timeout_ms=1000');
    const t0 = performance.now();
    const spinning = invoke(A, 'spin');
    await new Promise((r) => setTimeout(r, 300));
    const during = await Promise.all([invoke(B, 'hello'), invoke(B, 'hello'), invoke(B, 'hello')]);
    const spun = await spinning;
    const spunMs = performance.now() - t0;
    const afterwards = await Promise.all([invoke(B, 'hello'), invoke(A, 'hello')]);
    await new Promise((r) => setTimeout(r, 500));
    const busy = (await cpuOver(stackProcesses, 1000)).filter((p) => p.cores > 0.5);
    expect(
      { status: spun.status, code: spun.code, withinSeconds: spunMs < 5_000, others: [...during, ...afterwards].map((r) => r.status), stillBurning: busy },
      `the loop ended after ${Math.round(spunMs)} ms`,
    ).toEqual({ status: 504, code: 'function_timeout', withinSeconds: true, others: [200, 200, 200, 200, 200], stillBurning: [] });
  });

  it('4. cannot bind ports: nothing new listens on the host, and B sleeps and wakes up as before', { timeout: 90_000 }, async () => {
    const [first, last] = enginePorts;
    const ports = Array.from({ length: last - first + 1 }, (_, i) => first + i);
    const fixed = (await freeRange(2))[0];
    const extra: [number, string][] = [[fixed, '0.0.0.0'], [fixed + 1, '::'], [0, '127.0.0.1']];
    const known = new Set(listeners().map((l) => l.inode));
    await fns.deployed(A.token, A.project, 'listen', LISTENER, '?timeout_ms=60000');
    const started = fns.invoke(A.key, A.project, 'listen', '', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ports, extra, holdMs: 10_000 }) });
    const lifecycle: string[] = [];
    let appeared: string[] = [];
    let rows: unknown[][] = [];
    try {
      await new Promise((r) => setTimeout(r, 2_000));
      // A listener of a process that runs tenant code (a function worker, workerd): not an engine, not the agent itself.
      const suspect = (l: Listener) => {
        const owners = l.pids.filter((p) => !isEngine(p) && p !== stack.agent.pid);
        return owners.length > 0 && (ports.includes(l.port) || l.port === fixed || l.port === fixed + 1 || owners.some((p) => stackProcesses().includes(p)));
      };
      const seen = () => listeners().filter((l) => !known.has(l.inode) && suspect(l)).map((l) => `${l.address}:${l.port} (${l.pids.map((p) => cmdline(p).split(' ')[0]!.split('/').pop()).join(',')})`);
      appeared = seen();
      // B's lifecycle while the attacker holds or tries to take the engine ports.
      for (const op of ['wakeup', 'sleep', 'wakeup'] as const) {
        const r = await fetch(`${stack.url}/v0/projects/${B.project}/${op}`, { method: 'POST', headers: { authorization: `Bearer ${B.token}` } });
        lifecycle.push(`${op} ${r.status}${r.status === 200 ? '' : ` ${(await r.text()).slice(0, 200)}`}`);
      }
      appeared = [...new Set([...appeared, ...seen()])];
      rows = await victimRows('SELECT v FROM vault WHERE id = 1').catch((e) => [[String(e.message)]]);
      await (await started).text();
    } finally {
      // Whatever the attacker bound goes with its function (its workers end when it is deleted).
      await fetch(`${stack.url}/v0/projects/${A.project}/functions/listen`, { method: 'DELETE', headers: { authorization: `Bearer ${A.token}` } });
      const deadline = Date.now() + 5_000;
      while (Date.now() < deadline && listeners().some((l) => !known.has(l.inode) && ports.includes(l.port) && l.pids.some((p) => !isEngine(p)))) await new Promise((r) => setTimeout(r, 100));
      if ((await fetch(`${stack.url}/v0/projects/${B.project}/head`, { headers: { authorization: `Bearer ${B.token}` } })).status !== 200) {
        await fetch(`${stack.url}/v0/projects/${B.project}/wakeup`, { method: 'POST', headers: { authorization: `Bearer ${B.token}` } });
      }
    }
    expect({ appeared, lifecycle, rows }).toEqual({ appeared: [], lifecycle: ['wakeup 200', 'sleep 200', 'wakeup 200'], rows: [[MARKER]] });
  });

  it('5. 40 busy functions of A leave B its deploys and invocations (never 429/503); only A is refused past its share', { timeout: 120_000 }, async () => {
    const names = Array.from({ length: 40 }, (_, i) => `busy-${String(i).padStart(2, '0')}`);
    // 36 waiting on a long timer, 4 looping (ended by their timeout).
    for (let i = 0; i < names.length; i += 4) {
      await Promise.all(names.slice(i, i + 4).map((n, j) => fns.deployed(A.token, A.project, n, i + j < 36 ? NAP(12_000) : SPIN, i + j < 36 ? '?timeout_ms=20000' : '?timeout_ms=8000')));
    }
    const stop = new AbortController();
    let settled = 0;
    const aStatuses: (number | string)[] = [];
    const load = names.flatMap((n) =>
      Array.from({ length: 10 }, () =>
        invoke(A, n, stop.signal).then(
          (r) => aStatuses.push(r.code ? `${r.status} ${r.code}` : r.status),
          () => aStatuses.push('aborted'),
        ).finally(() => settled++),
      ),
    );
    await new Promise((r) => setTimeout(r, 3_000));
    const bAnswers: string[] = [];
    try {
      const d = await fns.deploy(B.token, B.project, 'under-load', MODULES.hello);
      bAnswers.push(`deploy ${d.status}${d.status < 300 ? '' : ` ${(await d.text()).slice(0, 200)}`}`);
      if (d.status < 300) await d.body?.cancel();
      for (let i = 0; i < 3; i++) {
        const r = await invoke(B, 'hello', AbortSignal.timeout(30_000));
        bAnswers.push(`invoke ${r.status}${r.code ? ` ${r.code}` : ''}`);
      }
      const together = await Promise.all([invoke(B, 'hello', AbortSignal.timeout(30_000)), invoke(B, 'under-load', AbortSignal.timeout(30_000)), invoke(B, 'under-load', AbortSignal.timeout(30_000))]);
      for (const r of together) bAnswers.push(`invoke ${r.status}${r.code ? ` ${r.code}` : ''}`);
    } catch (err) {
      bAnswers.push(`failed: ${(err as Error).message}`);
    }
    // A's load was real: some of its invocations were still running when B had its answers.
    const inFlight = load.length - settled;
    await Promise.race([Promise.allSettled(load), new Promise((r) => setTimeout(r, 25_000))]);
    stop.abort();
    await Promise.allSettled(load);
    const tally: Record<string, number> = {};
    for (const s of aStatuses) tally[String(s)] = (tally[String(s)] ?? 0) + 1;
    expect(bAnswers, `A's answers: ${JSON.stringify(tally)}`).toEqual(['deploy 201', 'invoke 200', 'invoke 200', 'invoke 200', 'invoke 200', 'invoke 200', 'invoke 200']);
    expect(inFlight, `A's answers: ${JSON.stringify(tally)}`).toBeGreaterThan(0);
  });

  it('9. a runaway recursive query through /v2 ends with an error within seconds, and the next request answers promptly', { timeout: 60_000 }, async () => {
    // A project of its own, so that a query the engine cannot stop stalls no other test's engine.
    const project = (await callJson(stack.url, 'POST', '/v0/projects', B.token, { name: 'runaway' }, 201)).id as string;
    const key = (await callJson(stack.url, 'POST', `/v0/projects/${project}/keys`, B.token, {}, 201)).key as string;
    await callJson(stack.url, 'POST', `/v0/projects/${project}/wakeup`, B.token, undefined, 200);
    const note = statementLimitKnown ? '' : ` (the stack does not know ${STATEMENT_TIMEOUT_SETTING}, so it ran without it)`;
    let first: { status: number | string; ms: number; body?: any };
    let next: { status: number | string; ms: number };
    try {
      const t0 = performance.now();
      first = await sql(key, 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 300000000) SELECT count(*) FROM c', 10_000).catch((e) => ({ status: `no answer (${(e as Error).name})`, ms: performance.now() - t0 }));
      const t1 = performance.now();
      next = await sql(key, 'SELECT 1', 5_000).catch((e) => ({ status: `no answer (${(e as Error).name})`, ms: performance.now() - t1 }));
    } finally {
      // An engine still stuck in the query is ended here rather than left burning a core.
      try {
        const pid = enginePid(project);
        if ((await sql(key, 'SELECT 1', 1_000).catch(() => null))?.status !== 200) process.kill(pid, 'SIGKILL');
      } catch {
        // gone already
      }
    }
    expect(
      {
        error: typeof first.status === 'number' && first.status >= 400 && typeof first.body === 'object' && first.body?.error !== undefined,
        withinSeconds: first.ms < 5_000,
        next: next.status,
        nextPrompt: next.ms < 2_000,
      },
      `the query answered ${first.status} after ${Math.round(first.ms)} ms (${JSON.stringify(first.body ?? null).slice(0, 200)}), the next request ${next.status} after ${Math.round(next.ms)} ms${note}`,
    ).toEqual({ error: true, withinSeconds: true, next: 200, nextPrompt: true });
  });
});
