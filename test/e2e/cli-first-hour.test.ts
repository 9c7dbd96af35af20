/**
 * A developer's first hour with the `svc` CLI as it ships (dist/client/svc.mjs) against the local
 * stack (docs/cli.md, docs/functions.md "From source", "Running locally"): projects by name (an
 * ambiguous or unknown name refused, naming the ids), a linked directory, completion scripts, a
 * function deployed from TypeScript with an npm import whose error stack in the logs names the
 * TypeScript file, `functions dev` serving and reloading, `logs --follow` ended by Ctrl-C,
 * BEGIN … COMMIT at the shell's prompt as one batch, and `logout` revoking the key the CLI issued.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stack } from '../../infra/local/stack.ts';
import { driveShell } from '../helpers/pty-shell.ts';
import { startSuiteStack } from '../helpers/stack.ts';
import { REPO, tempDir } from '../helpers/env.ts';

const CLI = join(REPO, 'dist/client/svc.mjs');
const dir = tempDir('svc-first-hour-');
const config = join(dir.dir, 'config');
const app = join(dir.dir, 'app');
let stack: Stack;
const ids = { solo: '' };
const children: ChildProcess[] = [];

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  json: any;
}

function env(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH!, HOME: dir.dir, SVC_CONFIG_DIR: config, SVC_BASE_URL: stack.url, ...extra };
}

/** Runs the CLI in `cwd` (default: the app's directory) with `input` on stdin. */
function svc(args: string[], options: { input?: string; cwd?: string; env?: Record<string, string> } = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { cwd: options.cwd ?? app, env: env(options.env), stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => {
      let json: unknown;
      try {
        json = JSON.parse(stdout);
      } catch {
        json = undefined;
      }
      resolve({ code, stdout, stderr, json });
    });
    child.stdin.end(options.input ?? '');
  });
}

async function ok(args: string[], options: Parameters<typeof svc>[1] = {}): Promise<any> {
  const r = await svc([...args, '--json'], options);
  expect(r.code, `svc ${args.join(' ')}: ${r.stderr}`).toBe(0);
  return r.json;
}

/** A long-running CLI process (dev, logs --follow) and what it printed so far. */
function background(args: string[]): { child: ChildProcess; out: () => string; err: () => string; exited: Promise<number | null> } {
  const child = spawn(process.execPath, [CLI, ...args], { cwd: app, env: env(), stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let out = '';
  let err = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (err += d));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, out: () => out, err: () => err, exited };
}

async function until<T>(what: string, probe: () => T | undefined | null | false | Promise<T | undefined | null | false>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The directories `functions dev` runtimes keep their sockets and configuration in. */
const devDirs = () => readdirSync(tmpdir()).filter((d) => d.startsWith('svc-dev-'));

const FUNCTION = `import htm from 'htm';
import { greet } from './greet.ts';

type Tree = { type: string; children: unknown[] };
const html = htm.bind((type: string, _props: unknown, ...children: unknown[]): Tree => ({ type, children }));

function explode(reason: string): never {
  throw new Error('exploded: ' + reason);
}

export default {
  async fetch(request: Request, env: Record<string, string>): Promise<Response> {
    const path = new URL(request.url).pathname;
    console.log('hit ' + path);
    if (path === '/boom') explode('on purpose');
    return Response.json({ tree: html\`<b>\${greet(env.GREETING ?? 'hello')}</b>\`, name: env.FUNCTION_NAME, path });
  },
};
`;

beforeAll(async () => {
  stack = await startSuiteStack(dir.dir);
  mkdirSync(join(app, 'src'), { recursive: true });
  writeFileSync(join(app, 'src/index.ts'), FUNCTION);
  writeFileSync(join(app, 'src/greet.ts'), "export const greet = (word: string): string => `${word}, world`;\n");
  writeFileSync(join(app, '.env'), 'GREETING=howdy\n');
  // The app's own node_modules: htm, a small pure-ESM package, is among the repository's.
  symlinkSync(join(REPO, 'node_modules'), join(app, 'node_modules'));
}, 120_000);
afterAll(async () => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  await stack?.stop();
  dir.cleanup();
});

describe('the first hour with svc', () => {
  it('takes project names wherever an id goes, refusing an ambiguous or unknown one', async () => {
    await ok(['signup', '--name', 'Grace']);
    ids.solo = (await ok(['projects', 'create', 'solo'])).id;
    const twins = [(await ok(['projects', 'create', 'twin'])).id, (await ok(['projects', 'create', 'twin'])).id];
    expect(await ok(['wakeup', 'solo'])).toMatchObject({ id: ids.solo, state: 'running' });
    expect(await ok(['projects', 'get', ids.solo])).toMatchObject({ name: 'solo' });
    const ambiguous = await svc(['wakeup', 'twin']);
    expect(ambiguous.code).toBe(1);
    expect(ambiguous.stderr).toContain(`2 projects are named "twin": ${twins.join(', ')}`);
    const unknown = await svc(['head', 'nope', '--json']);
    expect([unknown.code, unknown.stderr]).toEqual([1, expect.stringContaining('no project named "nope"')]);
    const none = await svc(['head']);
    expect([none.code, none.stderr]).toEqual([2, expect.stringContaining('svc link PROJECT')]);
  });

  it('links a directory: commands given no project use it, from any folder below', async () => {
    const linked = await ok(['link', 'solo']);
    expect(linked).toMatchObject({ project_id: ids.solo, name: 'solo', file: join(app, '.svc/project.json') });
    expect(readFileSync(join(app, '.svc/.gitignore'), 'utf8')).toBe('*\n');
    expect(await ok(['head'], { cwd: join(app, 'src') })).toMatchObject({ source: 'live_probe' });
    expect((await ok(['sql', 'SELECT 1 AS one'])).rows).toEqual([{ one: 1 }]);
    // Another project by name, or --project, still wins over the link.
    expect(await ok(['projects', 'get', '--project', ids.solo])).toMatchObject({ id: ids.solo });
  });

  it('prints completion scripts made from the command tree', async () => {
    for (const shell of ['bash', 'zsh', 'fish']) {
      const r = await svc(['completion', shell]);
      expect(r.code).toBe(0);
      expect(r.stdout).toContain('link');
    }
    const bash = (await svc(['completion', 'bash'])).stdout;
    const run = spawnSync('bash', ['-c', `${bash}\nCOMP_WORDS=(svc functions d); COMP_CWORD=2; _svc; echo "\${COMPREPLY[@]}"`], { encoding: 'utf8' });
    expect(run.stdout.trim()).toBe('deploy dev');
    expect((await svc(['completion', 'tcsh'])).code).toBe(2);
  });

  it('deploys a function from TypeScript with an npm import; its error stack in the logs names the .ts file', async () => {
    const deployed = await svc(['functions', 'deploy', 'hello', 'src/index.ts', '--json']);
    expect(deployed.code, deployed.stderr).toBe(0);
    expect(deployed.json).toMatchObject({ name: 'hello', version: 1 });
    expect(deployed.stderr).toMatch(/bundled src\/index\.ts and 2 more files with esbuild/);
    const answer = await svc(['functions', 'invoke', 'hello', '/x']);
    expect(JSON.parse(answer.stdout)).toEqual({ tree: { type: 'b', children: ['hello, world'] }, name: 'hello', path: '/x' });
    const boom = await svc(['functions', 'invoke', 'hello', '/boom']);
    expect(boom.code).toBe(1);
    const logs = await until('the stack in the logs', async () => {
      const lines: string[] = (await ok(['functions', 'logs', 'hello'])).lines;
      return lines.some((l) => l.includes('exploded: on purpose')) && lines.join('\n').includes('src/index.ts:8:') ? lines.join('\n') : null;
    });
    expect(logs).toMatch(/at explode \(src\/index\.ts:8:9\)/);
    expect(logs).toMatch(/at Object\.fetch \(src\/index\.ts:15:\d+\)/);
    // A .js goes as it is, as before: one importing a package is refused with the next step named.
    writeFileSync(join(app, 'plain.js'), "import htm from 'htm';\nexport default { fetch: () => new Response(typeof htm) };\n");
    const plain = await svc(['functions', 'deploy', 'plain', 'plain.js']);
    expect([plain.code, plain.stderr]).toEqual([1, expect.stringContaining('bundle its imports with --bundle')]);
    expect(await ok(['functions', 'deploy', 'plain', 'plain.js', '--bundle'])).toMatchObject({ name: 'plain', version: 1 });
    expect((await svc(['functions', 'invoke', 'plain'])).stdout).toBe('function');
  }, 60_000);

  it('follows the logs until Ctrl-C', async () => {
    const follow = background(['functions', 'logs', 'hello', '--follow', '--tail', '1']);
    await until('the first lines', () => follow.err().includes('following the logs of hello'));
    await ok(['functions', 'invoke', 'hello', '/followed']);
    await until('the new line', () => follow.out().includes('hit /followed'));
    follow.child.kill('SIGINT');
    expect(await follow.exited).toBe(0);
    expect(follow.out().match(/hit \/followed/g)).toHaveLength(1);
  }, 60_000);

  it('serves the function locally in workerd with the env file, reloading on change', async () => {
    const devDirsBefore = devDirs();
    const dev = background(['functions', 'dev', 'hello', 'src/index.ts', '--env-file', '.env', '--port', '0']);
    const url = await until('the dev server', () => /serving hello at (http:\/\/\S+)/.exec(dev.err())?.[1]);
    expect(await (await fetch(`${url}/local`)).json()).toEqual({ tree: { type: 'b', children: ['howdy, world'] }, name: 'hello', path: '/local' });
    await until('the console line', () => dev.out().includes('hit /local'));
    expect((await fetch(`${url}/boom`)).status).toBe(502);
    await until('the mapped stack', () => dev.err().includes('at explode (src/index.ts:8:9)'));
    writeFileSync(join(app, 'src/greet.ts'), "export const greet = (word: string): string => `${word}, reloaded world`;\n");
    await until('the reload', () => dev.err().includes('reloaded hello'));
    expect((await (await fetch(`${url}/again`)).json()).tree.children).toEqual(['howdy, reloaded world']);
    const running = devDirs().filter((d) => !devDirsBefore.includes(d));
    expect(running).toHaveLength(1);
    dev.child.kill('SIGINT');
    expect(await dev.exited).toBe(0);
    // Its workerd stopped and its sockets and configuration went with it.
    expect(existsSync(join(tmpdir(), running[0]!))).toBe(false);
    await expect(fetch(`${url}/gone`)).rejects.toThrow();
  }, 60_000);

  it('turns BEGIN … COMMIT typed at the shell into one atomic batch, and ROLLBACK discards', async () => {
    await ok(['sql', 'CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL)']);
    const lines = [
      'BEGIN;',
      "INSERT INTO notes (body) VALUES ('one');",
      "INSERT INTO notes (body) VALUES ('two');",
      'COMMIT;',
      'BEGIN;',
      "INSERT INTO notes (body) VALUES ('three');",
      'INSERT INTO notes (body) VALUES (NULL);',
      'COMMIT;',
      'BEGIN;',
      'DELETE FROM notes;',
      'ROLLBACK;',
      'SELECT body FROM notes ORDER BY id;',
      '.quit',
    ];
    const plain = await driveShell(`${process.execPath} ${CLI} sql`, lines, { env: env(), cwd: app, timeoutMs: 30_000 });
    expect(plain).toContain('BEGIN: statements are kept and sent as one atomic batch at COMMIT');
    expect(plain).toContain('COMMIT: 2 statements applied as one transaction (one atomic batch)');
    expect(plain).toContain('the transaction was not applied: none of its 2 statements took effect');
    expect(plain).toContain('ROLLBACK: 1 statement discarded, nothing was sent');
    expect(plain).toMatch(/│ body │[\s\S]*│ one {2}│[\s\S]*│ two {2}│[\s\S]*\(2 rows\)/);
    // A script with BEGIN … COMMIT (as `sqlite3 .dump` writes) runs too.
    expect((await ok(['sql'], { input: "BEGIN TRANSACTION;\nINSERT INTO notes (body) VALUES ('four');\nCOMMIT;\n" })).rows_affected).toBe(1);
  }, 45_000);

  it('logs in once (a valid session is kept) and logs out revoking the key the CLI issued', async () => {
    const profile = () => JSON.parse(readFileSync(join(config, 'config.json'), 'utf8')).profiles.default;
    const before = profile();
    const again = await ok(['login'], { input: before.account_secret });
    expect(again).toMatchObject({ account_id: before.account_id, reused: true });
    expect(profile().token).toBe(before.token);
    const key: string = profile().keys[ids.solo];
    const keyId = /^svc1_([0-9a-f]{32})_/.exec(key)![1];
    expect((await ok(['keys', 'list'])).keys).toEqual([expect.objectContaining({ key_id: keyId, label: 'svc cli', revoked_at: null })]);
    const out = await ok(['logout']);
    expect(out).toMatchObject({ removed: true, revoked_keys: [{ project: ids.solo, key_id: keyId }], unrevoked_keys: [] });
    const refused = await svc(['sql', 'SELECT 1'], { env: { SVC_KEY: key } });
    expect([refused.code, refused.stderr]).toEqual([1, expect.stringContaining('authentication_required')]);
  });
});
