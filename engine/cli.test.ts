/** The engine CLI contract (docs/engine.md "CLI", "Exit codes"): one JSON document per command, exit code per class. */
import { afterAll, describe, expect, it } from 'vitest';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ServeRefused, cleanup, cli, initDataDir, sha256File, startEngine, tempDir } from '../test/helpers/engine.ts';

afterAll(cleanup);

describe('version', () => {
  it('prints the pinned version document and exits 0', async () => {
    const r = await cli(['version', '--json']);
    expect(r.code).toBe(0);
    expect(r.json).toEqual({
      engine_version: '3.0.0',
      protocol_minor: 3,
      product: 'svc-engine',
      storage: 'sqlite',
      node: expect.stringMatching(/^v24\./),
    });
  });
});

describe('init', () => {
  it('creates the directory with a lineage id, a meta file and an empty database', async () => {
    const dataDir = join(await tempDir(), 'nested', 'data');
    const r = await cli(['init', '--data-dir', dataDir, '--json']);
    expect(r.code).toBe(0);
    expect(r.json).toEqual({
      status: 'initialized',
      data_dir: dataDir,
      directory_lineage: expect.stringMatching(/^lin_[0-9a-f]{32}$/),
      visible_csn: 0,
      catalog_version: 0,
    });
    expect((await readdir(dataDir)).sort()).toEqual(['data.sqlite', 'meta.json']);
    const meta = JSON.parse(await readFile(join(dataDir, 'meta.json'), 'utf8'));
    expect(meta.directory_lineage).toBe(r.json.directory_lineage);
  });

  it('gives every directory its own lineage', async () => {
    const a = await initDataDir();
    const b = await initDataDir();
    expect(a.init.json.directory_lineage).not.toBe(b.init.json.directory_lineage);
  });

  it('accepts an existing empty directory', async () => {
    const dataDir = join(await tempDir(), 'empty');
    await mkdir(dataDir);
    const r = await cli(['init', '--data-dir', dataDir, '--json']);
    expect(r.code).toBe(0);
    expect(r.json.status).toBe('initialized');
  });

  it('refuses a non-empty directory with exit 6 and leaves it untouched', async () => {
    const dataDir = await tempDir();
    await writeFile(join(dataDir, 'keep.txt'), 'mine');
    const r = await cli(['init', '--data-dir', dataDir, '--json']);
    expect(r.code).toBe(6);
    expect(r.json.error.code).toBe('target_exists');
    expect(await readdir(dataDir)).toEqual(['keep.txt']);
  });

  it('refuses to initialize twice', async () => {
    const { dataDir } = await initDataDir();
    const r = await cli(['init', '--data-dir', dataDir, '--json']);
    expect(r.code).toBe(6);
  });
});

describe('status', () => {
  it('reports zero figures and the digest of the database file for a fresh directory', async () => {
    const { dataDir, init } = await initDataDir();
    const r = await cli(['status', '--data-dir', dataDir, '--json']);
    expect(r.code).toBe(0);
    expect(r.json).toEqual({
      visible_csn: 0,
      root_digest: await sha256File(join(dataDir, 'data.sqlite')),
      directory_lineage: init.json.directory_lineage,
      catalog_version: 0,
      logical_time_micros: 0,
    });
  });

  it('is stable: reading the status changes neither the figures nor the file', async () => {
    const { dataDir } = await initDataDir();
    const first = await cli(['status', '--data-dir', dataDir, '--json']);
    const second = await cli(['status', '--data-dir', dataDir, '--json']);
    expect(second.json).toEqual(first.json);
    expect((await readdir(dataDir)).filter((f) => f.includes('-wal') || f.includes('holder'))).toEqual([]);
  });

  it('answers exit 4 not_initialized for a missing directory', async () => {
    const r = await cli(['status', '--data-dir', join(await tempDir(), 'absent'), '--json']);
    expect(r.code).toBe(4);
    expect(r.json).toEqual({ error: { code: 'not_initialized', message: expect.any(String) } });
  });

  it('answers exit 4 for a directory init never touched, and creates nothing in it', async () => {
    const dir = await tempDir();
    const r = await cli(['status', '--data-dir', dir, '--json']);
    expect(r.code).toBe(4);
    expect(await readdir(dir)).toEqual([]);
  });
});

// Independent one-shot processes: run them side by side.
describe.concurrent('arguments', () => {
  it.each([
    [['frobnicate'], 'unknown command'],
    [[], 'no command'],
    [['status', '--json'], 'missing --data-dir'],
    [['status', '--data-dir'], 'option without value'],
    [['status', '--data-dir', '/tmp/x', '--bogus'], 'unknown option'],
    [['status', '--data-dir', '/tmp/x', 'extra'], 'stray positional'],
    [['backup', '--data-dir', '/tmp/x', '--json'], 'missing --out'],
    [['restore', '--backup', '/tmp/x', '--json'], 'missing --target'],
    [['serve', '--data-dir', '/tmp/x', '--listen', '0.0.0.0:0'], 'non-loopback listener'],
    [['serve', '--data-dir', '/tmp/x', '--listen', '127.0.0.1'], 'listener without port'],
    [['serve', '--data-dir', '/tmp/x', '--listen', '127.0.0.1:0', '--max-body-bytes', '0'], 'zero body limit'],
  ])('exits 2 bad_arguments for %j (%s)', async (args) => {
    const r = await cli(args as string[]);
    expect(r.code).toBe(2);
    expect(r.json).toEqual({ error: { code: 'bad_arguments', message: expect.any(String) } });
  });

  it('accepts --option=value as well as --option value', async () => {
    const { dataDir } = await initDataDir();
    const r = await cli(['status', `--data-dir=${dataDir}`, '--json']);
    expect(r.code).toBe(0);
  });
});

describe('serve start-up failures', () => {
  it('exits 4 on a directory that was never initialized', async () => {
    const err = await startEngine(join(await tempDir(), 'absent')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ServeRefused);
    expect((err as ServeRefused).code).toBe(4);
    expect((err as ServeRefused).json.error.code).toBe('not_initialized');
  });
});
