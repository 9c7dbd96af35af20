/** backup, verify and restore (docs/engine.md "CLI"): verified copies, lineage carried, corruption refused. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdir, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { cleanup, cli, initDataDir, sha256File, sql, startEngine, stopEngine, tempDir } from '../test/helpers/engine.ts';

afterAll(cleanup);

/** A stopped data directory holding a few rows and an FTS5 table, with its status. */
let source: { dataDir: string; status: any };
let intact: { out: string; json: any };

beforeAll(async () => {
  const { dataDir } = await initDataDir();
  const engine = await startEngine(dataDir);
  await sql(engine, {
    statements: [
      { sql: 'CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)' },
      { sql: 'CREATE VIRTUAL TABLE notes_fts USING fts5 (body)' },
    ],
  });
  for (const body of ['first note', 'second note about foxes', 'third']) {
    await sql(engine, {
      statements: [
        { sql: 'INSERT INTO notes (body) VALUES (?)', params: [body] },
        { sql: 'INSERT INTO notes_fts (rowid, body) VALUES (last_insert_rowid(), ?)', params: [body] },
      ],
    });
  }
  await stopEngine(engine);
  const status = await cli(['status', '--data-dir', dataDir, '--json']);
  source = { dataDir, status: status.json };
  // One intact backup serves every test that only reads it (restore never writes into B).
  intact = await backupOf(dataDir);
});

async function backupOf(dataDir: string): Promise<{ out: string; json: any }> {
  const out = join(await tempDir(), 'snap');
  const r = await cli(['backup', '--data-dir', dataDir, '--out', out, '--json']);
  expect(r.code).toBe(0);
  return { out, json: r.json };
}

async function flipByteInMiddle(path: string): Promise<void> {
  const bytes = await readFile(path);
  const at = Math.floor(bytes.length / 2);
  bytes[at] = (bytes[at] as number) ^ 0xff;
  await writeFile(path, bytes);
}

describe('backup', () => {
  it('creates a verified copy whose checkpoint digest is the status root digest', async () => {
    const { out, json } = intact;
    const files = ['data.sqlite', 'meta.json'];
    const sizes = await Promise.all(files.map(async (f) => (await stat(join(out, f))).size));
    expect(json).toEqual({
      backup_path: out,
      checkpoint_digest: source.status.root_digest,
      file_count: 2,
      total_bytes: sizes[0]! + sizes[1]!,
      status: 'verified',
      visible_csn: source.status.visible_csn,
      directory_lineage: source.status.directory_lineage,
    });
    expect(await sha256File(join(out, 'data.sqlite'))).toBe(json.checkpoint_digest);
    expect((await readdir(out)).sort()).toEqual(['data.sqlite', 'manifest.json', 'meta.json']);
    const manifest = JSON.parse(await readFile(join(out, 'manifest.json'), 'utf8'));
    expect(manifest.files).toEqual(files.map((f, i) => ({ path: f, size: sizes[i], sha256: expect.stringMatching(/^[0-9a-f]{64}$/) })));
  });

  it('leaves the data directory as it was', async () => {
    const after = await cli(['status', '--data-dir', source.dataDir, '--json']);
    expect(after.json).toEqual(source.status);
  });

  it('refuses an --out that exists and is not empty with exit 6', async () => {
    const out = await tempDir();
    await writeFile(join(out, 'other'), 'x');
    const r = await cli(['backup', '--data-dir', source.dataDir, '--out', out, '--json']);
    expect(r.code).toBe(6);
    expect(r.json.error.code).toBe('target_exists');
    expect(await readdir(out)).toEqual(['other']);
  });

  it('refuses an uninitialized data directory with exit 4', async () => {
    const r = await cli(['backup', '--data-dir', await tempDir(), '--out', join(await tempDir(), 'b'), '--json']);
    expect(r.code).toBe(4);
  });
});

describe('verify', () => {
  it('accepts an intact backup', async () => {
    const { out, json } = intact;
    const r = await cli(['verify', '--backup', out, '--json']);
    expect(r.code).toBe(0);
    expect(r.json).toMatchObject({ status: 'verified', checkpoint_digest: json.checkpoint_digest, directory_lineage: json.directory_lineage });
  });

  it('refuses a missing backup with exit 5', async () => {
    const r = await cli(['verify', '--backup', join(await tempDir(), 'none'), '--json']);
    expect(r.code).toBe(5);
    expect(r.json.error.code).toBe('corrupt_backup');
  });

  it('refuses a backup without its manifest with exit 5', async () => {
    const { out } = await backupOf(source.dataDir);
    await writeFile(join(out, 'manifest.json'), '{"format":"something else"}');
    expect((await cli(['verify', '--backup', out, '--json'])).code).toBe(5);
  });
});

describe('restore', () => {
  it('round-trips: same data, same lineage, same figures, same digest', async () => {
    const { out, json: backup } = intact;
    const target = join(await tempDir(), 'restored');
    const r = await cli(['restore', '--backup', out, '--target', target, '--json']);
    expect(r.code).toBe(0);
    expect(r.json).toEqual({
      status: 'restored',
      target,
      backup_path: out,
      checkpoint_digest: backup.checkpoint_digest,
      visible_csn: source.status.visible_csn,
      directory_lineage: source.status.directory_lineage,
    });
    expect((await readdir(dirname(target))).filter((n) => n.includes('staging'))).toEqual([]);

    const status = await cli(['status', '--data-dir', target, '--json']);
    expect(status.json).toEqual(source.status);

    const engine = await startEngine(target);
    const rows = await sql(engine, { sql: 'SELECT body FROM notes ORDER BY id' });
    expect(rows.results[0].rows).toEqual([['first note'], ['second note about foxes'], ['third']]);
    const hits = await sql(engine, { sql: "SELECT rowid FROM notes_fts WHERE notes_fts MATCH 'foxes'" });
    expect(hits.results[0].rows).toEqual([[2]]);
    // New writes continue the lineage's count.
    const w = await sql(engine, { sql: "INSERT INTO notes (body) VALUES ('after restore')" });
    expect(w.visible_csn).toBe(source.status.visible_csn + 1);
    await stopEngine(engine);
  });

  it('restores into an existing empty directory', async () => {
    const { out } = intact;
    const target = await tempDir();
    const r = await cli(['restore', '--backup', out, '--target', target, '--json']);
    expect(r.code).toBe(0);
    expect((await readdir(target)).sort()).toEqual(['data.sqlite', 'lock', 'meta.json']);
  });

  it('refuses a non-empty target with exit 6 and leaves it untouched', async () => {
    const { out } = intact;
    const target = await tempDir();
    await writeFile(join(target, 'precious'), 'do not touch');
    const r = await cli(['restore', '--backup', out, '--target', target, '--json']);
    expect(r.code).toBe(6);
    expect(r.json.error.code).toBe('target_exists');
    expect(await readdir(target)).toEqual(['precious']);
    expect(await readFile(join(target, 'precious'), 'utf8')).toBe('do not touch');
  });

  it('refuses a target a live serve holds with exit 3', async () => {
    const { out } = intact;
    const { dataDir } = await initDataDir();
    const engine = await startEngine(dataDir);
    const r = await cli(['restore', '--backup', out, '--target', dataDir, '--json']);
    expect(r.code).toBe(3);
    expect(r.json.error.code).toBe('lock_held');
    await stopEngine(engine);
  });
});

describe('a corrupted backup', () => {
  let out: string;
  beforeAll(async () => {
    ({ out } = await backupOf(source.dataDir));
    await flipByteInMiddle(join(out, 'data.sqlite'));
  });

  it('fails verify with exit 5', async () => {
    const r = await cli(['verify', '--backup', out, '--json']);
    expect(r.code).toBe(5);
    expect(r.json).toEqual({ error: { code: 'corrupt_backup', message: expect.stringMatching(/data\.sqlite/) } });
  });

  it('is refused by restore with exit 5, the target and its parent untouched', async () => {
    const parent = await tempDir();
    const target = join(parent, 'restored');
    const r = await cli(['restore', '--backup', out, '--target', target, '--json']);
    expect(r.code).toBe(5);
    expect(r.json.error.code).toBe('corrupt_backup');
    expect(await readdir(parent)).toEqual([]);
  });

  it('leaves an existing empty target empty', async () => {
    const target = await tempDir();
    expect((await cli(['restore', '--backup', out, '--target', target, '--json'])).code).toBe(5);
    expect(await readdir(target)).toEqual([]);
  });

  it('is caught by the integrity check even when the manifest was rewritten to match', async () => {
    const { out: other } = await backupOf(source.dataDir);
    const db = join(other, 'data.sqlite');
    // Damage a b-tree page header (page 2 starts at 4096), then make the digests agree with the damage.
    const bytes = await readFile(db);
    bytes.fill(0xee, 4096, 4096 + 16);
    await writeFile(db, bytes);
    const manifestPath = join(other, 'manifest.json');
    const manifest = JSON.parse(await readFile(manifestPath, 'utf8'));
    const digest = await sha256File(db);
    manifest.files[0].sha256 = digest;
    manifest.checkpoint_digest = digest;
    await writeFile(manifestPath, JSON.stringify(manifest));
    const r = await cli(['verify', '--backup', other, '--json']);
    expect(r.code).toBe(5);
    expect(r.json.error.message).toMatch(/integrity|cannot be read|malformed/i);
  });
});

describe('restore target layout', () => {
  it('creates missing parent directories of the target', async () => {
    const { out } = intact;
    const target = join(await tempDir(), 'a', 'b', 'data');
    await mkdir(dirname(dirname(target)), { recursive: true });
    expect((await cli(['restore', '--backup', out, '--target', target, '--json'])).code).toBe(0);
  });
});
