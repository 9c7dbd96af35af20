/**
 * The package users install (docs/sdk.md "Packaging"): the tarball `npm pack` makes at the repository
 * root, installed by npm into empty directories under Node 20 and Node 24, from the local npm cache
 * (offline: each directory's lockfile pins esbuild as the repository's does, so npm needs no
 * registry document), and run against the local stack: the installed packages counted (the SDK
 * needs none, the CLI esbuild alone), `svc --help`, `svc health`, a function deployed from
 * TypeScript with the installed esbuild, `functions dev` naming workerd, an SDK script from a
 * node_modules holding svc-cloud alone, and the ORM adapters beside drizzle-orm and kysely with the
 * declarations type-checked where zod is not installed.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, realpathSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseSync } from 'oxc-parser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stack } from '../../infra/local/stack.ts';
import { startSuiteStack } from '../helpers/stack.ts';
import { REPO, tempDir } from '../helpers/env.ts';

type Sdk = typeof import('../../client/index.ts');
interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}
interface LockEntry {
  version?: string;
  dev?: boolean;
  [field: string]: unknown;
}

const NODES = [
  { name: 'Node 20', node: '/usr/bin/node', major: 20 },
  { name: 'Node 24', node: join(REPO, 'node_modules/node/bin/node'), major: 24 },
];
// npm's own script, run by each Node (the machine's npm 11, which supports both).
const NPM_CLI = realpathSync('/usr/bin/npm');
const ESBUILD_BINARY = `@esbuild/${process.platform}-${process.arch}`;

const dir = tempDir('svc-package-e2e-');
let stack: Stack;
let key: string;
let token: string;
let projectId: string;
let tarball: string;
let packed: { name: string; version: string; dependencies?: Record<string, string>; peerDependencies?: Record<string, string>; peerDependenciesMeta?: Record<string, { optional?: boolean }> };

/** Runs a process without blocking this one: the stack's front answers from it. */
function run(command: string, args: string[], options: { cwd: string; node: string; env?: Record<string, string> }): Promise<Run> {
  return new Promise((resolve, reject) => {
    // A clean environment: nothing of the npm run that started the tests leaks into the npm under test.
    const env = { PATH: `${dirname(options.node)}:/usr/bin:/bin`, HOME: process.env.HOME ?? dir.dir, ...options.env };
    const child = spawn(command, args, { cwd: options.cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/**
 * An application depending on the tarball and `extra` packages, with the lockfile npm would write
 * online: the tarball's entry from its own package.json, the others' from the repository's lockfile.
 */
function application(name: string, extra: string[] = []): string {
  const app = join(dir.dir, name);
  mkdirSync(app);
  const spec = `file:${tarball}`;
  const repoLock = (JSON.parse(readFileSync(join(REPO, 'package-lock.json'), 'utf8')) as { packages: Record<string, LockEntry> }).packages;
  const fromRepo = (path: string): LockEntry => {
    const { dev: _dev, ...entry } = repoLock[path]!;
    return entry;
  };
  // The fields npm records of a package in a lockfile.
  const own = Object.fromEntries(
    ['version', 'license', 'dependencies', 'peerDependencies', 'peerDependenciesMeta', 'bin', 'engines'].flatMap((f) => (f in packed ? [[f, packed[f as keyof typeof packed]]] : [])),
  );
  const packages: Record<string, LockEntry> = {
    '': { name, dependencies: { 'svc-cloud': spec, ...Object.fromEntries(extra.map((p) => [p, fromRepo(`node_modules/${p}`).version!])) } },
    'node_modules/svc-cloud': { ...own, resolved: spec, integrity: `sha512-${createHash('sha512').update(readFileSync(tarball)).digest('base64')}` },
  };
  for (const dependency of [...Object.keys(packed.dependencies ?? {}), ...extra]) {
    const path = `node_modules/${dependency}`;
    packages[path] = fromRepo(path);
    for (const optional of Object.keys((repoLock[path]!.optionalDependencies as Record<string, string> | undefined) ?? {})) {
      packages[`node_modules/${optional}`] = fromRepo(`node_modules/${optional}`);
    }
  }
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name, private: true, type: 'module', dependencies: packages['']!.dependencies }, null, 2));
  writeFileSync(join(app, 'package-lock.json'), JSON.stringify({ name, lockfileVersion: 3, requires: true, packages }, null, 2));
  return app;
}

/** `npm ci` with `node`, from the cache only; a cache that lacks a tarball is named and read through. */
async function install(app: string, node: string): Promise<Run> {
  const args = [NPM_CLI, 'ci', '--no-audit', '--no-fund', '--loglevel=warn'];
  const offline = await run(node, [...args, '--offline'], { cwd: app, node });
  if (offline.code === 0 || !offline.stderr.includes('ENOTCACHED')) return offline;
  console.warn(`package test: the npm cache lacks a package (${offline.stderr.split('\n')[0]}); installing with --prefer-offline`);
  return run(node, [...args, '--prefer-offline'], { cwd: app, node });
}

/** The packages in `app`'s node_modules, scoped ones as `@scope/name`. */
function installed(app: string): string[] {
  const root = join(app, 'node_modules');
  const names: string[] = [];
  for (const entry of readdirSync(root)) {
    if (entry.startsWith('.')) continue;
    if (entry.startsWith('@')) names.push(...readdirSync(join(root, entry)).map((n) => `${entry}/${n}`));
    else names.push(entry);
  }
  return names.sort();
}

/** Bytes on disk under `path`, a file hard-linked twice counted once (esbuild's install links its binary). */
function sizeOf(path: string): number {
  const seen = new Set<number>();
  let total = 0;
  for (const entry of readdirSync(path, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const { ino, size } = statSync(join(entry.parentPath, entry.name));
    if (!seen.has(ino)) total += size;
    seen.add(ino);
  }
  return total;
}

// The SDK as a user's script: the account routes with a session, and SQL with the project's key.
const SDK_SCRIPT = `import { createClient, SvcError } from 'svc-cloud/client';
const [baseUrl, key, tag] = process.argv.slice(2);
const anon = createClient({ baseUrl });
const { token } = await anon.signup({ name: tag });
const account = anon.withCredentials({ token });
const project = await account.projects.create({ name: tag });
const db = createClient({ baseUrl, key });
await db.batch([\`CREATE TABLE notes_\${tag} (id INTEGER PRIMARY KEY, body TEXT)\`, { sql: \`INSERT INTO notes_\${tag} (body) VALUES (?)\`, args: [tag] }]);
const rs = await db.sql(\`SELECT body FROM notes_\${tag}\`);
const error = await db.sql('SELECT * FROM nowhere').catch((e) => e);
console.log(JSON.stringify({ node: process.versions.node.split('.')[0], state: project.state, body: rs.rows[0].body, code: error instanceof SvcError ? error.code : String(error) }));
`;

// A function from TypeScript with a local import, as `svc functions deploy` takes it (cli.md).
const functionSource = (who: string) => `import { greet } from './greet.ts';
export default {
  fetch(): Response {
    const who: string = ${JSON.stringify(who)};
    return new Response(greet(who));
  },
};
`;

// The adapters as a user's script: one Drizzle and one Kysely query, each with a join.
const ORM_SCRIPT = `import { createClient } from 'svc-cloud/client';
import { drizzle } from 'svc-cloud/drizzle';
import { SvcDialect, batch } from 'svc-cloud/kysely';
import { eq } from 'drizzle-orm';
import { integer, sqliteTable, text } from 'drizzle-orm/sqlite-core';
import { Kysely } from 'kysely';
const [baseUrl, key, tag] = process.argv.slice(2);
const client = createClient({ baseUrl, key });
const k = new Kysely({ dialect: new SvcDialect({ client }) });
const [a, b] = [\`a_\${tag}\`, \`b_\${tag}\`];
await k.schema.createTable(a).addColumn('id', 'integer', (c) => c.primaryKey()).addColumn('name', 'text').execute();
await k.schema.createTable(b).addColumn('a_id', 'integer').addColumn('title', 'text').execute();
await batch(client, [k.insertInto(a).values({ id: 1, name: 'ada' }), k.insertInto(b).values({ a_id: 1, title: 'notes' })]);
const ky = await k.selectFrom(b).innerJoin(a, \`\${a}.id\`, \`\${b}.a_id\`).select(['title', 'name']).execute();
const ta = sqliteTable(a, { id: integer('id').primaryKey(), name: text('name') });
const tb = sqliteTable(b, { aId: integer('a_id'), title: text('title') });
const dz = await drizzle(client).select({ title: tb.title, name: ta.name }).from(tb).innerJoin(ta, eq(tb.aId, ta.id));
console.log(JSON.stringify({ kysely: ky, drizzle: dz }));
`;

// Types as a user's editor sees them, with no zod installed: a wrong type must be an error (were the
// route types lost, every value would be \`any\` and the expected errors would not be there).
const SDK_TYPES = `import { createClient, SvcError, type Project, type ResultSet } from 'svc-cloud/client';
const svc = createClient({ baseUrl: 'http://127.0.0.1:1', token: 't' });
const project: Project = await svc.projects.create({ name: 'n' });
const id: string = project.id;
// @ts-expect-error: a project's name is a string
const name: number = project.name;
// @ts-expect-error: the create body has no such field
await svc.projects.create({ nom: 'n' });
const rs: ResultSet = await svc.sql('SELECT 1');
export { id, name, rs, SvcError };
`;
const ORM_TYPES = `import { createClient } from 'svc-cloud/client';
import { drizzle } from 'svc-cloud/drizzle';
import { SvcDialect, batch } from 'svc-cloud/kysely';
import { Kysely } from 'kysely';
import { sqliteTable, text } from 'drizzle-orm/sqlite-core';
const svc = createClient({ baseUrl: 'http://127.0.0.1:1', key: 'k' });
const users = sqliteTable('users', { name: text('name').notNull() });
const rows: { name: string }[] = await drizzle(svc).select().from(users);
const k = new Kysely<{ users: { name: string } }>({ dialect: new SvcDialect({ client: svc }) });
const [first] = await batch(svc, [k.selectFrom('users').select('name')]);
const named: string | undefined = first.rows[0]?.name;
// @ts-expect-error: the batch keeps the query's row type
const wrong: number | undefined = first.rows[0]?.name;
export { rows, named, wrong };
`;

/** Type-checks `source` in `app` with the repository's tsc as a user's strict project would. */
async function typeCheck(app: string, source: string, skipLibCheck: boolean): Promise<Run> {
  writeFileSync(join(app, 'check.ts'), source);
  const compilerOptions = { strict: true, noEmit: true, target: 'es2022', module: 'nodenext', moduleResolution: 'nodenext', lib: ['es2022', 'dom', 'dom.iterable'], types: [], skipLibCheck };
  writeFileSync(join(app, 'tsconfig.json'), JSON.stringify({ compilerOptions, files: ['check.ts'] }));
  return run(join(REPO, 'node_modules/.bin/tsc'), ['-p', app], { cwd: app, node: NODES[1]!.node });
}

beforeAll(async () => {
  const sdk = (await import(pathToFileURL(join(REPO, 'dist/client/index.mjs')).href)) as Sdk;
  stack = await startSuiteStack(dir.dir);
  const anon = sdk.createClient({ baseUrl: stack.url });
  token = (await anon.signup({ name: 'package' })).token;
  const account = anon.withCredentials({ token });
  projectId = (await account.projects.create({ name: 'package' })).id;
  const project = account.project(projectId);
  await project.wakeup();
  key = (await project.keys.create({ label: 'package' })).key;
  // dist/ is built by `npm test` (prepack would build it again).
  const pack = await run(NODES[1]!.node, [NPM_CLI, 'pack', '--ignore-scripts', '--json', '--pack-destination', dir.dir], { cwd: REPO, node: NODES[1]!.node });
  expect(pack.code, pack.stderr).toBe(0);
  tarball = join(dir.dir, (JSON.parse(pack.stdout) as { filename: string }[])[0]!.filename);
  const extracted = join(dir.dir, 'extracted');
  mkdirSync(extracted);
  expect((await run('tar', ['-xzf', tarball, '-C', extracted, '--strip-components', '1'], { cwd: dir.dir, node: NODES[1]!.node })).code).toBe(0);
  packed = JSON.parse(readFileSync(join(extracted, 'package.json'), 'utf8'));
}, 120_000);
afterAll(async () => {
  await stack?.stop();
  dir.cleanup();
});

describe('the npm package', () => {
  it('ships the SDK, its adapters, the CLI and declarations, depending on esbuild alone', async () => {
    expect(packed.dependencies).toEqual({ esbuild: expect.any(String) });
    expect(Object.keys(packed.peerDependencies ?? {}).sort()).toEqual(['drizzle-orm', 'kysely', 'workerd']);
    for (const peer of Object.keys(packed.peerDependencies!)) expect(packed.peerDependenciesMeta?.[peer]).toEqual({ optional: true });
    // What each bundle imports: the SDK nothing, an adapter its ORM, the CLI Node's modules and esbuild.
    const imports = (file: string) => {
      const code = readFileSync(join(dir.dir, 'extracted/dist/client', file), 'utf8');
      const { module } = parseSync(file, code);
      const specifiers = [...module.staticImports.map((i) => i.moduleRequest.value), ...module.dynamicImports.map((i) => code.slice(i.moduleRequest.start, i.moduleRequest.end))];
      return [...new Set(specifiers.map((s) => s.replace(/^(['"`])(.*)\1$/, '$2')))].filter((s) => !s.startsWith('node:')).sort();
    };
    expect(imports('index.mjs')).toEqual([]);
    expect(imports('drizzle.mjs')).toEqual(['drizzle-orm/sqlite-proxy']);
    expect(imports('kysely.mjs')).toEqual(['kysely']);
    expect(imports('svc.mjs')).toEqual(['esbuild']);
  });

  for (const { name, node, major } of NODES) {
    it(`installs with ${name}'s npm offline: svc-cloud, esbuild and its binary, nothing else; svc, a function from TypeScript and the SDK run`, async () => {
      const version = await run(node, ['--version'], { cwd: dir.dir, node });
      expect(version.stdout, `${node} is not Node ${major}`).toMatch(new RegExp(`^v${major}\\.`));
      const app = application(`app-${major}`);
      const npm = await install(app, node);
      expect(npm.code, npm.stderr).toBe(0);
      expect(npm.stderr + npm.stdout).not.toContain('EBADENGINE');
      expect(installed(app)).toEqual([ESBUILD_BINARY, 'esbuild', 'svc-cloud']);
      console.log(`package test: ${name}: ${installed(app).length} packages, ${(sizeOf(join(app, 'node_modules')) / 1e6).toFixed(1)} MB (${ESBUILD_BINARY} ${(sizeOf(join(app, 'node_modules', ESBUILD_BINARY)) / 1e6).toFixed(1)} MB)`);
      // The CLI finds the esbuild it was installed with.
      expect(createRequire(join(app, 'node_modules/svc-cloud/dist/client/svc.mjs')).resolve('esbuild')).toBe(join(app, 'node_modules/esbuild/lib/main.js'));

      const svc = join(app, 'node_modules/.bin/svc');
      const help = await run(svc, ['--help'], { cwd: app, node });
      expect([help.code, help.stderr]).toEqual([0, '']);
      expect(help.stdout).toMatch(/^Usage: svc /);
      const health = await run(svc, ['health', '--json'], { cwd: app, node, env: { SVC_BASE_URL: stack.url, SVC_CONFIG_DIR: join(app, 'cfg') } });
      expect([health.code, health.stderr]).toEqual([0, '']);
      expect(JSON.parse(health.stdout)).toMatchObject({ status: 'ok' });

      // The CLI bundles a TypeScript function with the esbuild installed beside it; `functions dev`
      // names the optional peer it needs (workerd) rather than failing to load it.
      mkdirSync(join(app, 'src'));
      writeFileSync(join(app, 'src/index.ts'), functionSource(name));
      writeFileSync(join(app, 'src/greet.ts'), "export const greet = (who: string): string => `hello from ${who}`;\n");
      const session = { SVC_BASE_URL: stack.url, SVC_TOKEN: token, SVC_CONFIG_DIR: join(app, 'cfg') };
      const deployed = await run(svc, ['functions', 'deploy', projectId, `node${major}`, 'src/index.ts', '--json'], { cwd: app, node, env: session });
      expect(deployed.code, deployed.stderr).toBe(0);
      expect(deployed.stderr).toMatch(/bundled src\/index\.ts and 1 more file with esbuild/);
      const invoked = await run(svc, ['functions', 'invoke', projectId, `node${major}`], { cwd: app, node, env: session });
      expect([invoked.code, invoked.stdout]).toEqual([0, `hello from Node ${major}`]);
      const dev = await run(svc, ['functions', 'dev', `node${major}`, 'src/index.ts', '--port', '0'], { cwd: app, node, env: session });
      expect([dev.code, dev.stderr]).toEqual([1, expect.stringContaining('npm install --save-dev workerd')]);

      writeFileSync(join(app, 'main.mjs'), SDK_SCRIPT);
      const script = await run(node, ['main.mjs', stack.url, key, `npm${major}`], { cwd: app, node });
      expect([script.code, script.stderr]).toEqual([0, '']);
      expect(JSON.parse(script.stdout)).toEqual({ node: String(major), state: 'stopped', body: `npm${major}`, code: 'sql_error' });
    }, 60_000);
  }

  it('runs and type-checks the SDK from a node_modules holding svc-cloud alone, with Node 20 and 24: it needs no dependency', async () => {
    const app = join(dir.dir, 'sdk-alone');
    mkdirSync(join(app, 'node_modules'), { recursive: true });
    symlinkSync(join(dir.dir, 'extracted'), join(app, 'node_modules/svc-cloud'));
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'sdk-alone', private: true, type: 'module' }));
    writeFileSync(join(app, 'main.mjs'), SDK_SCRIPT);
    expect(installed(app)).toEqual(['svc-cloud']);
    for (const { node, major } of NODES) {
      const script = await run(node, ['main.mjs', stack.url, key, `alone${major}`], { cwd: app, node });
      expect([script.code, script.stderr]).toEqual([0, '']);
      expect(JSON.parse(script.stdout)).toEqual({ node: String(major), state: 'stopped', body: `alone${major}`, code: 'sql_error' });
    }
    // Every declaration is checked (skipLibCheck off): the SDK's, and zod's that they carry.
    const tsc = await typeCheck(app, SDK_TYPES, false);
    expect([tsc.code, tsc.stdout + tsc.stderr]).toEqual([0, '']);
  }, 60_000);

  it('installs beside drizzle-orm and kysely, whose adapters run with Node 20 and 24 and whose types need no zod', async () => {
    const [node20, node24] = NODES;
    const app = application('app-orm', ['drizzle-orm', 'kysely']);
    const npm = await install(app, node20!.node);
    expect(npm.code, npm.stderr).toBe(0);
    expect(npm.stderr + npm.stdout).not.toMatch(/EBADENGINE|ERESOLVE|peer/i);
    expect(installed(app)).toEqual([ESBUILD_BINARY, 'drizzle-orm', 'esbuild', 'kysely', 'svc-cloud'].sort());

    writeFileSync(join(app, 'orm.mjs'), ORM_SCRIPT);
    for (const { node, major } of [node20!, node24!]) {
      const script = await run(node, ['orm.mjs', stack.url, key, `orm${major}`], { cwd: app, node });
      expect([script.code, script.stderr]).toEqual([0, '']);
      expect(JSON.parse(script.stdout)).toEqual({ kysely: [{ title: 'notes', name: 'ada' }], drizzle: [{ title: 'notes', name: 'ada' }] });
    }

    // drizzle-orm's own declarations do not pass a check of every library file (without its other
    // drivers' types and @types/node), so this one skips them; the SDK's are checked whole above.
    const tsc = await typeCheck(app, ORM_TYPES, true);
    expect([tsc.code, tsc.stdout + tsc.stderr]).toEqual([0, '']);
  }, 90_000);
});
