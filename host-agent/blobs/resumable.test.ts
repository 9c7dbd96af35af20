// The fs files of resumable uploads (docs/storage.md "Resumable uploads"): appends at the recorded
// offset, what a failed append leaves, completion into the blob, again after a crash, one at a time.
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { blobName } from '../../shared/blobs/names.ts';
import { tempDir } from '../../test/helpers/env.ts';
import { createFsBlobStore, type FsBlobStore } from './fs-store.ts';
import { resumableFilesOf, type ResumableFiles } from './resumable.ts';

const PRJ = 'prj_0123456789abcdef';
const UPL = 'upl_0123456789abcdef';
const bytes = (n: number, seed: number) => Uint8Array.from({ length: n }, (_, i) => (i * 7 + seed) & 0xff);
const sha = (...parts: Uint8Array[]) => parts.reduce((h, p) => h.update(p), createHash('sha256')).digest('hex');
const streamOf = (...chunks: Uint8Array[]) =>
  new ReadableStream<Uint8Array>({
    start(c) {
      for (const chunk of chunks) c.enqueue(chunk.slice());
      c.close();
    },
  });
/** A body that sends `chunk` and then fails, as a request cut off does. */
const cutOff = (chunk: Uint8Array) =>
  new ReadableStream<Uint8Array>({
    start(c) {
      c.enqueue(chunk.slice());
      c.error(new Error('cut off'));
    },
  });

let tmp: ReturnType<typeof tempDir>;
let store: FsBlobStore;
let files: ResumableFiles;
let name: string;
beforeEach(async () => {
  tmp = tempDir('svc-resumable-files-');
  store = createFsBlobStore(tmp.dir);
  files = resumableFilesOf(store);
  name = await blobName(PRJ, 'b', 'k', 'w1');
});
afterEach(() => tmp.cleanup());

describe('resumable upload files', () => {
  it('append at offsets, then finish into the blob with the SHA-256 of every byte', async () => {
    const a = bytes(3 * 1024 * 1024 + 5, 1);
    const b = bytes(1000, 2);
    expect(await files.append(PRJ, UPL, 0, a.byteLength, streamOf(a))).toBe(a.byteLength);
    expect(await files.append(PRJ, UPL, a.byteLength, b.byteLength, streamOf(b.subarray(0, 10), b.subarray(10)))).toBe(a.byteLength + b.byteLength);
    expect(await files.list()).toEqual([[PRJ, UPL]]);
    const written = await files.finish(PRJ, UPL, name, a.byteLength + b.byteLength);
    expect(written).toEqual({ size: a.byteLength + b.byteLength, etag: sha(a, b) });
    expect(readFileSync(store.pathOf(PRJ, name))).toEqual(Buffer.concat([a, b]));
    expect(await files.list()).toEqual([]);
    // Finished again (a crash came before the catalog flip): the blob answers the same.
    expect(await files.finish(PRJ, UPL, name, a.byteLength + b.byteLength)).toEqual(written);
  });

  it('an append cut off keeps nothing of itself, and the next one from the same offset goes on', async () => {
    const a = bytes(2048, 3);
    const b = bytes(4096, 4);
    await files.append(PRJ, UPL, 0, a.byteLength, streamOf(a));
    await expect(files.append(PRJ, UPL, a.byteLength, b.byteLength, cutOff(b.subarray(0, 100)))).rejects.toThrow();
    await expect(files.append(PRJ, UPL, a.byteLength, b.byteLength, streamOf(b.subarray(0, 100)))).rejects.toThrow(/shorter than its declared length/);
    expect(statSync(`${tmp.dir}/.uploads/${PRJ}/${UPL}`).size).toBe(a.byteLength);
    await files.append(PRJ, UPL, a.byteLength, b.byteLength, streamOf(b));
    // After a restart the running hash is gone: completion reads the file again.
    const fresh = resumableFilesOf(createFsBlobStore(tmp.dir));
    expect(await fresh.finish(PRJ, UPL, name, a.byteLength + b.byteLength)).toEqual({ size: 6144, etag: sha(a, b) });
  });

  it('bytes a died PATCH left past the offset are cut back; more bytes than declared are refused', async () => {
    const a = bytes(100, 5);
    await files.append(PRJ, UPL, 0, 100, streamOf(a));
    await files.append(PRJ, UPL, 100, 50, streamOf(bytes(50, 6)));
    // The handlers never recorded offset 150 (they died): the next PATCH comes from 100 again.
    const c = bytes(30, 7);
    await files.append(PRJ, UPL, 100, 30, streamOf(c));
    await expect(files.append(PRJ, UPL, 130, 5, streamOf(bytes(6, 8)))).rejects.toThrow(/longer than its declared length/);
    expect(await files.finish(PRJ, UPL, name, 130)).toEqual({ size: 130, etag: sha(a, c) });
  });

  it('one append at a time per upload (409); a 0-byte upload finishes into an empty blob; remove forgets', async () => {
    let release!: () => void;
    const slow = new ReadableStream<Uint8Array>({ start: (c) => void (release = () => (c.enqueue(bytes(10, 1)), c.close())) });
    const first = files.append(PRJ, UPL, 0, 10, slow);
    await expect(files.append(PRJ, UPL, 0, 10, streamOf(bytes(10, 1)))).rejects.toMatchObject({ code: 'conflict' });
    release();
    expect(await first).toBe(10);
    expect(await files.remove(PRJ, UPL)).toBe(true);
    expect(await files.remove(PRJ, UPL)).toBe(false);
    const empty = await blobName(PRJ, 'b', 'e', 'w2');
    expect(await files.finish(PRJ, 'upl_00000000000000ff', empty, 0)).toEqual({ size: 0, etag: sha() });
    expect(existsSync(store.pathOf(PRJ, empty))).toBe(true);
    await expect(files.append(PRJ, '../x', 0, 1, streamOf(bytes(1, 1)))).rejects.toMatchObject({ code: 'invalid_request' });
  });
});
