/**
 * The `svc` CLI as it ships (dist/client/svc.mjs, built by `npm test`) spawned as a process against
 * the local stack (docs/cli.md): every command with `--json` checked, exit codes 0/1/2 with the next
 * step named, the interactive shell driven through a pseudo-terminal (util-linux `script`), a
 * 100 MiB `storage cp` up and down with a stable checksum and flat memory, and the `npm pack`
 * tarball's CLI and SDK working from another directory.
 */
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createReadStream, mkdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stack } from '../../infra/local/stack.ts';
import { driveShell } from '../helpers/pty-shell.ts';
import { startSuiteStack } from '../helpers/stack.ts';
import { REPO, tempDir } from '../helpers/env.ts';

const MiB = 1024 * 1024;
const CLI = join(REPO, 'dist/client/svc.mjs');
const dir = tempDir('svc-cli-e2e-');
const config = join(dir.dir, 'config');
let stack: Stack;
let project: string;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  json: any;
  /** Peak resident memory of the process, in bytes (VmHWM). */
  peakRss: number;
}

/** Runs the CLI with `args`, `input` on stdin; answers what it printed, its exit code and peak RSS. */
function svc(args: string[], options: { input?: string | Buffer; env?: Record<string, string>; bin?: string[] } = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(...commandOf(options.bin ?? [process.execPath, CLI], args), {
      env: { PATH: process.env.PATH!, HOME: dir.dir, SVC_CONFIG_DIR: config, SVC_BASE_URL: stack.url, ...options.env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    let peakRss = 0;
    const sample = setInterval(() => {
      try {
        const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'));
        if (m) peakRss = Math.max(peakRss, Number(m[1]) * 1024);
      } catch {
        // gone
      }
    }, 25);
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => {
      clearInterval(sample);
      let json: unknown;
      try {
        json = JSON.parse(stdout);
      } catch {
        json = undefined;
      }
      resolve({ code, stdout, stderr, json, peakRss });
    });
    child.stdin.end(options.input ?? '');
  });
}

function commandOf(bin: string[], args: string[]): [string, string[]] {
  return [bin[0]!, [...bin.slice(1), ...args]];
}

/** Runs and expects exit 0, answering the parsed `--json` output. */
async function ok(args: string[], options: Parameters<typeof svc>[1] = {}): Promise<any> {
  const r = await svc([...args, '--json'], options);
  expect(r.code, `svc ${args.join(' ')}: ${r.stderr}`).toBe(0);
  expect(r.json, `svc ${args.join(' ')} printed JSON only: ${r.stdout}`).toBeDefined();
  return r.json;
}

beforeAll(async () => {
  stack = await startSuiteStack(dir.dir, { SVCD_STORAGE_MAX_BYTES: String(128 * MiB) });
}, 120_000);
afterAll(async () => {
  await stack?.stop();
  dir.cleanup();
});

describe('svc', () => {
  it('answers --help for every command and refuses usage mistakes with exit 2', async () => {
    const top = await svc(['--help']);
    expect(top.code).toBe(0);
    const commands = [...top.stdout.matchAll(/^ {2}([a-z]+) /gm)].map((m) => m[1]!).filter((c) => c !== 'help');
    expect(commands).toEqual(expect.arrayContaining(['signup', 'login', 'projects', 'sql', 'storage', 'realtime', 'secrets', 'functions', 'receipts']));
    const helps = await Promise.all(
      [...commands.map((c) => [c]), ['storage', 'cp'], ['projects', 'create'], ['functions', 'invoke'], ['secrets', 'set']].map((c) => svc([...c, '--help'])),
    );
    for (const h of helps) expect([h.code, h.stdout]).toEqual([0, expect.stringContaining('Usage: svc')]);

    const mistakes = await Promise.all([
      svc(['nonsense']),
      svc(['projects', 'get']),
      svc(['projects', 'get', 'x'.repeat(65), '--json']),
      svc(['secrets', 'set', 'prj_0123456789abcdef', 'NAME', 'the-value']),
      svc(['storage', 'cp', 'a', 'b']),
    ]);
    for (const m of mistakes) expect(m.code, m.stderr).toBe(2);
    expect(mistakes[2]!.json).toEqual({ error: { code: 'usage', message: expect.stringContaining('PROJECT must be a project id') } });
  });

  it('signs up into a private profile and knows who it is', async () => {
    const signed = await ok(['signup', '--name', 'Ada']);
    expect(signed).toMatchObject({ account_id: expect.stringMatching(/^acct_/), profile: 'default' });
    expect(statSync(join(config, 'config.json')).mode & 0o777).toBe(0o600);
    expect(await ok(['whoami'])).toMatchObject({ account_id: signed.account_id, name: 'Ada', project_count: 0, token_from: 'profile' });
    expect(await ok(['health'])).toMatchObject({ status: 'ok' });
  });

  it('creates, lists and reads projects', async () => {
    const created = await ok(['projects', 'create', 'my app']);
    project = created.id;
    expect(created).toMatchObject({ name: 'my app', state: 'stopped' });
    expect((await ok(['projects', 'list'])).projects.map((p: { id: string }) => p.id)).toEqual([project]);
    expect(await ok(['projects', 'get', project])).toMatchObject({ id: project });
    expect(await ok(['projects', 'rename', project, 'renamed'])).toMatchObject({ name: 'renamed' });
  });

  it('names the next step when the engine is not running (exit 1)', async () => {
    const r = await svc(['sql', project, 'SELECT 1', '--json']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`run \`svc wakeup ${project}\``);
    expect(JSON.parse(r.stdout.trim().split('\n').at(-1)!)).toMatchObject({ error: { code: 'tenant_not_running', status: 409, hint: expect.stringContaining('svc wakeup') } });
  });

  it('wakes the engine and runs SQL: a statement, a script on stdin, and parameters', async () => {
    expect(await ok(['wakeup', project])).toMatchObject({ state: 'running' });
    expect(await ok(['head', project])).toMatchObject({ source: 'live_probe', protocol_minor: 3 });
    const script = "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT);\nINSERT INTO notes (body) VALUES ('a;b'), ('c');\n";
    expect((await ok(['sql', project], { input: script })).results.map((r: { rows_affected: number }) => r.rows_affected)).toEqual([0, 2]);
    const rows = await ok(['sql', project, 'SELECT id, body FROM notes WHERE id > ?', '--params', '[0]']);
    expect(rows).toMatchObject({ columns: ['id', 'body'], rows: [{ id: 1, body: 'a;b' }, { id: 2, body: 'c' }] });
    const human = await svc(['sql', project, 'SELECT body FROM notes ORDER BY id']);
    expect(human.stdout).toMatch(/body\s*\na;b\s*\nc\s*\n\(2 rows\)/);
    const bad = await svc(['sql', project, 'SELEC 1']);
    expect([bad.code, bad.stderr]).toEqual([1, expect.stringContaining('sql_error')]);
  });

  it('drives the interactive shell through a pseudo-terminal, with history', async () => {
    const lines = ['SELECT id,', "  body FROM notes WHERE body = 'c';", '.tables', 'SELEC oops;', '.quit'];
    const plain = await driveShell(`${process.execPath} ${CLI} sql ${project}`, lines, { env: { PATH: process.env.PATH!, HOME: dir.dir, SVC_CONFIG_DIR: config, SVC_BASE_URL: stack.url } });
    expect(plain).toContain(`Connected to ${project}`);
    expect(plain).toMatch(/│ id │ body │[\s\S]*│ 2 {2}│ c {4}│[\s\S]*\(1 row\)/);
    expect(plain).toMatch(/│ notes │/);
    expect(plain).toContain('sql_error');
    expect(readFileSync(join(config, 'sql_history'), 'utf8').split('\n')).toEqual(expect.arrayContaining(['SELECT id,', '.tables', '.quit']));
  }, 30_000);

  it('issues, lists and revokes keys (the CLI keeps its own for sql)', async () => {
    const listed = (await ok(['keys', 'list', project])).keys;
    expect(listed).toEqual([expect.objectContaining({ label: 'svc cli', revoked_at: null })]);
    const issued = await ok(['keys', 'create', project, '--label', 'ci']);
    expect(issued.key).toMatch(/^svc1_/);
    expect((await ok(['keys', 'revoke', project, issued.key_id])).revoked_at).not.toBeNull();
    // The CLI's own key revoked: the next sql issues a fresh one.
    await ok(['keys', 'revoke', project, listed[0].key_id]);
    expect((await ok(['sql', project, 'SELECT 1 AS one'])).rows).toEqual([{ one: 1 }]);
  });

  it('copies 100 MiB up and down with the same checksum and flat memory', async () => {
    expect(await ok(['storage', 'buckets', 'create', project, 'photos'])).toMatchObject({ name: 'photos' });
    expect((await ok(['storage', 'buckets', project])).buckets.map((b: { name: string }) => b.name)).toEqual(['photos']);
    const file = join(dir.dir, 'big.bin');
    const block = createHash('sha256').update('seed').digest();
    const chunk = Buffer.alloc(MiB);
    for (let i = 0; i < MiB; i += block.length) block.copy(chunk, i);
    const expected = createHash('sha256');
    const parts: Buffer[] = [];
    for (let i = 0; i < 100; i++) {
      chunk.writeUInt32BE(i, 0);
      parts.push(Buffer.from(chunk));
      expected.update(chunk);
    }
    writeFileSync(file, Buffer.concat(parts));
    parts.length = 0;
    const digest = expected.digest('hex');

    // The same copies of 10 MiB first: a client that held what it copies would peak 90 MiB higher
    // for 100 MiB; one that streams peaks about as high (what differs is garbage not yet collected).
    const tenMiB = join(dir.dir, 'ten.bin');
    writeFileSync(tenMiB, readFileSync(file).subarray(0, 10 * MiB));
    const smallUp = await svc(['storage', 'cp', tenMiB, `${project}:photos/ten.bin`, '--json']);
    const smallDown = await svc(['storage', 'cp', `${project}:photos/ten.bin`, join(dir.dir, 'ten.back'), '--json']);
    expect([smallUp.code, smallDown.code]).toEqual([0, 0]);
    await ok(['storage', 'cp', join(REPO, 'package.json'), `${project}:photos/package.json`]);
    const up = await svc(['storage', 'cp', file, `${project}:photos/dir/`, '--json']);
    expect(up.code, up.stderr).toBe(0);
    expect(up.json).toMatchObject({ key: 'dir/big.bin', size: 100 * MiB, etag: digest });
    const down = await svc(['storage', 'cp', `${project}:photos/dir/big.bin`, join(dir.dir, 'back.bin'), '--json']);
    expect(down.code, down.stderr).toBe(0);
    expect(down.json).toMatchObject({ size: 100 * MiB, etag: digest });
    const back = createHash('sha256');
    for await (const part of createReadStream(join(dir.dir, 'back.bin'))) back.update(part as Buffer);
    expect(back.digest('hex')).toBe(digest);
    for (const [big, small] of [
      [up, smallUp],
      [down, smallDown],
    ] as const) {
      expect(big.peakRss - small.peakRss, `peak RSS ${(big.peakRss / MiB).toFixed(0)} MiB for 100 MiB, ${(small.peakRss / MiB).toFixed(0)} MiB for 10 MiB`).toBeLessThan(48 * MiB);
    }

    const listed = await ok(['storage', 'ls', `${project}:photos`, '--delimiter', '/']);
    expect([listed.objects.map((o: { key: string }) => o.key), listed.common_prefixes]).toEqual([['package.json', 'ten.bin'], ['dir/']]);
    expect(await ok(['storage', 'rm', `${project}:photos/dir/big.bin`])).toMatchObject({ key: 'dir/big.bin' });
    const piped = await svc(['storage', 'cp', '-', `${project}:photos/note.txt`], { input: 'from stdin' });
    expect(piped.code).toBe(0);
    expect((await svc(['storage', 'cp', `${project}:photos/note.txt`, '-'])).stdout).toBe('from stdin');
  }, 60_000);

  it('tails realtime events as JSON lines and publishes', { timeout: 30_000 }, async () => {
    const tail = spawn(process.execPath, [CLI, 'realtime', 'tail', project, 'chat', '--count', '1', '--json'], {
      env: { PATH: process.env.PATH!, HOME: dir.dir, SVC_CONFIG_DIR: config, SVC_BASE_URL: stack.url },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    tail.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    tail.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
    const exited = new Promise<number | null>((r) => tail.on('close', r));
    // At most a heartbeat (15 s) late, should a proxy on the way hold the first comment back.
    await expect.poll(() => err, { timeout: 20_000 }).toContain('subscribed to chat');
    const delivered = await ok(['realtime', 'publish', project, 'chat', 'message', '{"text":"hi"}']);
    expect(delivered).toMatchObject({ channel: 'chat', event: 'message', payload: { text: 'hi' } });
    expect(await exited).toBe(0);
    expect(JSON.parse(out)).toEqual(delivered);
  });

  it('sets secrets from stdin only, lists and removes them; lists receipts', async () => {
    expect(await ok(['secrets', 'set', project, 'STRIPE_KEY'], { input: 'sk_live_1\n' })).toMatchObject({ name: 'STRIPE_KEY', version: 1 });
    const listed = await svc(['secrets', 'list', project, '--json']);
    expect(listed.json.secrets).toEqual([expect.objectContaining({ name: 'STRIPE_KEY' })]);
    expect(listed.stdout).not.toContain('sk_live');
    expect(await ok(['secrets', 'rm', project, 'STRIPE_KEY'])).toMatchObject({ name: 'STRIPE_KEY' });
    const receipts = await ok(['receipts', project, '--limit', '2']);
    expect(receipts.receipts.map((r: { op: string }) => r.op)).toEqual(['secret.delete', 'secret.put']);
  });

  it('deploys, invokes and reads a function', async () => {
    const file = join(dir.dir, 'hello.js');
    writeFileSync(file, 'export default { fetch(request) { return new Response("hello " + new URL(request.url).pathname) } };');
    expect(await ok(['functions', 'deploy', project, 'hello', file, '--timeout-ms', '5000'])).toMatchObject({ name: 'hello', version: 1, timeout_ms: 5000 });
    expect((await ok(['functions', 'list', project])).functions.map((f: { name: string }) => f.name)).toEqual(['hello']);
    expect(await ok(['functions', 'invoke', project, 'hello', '/there'])).toMatchObject({ status: 200, body: 'hello /there' });
    expect((await svc(['functions', 'invoke', project, 'hello', '/plain'])).stdout).toBe('hello /plain');
    expect((await ok(['functions', 'logs', project, 'hello'])).lines.join('\n')).toContain('deployed version 1');
    const missing = await svc(['functions', 'invoke', project, 'nope']);
    expect([missing.code, missing.stderr]).toEqual([1, expect.stringContaining('not_found')]);
  });

  it('snapshots a sleeping project and restores it', async () => {
    const refused = await svc(['snapshots', 'create', project]);
    expect([refused.code, refused.stderr]).toEqual([1, expect.stringContaining(`svc sleep ${project}`)]);
    expect(await ok(['sleep', project])).toMatchObject({ state: 'sleeping' });
    const snap = await ok(['snapshots', 'create', project, '--label', 'before']);
    expect(snap).toMatchObject({ label: 'before', backup: { status: 'verified' } });
    expect((await ok(['snapshots', 'list', project])).snapshots.map((s: { id: string }) => s.id)).toEqual([snap.id]);
    expect(await ok(['restore', project, snap.id])).toMatchObject({ state: 'sleeping', snapshot_id: snap.id });
  });

  it('renews an expired session from the stored account secret, and logs in again from stdin', async () => {
    const file = join(config, 'config.json');
    const stored = JSON.parse(readFileSync(file, 'utf8'));
    const profile = stored.profiles.default;
    writeFileSync(file, JSON.stringify({ profiles: { default: { ...profile, token: 'expired', expires_at: '2020-01-01T00:00:00.000Z' } } }));
    const renewed = await svc(['projects', 'list', '--json']);
    expect([renewed.code, renewed.stderr]).toEqual([0, expect.stringContaining('renewed the session')]);
    expect(JSON.parse(readFileSync(file, 'utf8')).profiles.default.token).not.toBe('expired');

    expect(await ok(['logout'])).toMatchObject({ removed: true });
    const out = await svc(['projects', 'list']);
    expect([out.code, out.stderr]).toEqual([1, expect.stringContaining('svc login')]);
    const login = await ok(['login', '--account-id', profile.account_id], { input: `${profile.account_secret}\n` });
    expect(login).toMatchObject({ account_id: profile.account_id });
    expect(readFileSync(file, 'utf8')).not.toContain('expired');
    // SVC_TOKEN and SVC_BASE_URL stand in for a profile.
    const token = JSON.parse(readFileSync(file, 'utf8')).profiles.default.token;
    const bare = await svc(['projects', 'list', '--json'], { env: { SVC_CONFIG_DIR: join(dir.dir, 'empty'), SVC_TOKEN: token } });
    expect([bare.code, bare.json?.projects?.length]).toEqual([0, 1]);
    expect(await ok(['projects', 'delete', project, '--yes'])).toMatchObject({ id: project });
  });

  it('packs into a tarball whose CLI and SDK work from another directory', async () => {
    const pack = spawnSync('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', dir.dir], { cwd: REPO, encoding: 'utf8' });
    expect(pack.status, pack.stderr).toBe(0);
    const tarball = join(dir.dir, JSON.parse(pack.stdout)[0].filename);
    const app = join(dir.dir, 'app');
    const pkg = join(app, 'node_modules/svc-cloud');
    mkdirSync(pkg, { recursive: true });
    expect(spawnSync('tar', ['-xzf', tarball, '-C', pkg, '--strip-components', '1']).status).toBe(0);
    mkdirSync(join(app, 'node_modules/.bin'));
    symlinkSync('../svc-cloud/bin/svc', join(app, 'node_modules/.bin/svc'));

    const health = await svc(['health', '--json'], { bin: [join(app, 'node_modules/.bin/svc')], env: { SVC_CONFIG_DIR: join(app, 'cfg') } });
    expect([health.code, health.json?.status]).toEqual([0, 'ok']);
    writeFileSync(
      join(app, 'main.mjs'),
      `import { createClient, SvcError } from 'svc-cloud/client';
const anon = createClient({ baseUrl: process.argv[2] });
const { token } = await anon.signup();
const svc = anon.withCredentials({ token });
const p = await svc.projects.create({ name: 'from the tarball' });
const err = await svc.project(p.id).head().catch((e) => e);
console.log(JSON.stringify({ state: p.state, code: err instanceof SvcError ? err.code : null }));`,
    );
    // Asynchronously: the stack's front answers from this process.
    const run = await svc([stack.url], { bin: [process.execPath, join(app, 'main.mjs')] });
    expect(run.code, run.stderr).toBe(0);
    expect(run.json).toEqual({ state: 'stopped', code: 'tenant_not_running' });
  }, 30_000);
});
