/**
 * Archives of a backup directory (./archive.ts, ./import.ts; docs/lifecycle.md "Export and import"):
 * the length said before the first byte is the length sent, the system's tar reads what we write,
 * an archive unpacks to the same bytes, and whatever an exported archive cannot hold is refused.
 */
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { Header } from 'tar';
import { afterAll, describe, expect, it } from 'vitest';
import { archiveLength, archiveStream, localFiles } from './archive.ts';
import { unpackArchive } from './import.ts';
import { checkDir } from './manifest.ts';

const dirs: string[] = [];
const temp = (prefix: string) => {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(dir);
  return dir;
};
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

/** A backup directory as the engine writes it (docs/engine.md "Directory layout"), of `size` database bytes. */
export function fakeBackup(size: number): string {
  const dir = temp('svc-backup-');
  const data = randomBytes(size);
  const meta = Buffer.from(JSON.stringify({ format: 'svc-engine-data/1', directory_lineage: 'lin_0' }));
  writeFileSync(join(dir, 'data.sqlite'), data);
  writeFileSync(join(dir, 'meta.json'), meta);
  const file = (path: string, bytes: Buffer) => ({ path, size: bytes.length, sha256: createHash('sha256').update(bytes).digest('hex') });
  const manifest = { format: 'svc-engine-backup/1', engine_version: '3.0.0', created_at: new Date().toISOString(), directory_lineage: 'lin_0', visible_csn: 1, catalog_version: 1, logical_time_micros: 5, checkpoint_digest: 'c', files: [file('data.sqlite', data), file('meta.json', meta)] };
  writeFileSync(join(dir, 'manifest.json'), JSON.stringify(manifest));
  return dir;
}

async function bytesOf(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

/** A tar of the given entries, written with node-tar's headers. */
function tarOf(entries: { path: string; type?: string; body?: Buffer; linkpath?: string }[]): Buffer {
  const parts: Buffer[] = [];
  for (const e of entries) {
    const body = e.body ?? Buffer.alloc(0);
    const block = Buffer.alloc(512);
    new Header({ path: e.path, mode: 0o600, size: e.type && e.type !== 'File' ? 0 : body.length, mtime: new Date(), type: e.type ?? 'File', linkpath: e.linkpath ?? '' } as never).encode(block, 0);
    parts.push(block);
    if (!e.type || e.type === 'File') parts.push(body, Buffer.alloc((512 - (body.length % 512)) % 512));
  }
  parts.push(Buffer.alloc(1024));
  return Buffer.concat(parts);
}

describe('archives', () => {
  it('say their length first, read back with the system tar, and unpack to the same bytes', async () => {
    for (const size of [0, 1, 511, 512, 70_000]) {
      const source = fakeBackup(size);
      const files = await localFiles(source);
      const length = archiveLength(files);
      const archive = await bytesOf(archiveStream('snap_0000000000000001', files, new Date()));
      expect(archive.length).toBe(length);
      const tarFile = join(temp('svc-tar-'), 'a.tar');
      writeFileSync(tarFile, archive);
      expect(execFileSync('tar', ['-tf', tarFile], { encoding: 'utf8' }).trim().split('\n')).toEqual([
        'snap_0000000000000001/manifest.json',
        'snap_0000000000000001/meta.json',
        'snap_0000000000000001/data.sqlite',
      ]);
      const into = join(temp('svc-unpack-'), 'in');
      expect(await unpackArchive(Readable.from([archive]), into, 1e9)).toBe(length);
      await checkDir(into, 'unpacked');
      expect(readFileSync(join(into, 'data.sqlite')).equals(readFileSync(join(source, 'data.sqlite')))).toBe(true);
    }
  });

  it('takes the files at the top, or one directory with its own entry first', async () => {
    const source = fakeBackup(100);
    const body = (name: string) => readFileSync(join(source, name));
    const names = ['manifest.json', 'meta.json', 'data.sqlite'];
    const flat = tarOf(names.map((n) => ({ path: n, body: body(n) })));
    await unpackArchive(Readable.from([flat]), join(temp('svc-unpack-'), 'in'), 1e9);
    const withDir = tarOf([{ path: 'x/', type: 'Directory' }, ...names.map((n) => ({ path: `x/${n}`, body: body(n) }))]);
    const into = join(temp('svc-unpack-'), 'in');
    await unpackArchive(Readable.from([withDir]), into, 1e9);
    expect(readdirSync(into).sort()).toEqual(['data.sqlite', 'manifest.json', 'meta.json']);
  });

  it('refuses what an exported archive cannot hold: 400, or 413 past the limit', async () => {
    const source = fakeBackup(100);
    const body = (name: string) => readFileSync(join(source, name));
    const good = ['manifest.json', 'meta.json', 'data.sqlite'].map((n) => ({ path: `s/${n}`, body: body(n) }));
    const cases: [string, Buffer][] = [
      ['dot-dot', tarOf([...good, { path: 's/../evil', body: Buffer.from('x') }])],
      ['absolute', tarOf([{ path: '/etc/passwd', body: Buffer.from('x') }, ...good])],
      ['symlink', tarOf([{ path: 's/data.sqlite', type: 'SymbolicLink', linkpath: '/etc/passwd' }, ...good.slice(0, 2)])],
      ['hard link', tarOf([{ path: 's/data.sqlite', type: 'Link', linkpath: 's/meta.json' }, ...good.slice(0, 2)])],
      ['unknown file', tarOf([...good, { path: 's/other', body: Buffer.from('x') }])],
      ['twice', tarOf([...good, good[0]!])],
      ['two directories', tarOf([...good.slice(0, 2), { path: 't/data.sqlite', body: body('data.sqlite') }])],
      ['missing', tarOf(good.slice(0, 2))],
      ['not a tar', Buffer.from('hello, this is not a tar archive at all'.repeat(40))],
      ['truncated', tarOf(good).subarray(0, 1200)],
      ['empty', Buffer.alloc(0)],
    ];
    for (const [what, archive] of cases) {
      const into = join(temp('svc-unpack-'), 'in');
      await expect(unpackArchive(Readable.from([archive]), into, 1e9), what).rejects.toMatchObject({ code: 'invalid_request' });
      expect(readdirSync(into).filter((n) => !['manifest.json', 'meta.json', 'data.sqlite'].includes(n)), what).toEqual([]);
    }
    await expect(unpackArchive(Readable.from([tarOf(good)]), join(temp('svc-unpack-'), 'in'), 1000)).rejects.toMatchObject({ code: 'payload_too_large' });
  });
});
