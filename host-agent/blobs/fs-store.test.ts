import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { blobName } from '../../shared/blobs/names.ts';
import { ServiceError } from '../../shared/errors.ts';
import { tempDir } from '../../test/helpers/env.ts';
import { createFsBlobStore, RangeNotSatisfiableError, sweepBlobTempFiles, type FsBlobStore } from './fs-store.ts';

const PRJ = 'prj_0123456789abcdef';

function streamOf(...chunks: Uint8Array[]): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(c) {
      for (const chunk of chunks) c.enqueue(chunk);
      c.close();
    },
  });
}

async function text(body: ReadableStream<Uint8Array>): Promise<string> {
  return new Response(body).text();
}

let tmp: { dir: string; cleanup: () => void };
let store: FsBlobStore;
let name: string;
beforeEach(async () => {
  tmp = tempDir('svc-fs-blobs-');
  store = createFsBlobStore(join(tmp.dir, 'blobs'));
  name = await blobName(PRJ, 'bucket', 'some/key', 'w1');
});
afterEach(() => tmp.cleanup());

const bytes = (s: string) => new TextEncoder().encode(s);

describe('fs blob store', () => {
  it('writes a blob under a hashed path and answers its size and SHA-256 etag', async () => {
    const written = await store.put(PRJ, name, streamOf(bytes('hello '), bytes('world')), { maxBytes: 100, length: null });
    expect(written).toEqual({ size: 11, etag: createHash('sha256').update('hello world').digest('hex') });
    expect(store.pathOf(PRJ, name)).toBe(join(tmp.dir, 'blobs', PRJ, name.slice(0, 2), name));
    expect(existsSync(store.pathOf(PRJ, name))).toBe(true);
    expect(readdirSync(join(tmp.dir, 'blobs', '.tmp'))).toEqual([]);
  });

  it('names are hashes of (project, bucket, key, write id): another write id is another blob', async () => {
    expect(name).toMatch(/^[0-9a-f]{64}$/);
    expect(await blobName(PRJ, 'bucket', 'some/key', 'w2')).not.toBe(name);
    expect(await blobName(PRJ, 'bucket', '../../x', 'w1')).toMatch(/^[0-9a-f]{64}$/);
  });

  it('reads a blob whole and by range', async () => {
    await store.put(PRJ, name, streamOf(bytes('0123456789')), { maxBytes: 100, length: 10 });
    const whole = await store.open(PRJ, name);
    expect(whole).toMatchObject({ length: 10, size: 10 });
    expect(await text(whole!.body)).toBe('0123456789');
    const part = await store.open(PRJ, name, () => ({ start: 2, end: 4 }));
    expect(part).toMatchObject({ length: 3, size: 10 });
    expect(await text(part!.body)).toBe('234');
    await expect(store.open(PRJ, name, () => null)).rejects.toBeInstanceOf(RangeNotSatisfiableError);
  });

  it('answers null for an absent blob, and delete says whether it existed', async () => {
    expect(await store.open(PRJ, name)).toBeNull();
    expect(await store.delete(PRJ, name)).toBe(false);
    await store.put(PRJ, name, streamOf(bytes('x')), { maxBytes: 10, length: null });
    expect(await store.delete(PRJ, name)).toBe(true);
    expect(await store.open(PRJ, name)).toBeNull();
  });

  it('refuses a body over the limit with 413 and leaves nothing, not even a temp file', async () => {
    const err = await store.put(PRJ, name, streamOf(bytes('12345'), bytes('67890')), { maxBytes: 7, length: null }).catch((e) => e);
    expect(err).toBeInstanceOf(ServiceError);
    expect((err as ServiceError).code).toBe('payload_too_large');
    expect(existsSync(store.pathOf(PRJ, name))).toBe(false);
    expect(readdirSync(join(tmp.dir, 'blobs', '.tmp'))).toEqual([]);
  });

  it('refuses a body shorter or longer than its declared length, leaving nothing', async () => {
    for (const length of [3, 20]) {
      const err = await store.put(PRJ, name, streamOf(bytes('0123456789')), { maxBytes: 100, length }).catch((e) => e);
      expect((err as ServiceError).code).toBe('invalid_request');
      expect(existsSync(store.pathOf(PRJ, name))).toBe(false);
    }
    expect(readdirSync(join(tmp.dir, 'blobs', '.tmp'))).toEqual([]);
  });

  it('a body that fails midway leaves nothing', async () => {
    let sent = false;
    const failing = new ReadableStream<Uint8Array>({
      pull(c) {
        if (!sent) {
          sent = true;
          c.enqueue(bytes('partial'));
        } else c.error(new Error('client went away'));
      },
    });
    await expect(store.put(PRJ, name, failing, { maxBytes: 100, length: null })).rejects.toThrow('client went away');
    expect(existsSync(store.pathOf(PRJ, name))).toBe(false);
    expect(readdirSync(join(tmp.dir, 'blobs', '.tmp'))).toEqual([]);
  });

  it('a body of several write buffers in uneven chunks is stored byte for byte, with its SHA-256', async () => {
    // 3.4 MiB in chunks that straddle the 1 MiB write buffers (two take turns while one is written).
    const whole = new Uint8Array(3.4 * 1024 * 1024).map((_, i) => (i * 131 + (i >> 12)) & 0xff);
    const sizes = [1, 65_536, 1_048_575, 2, 1_048_577, 300_001];
    const chunks: Uint8Array[] = [];
    for (let at = 0, i = 0; at < whole.byteLength; i++) {
      const n = Math.min(sizes[i % sizes.length]!, whole.byteLength - at);
      chunks.push(whole.slice(at, at + n));
      at += n;
    }
    const written = await store.put(PRJ, name, streamOf(...chunks), { maxBytes: 4 * 1024 * 1024, length: whole.byteLength });
    expect(written).toEqual({ size: whole.byteLength, etag: createHash('sha256').update(whole).digest('hex') });
    const read = await store.open(PRJ, name);
    const back = new Uint8Array(await new Response(read!.body).arrayBuffer());
    expect(back.byteLength).toBe(whole.byteLength);
    expect(Buffer.compare(back, whole)).toBe(0);
  });

  it('a body refused or failing after several written buffers leaves nothing', async () => {
    const MiB = 1024 * 1024;
    const over = await store
      .put(PRJ, name, streamOf(...Array.from({ length: 5 }, () => new Uint8Array(MiB).fill(7))), { maxBytes: 4 * MiB + 10, length: null })
      .catch((e) => e);
    expect((over as ServiceError).code).toBe('payload_too_large');
    let sent = 0;
    const failing = new ReadableStream<Uint8Array>({
      pull(c) {
        if (sent++ < 3) c.enqueue(new Uint8Array(MiB + 17).fill(1));
        else c.error(new Error('client went away'));
      },
    });
    await expect(store.put(PRJ, name, failing, { maxBytes: 10 * MiB, length: null })).rejects.toThrow('client went away');
    expect(existsSync(store.pathOf(PRJ, name))).toBe(false);
    expect(readdirSync(join(tmp.dir, 'blobs', '.tmp'))).toEqual([]);
  });

  it('a body past several background syncs is stored byte for byte', async () => {
    // 20 MiB: the write syncs in the background every 8 MiB while the body keeps coming.
    const whole = new Uint8Array(20 * 1024 * 1024).map((_, i) => (i * 7 + (i >> 16)) & 0xff);
    const chunks = Array.from({ length: 320 }, (_, i) => whole.subarray(i * 65_536, (i + 1) * 65_536));
    const written = await store.put(PRJ, name, streamOf(...chunks), { maxBytes: 32 * 1024 * 1024, length: whole.byteLength });
    expect(written).toEqual({ size: whole.byteLength, etag: createHash('sha256').update(whole).digest('hex') });
    const back = new Uint8Array(await new Response((await store.open(PRJ, name))!.body).arrayBuffer());
    expect(Buffer.compare(back, whole)).toBe(0);
  });

  it('with ownsChunks, releases each chunk that is a buffer of its own once copied, and only those', async () => {
    const own = [new Uint8Array(1000).fill(1), new Uint8Array(2000).fill(2)];
    const shared = new Uint8Array(4000).fill(3);
    const views = [shared.subarray(0, 1500), shared.subarray(1500)];
    const written = await store.put(PRJ, name, streamOf(own[0]!, views[0]!, own[1]!, views[1]!), { maxBytes: 10_000, length: 7000, ownsChunks: true });
    expect(written.size).toBe(7000);
    // Released: detached, so their memory is free at once.
    expect(own.map((c) => c.byteLength)).toEqual([0, 0]);
    // Views into a buffer that holds more than the chunk are left alone.
    expect(shared.every((b) => b === 3)).toBe(true);
    const back = new Uint8Array(await new Response((await store.open(PRJ, name))!.body).arrayBuffer());
    expect(back).toEqual(new Uint8Array([...new Uint8Array(1000).fill(1), ...new Uint8Array(1500).fill(3), ...new Uint8Array(2000).fill(2), ...new Uint8Array(2500).fill(3)]));

    // Without it, nothing the caller handed over is touched.
    const kept = new Uint8Array(500).fill(4);
    await store.put(PRJ, await blobName(PRJ, 'bucket', 'other', 'w1'), streamOf(kept), { maxBytes: 10_000, length: null });
    expect(kept.byteLength).toBe(500);
  });

  it('reads a range in chunks of at most 256 KiB, and a read cancelled midway ends cleanly', async () => {
    const whole = new Uint8Array(700_000).map((_, i) => (i * 13) & 0xff);
    await store.put(PRJ, name, streamOf(whole), { maxBytes: 1_000_000, length: null });
    const read = (await store.open(PRJ, name, () => ({ start: 1, end: 600_000 })))!;
    expect(read.length).toBe(600_000);
    const chunks: Uint8Array[] = [];
    for await (const c of read.body as unknown as AsyncIterable<Uint8Array>) chunks.push(c);
    expect(Math.max(...chunks.map((c) => c.byteLength))).toBeLessThanOrEqual(256 * 1024);
    expect(Buffer.compare(Buffer.concat(chunks), whole.subarray(1, 600_001))).toBe(0);

    const cancelled = (await store.open(PRJ, name))!;
    const reader = cancelled.body.getReader();
    expect((await reader.read()).value!.byteLength).toBe(256 * 1024);
    await reader.cancel();
    expect(await store.delete(PRJ, name)).toBe(true);
  });

  it('writes a range onto a Node stream through two reused buffers, waiting for each write to be taken', async () => {
    const whole = new Uint8Array(1_100_000).map((_, i) => (i * 7) & 0xff);
    await store.put(PRJ, name, streamOf(whole), { maxBytes: 2_000_000, length: null });
    const read = (await store.open(PRJ, name, () => ({ start: 3, end: 1_000_002 })))!;
    const received: Buffer[] = [];
    const buffers = new Set<ArrayBufferLike>();
    let inFlight = 0;
    let most = 0;
    const out = new Writable({
      write(chunk: Buffer, _encoding, done) {
        buffers.add(chunk.buffer);
        received.push(Buffer.from(chunk));
        most = Math.max(most, ++inFlight);
        // Taken a little later, as a socket would: the writer must not reuse the buffer before.
        setTimeout(() => {
          inFlight--;
          done();
        }, 2);
      },
    });
    await read.writeTo(out);
    expect(Buffer.compare(Buffer.concat(received), whole.subarray(3, 1_000_003))).toBe(0);
    expect(Math.max(...received.map((c) => c.byteLength))).toBeLessThanOrEqual(256 * 1024);
    expect(buffers.size).toBeLessThanOrEqual(2);
    expect(most).toBeLessThanOrEqual(2);
    // The file is closed once written: the blob can be deleted and nothing holds it.
    expect(await store.delete(PRJ, name)).toBe(true);
  });

  it('a Node stream that fails a write ends the read with its error and closes the file', async () => {
    await store.put(PRJ, name, streamOf(new Uint8Array(600_000)), { maxBytes: 1_000_000, length: null });
    const read = (await store.open(PRJ, name))!;
    const out = new Writable({ write: (_c, _e, done) => done(new Error('the client went away')) });
    out.on('error', () => {});
    await expect(read.writeTo(out)).rejects.toThrow('the client went away');
    expect(await store.delete(PRJ, name)).toBe(true);
  });

  it('refuses anything but a project id and a 64-hex name, so no path can escape the root', async () => {
    for (const [project, n] of [
      [PRJ, '../../etc/passwd'],
      [PRJ, `${name.slice(0, 63)}/`],
      [PRJ, name.toUpperCase()],
      ['../prj_0123456789abcdef', name],
      ['prj_0123456789abcdef/..', name],
    ] as const) {
      expect(() => store.pathOf(project, n)).toThrow(ServiceError);
      await expect(store.put(project, n, streamOf(bytes('x')), { maxBytes: 10, length: null })).rejects.toBeInstanceOf(ServiceError);
    }
    expect(readdirSync(tmp.dir)).toEqual(['blobs']);
  });

  it('sweeps temp files a crashed write left behind, naming them', async () => {
    const tmpDir = join(tmp.dir, 'blobs', '.tmp');
    mkdirSync(tmpDir, { recursive: true });
    writeFileSync(join(tmpDir, `${name}.deadbeef`), 'half a blob');
    createFsBlobStore(join(tmp.dir, 'blobs'));
    expect(sweepBlobTempFiles(join(tmp.dir, 'blobs'))).toEqual([`${name}.deadbeef`]);
    expect(readdirSync(tmpDir)).toEqual([]);
  });

  it('while running, sweeps idle temp files no write holds, never those of a write in flight, and a cut-off write removes its own', async () => {
    const tmpDir = join(tmp.dir, 'blobs', '.tmp');
    writeFileSync(join(tmpDir, `${name}.deadbeef`), 'left by a write that ended');
    let feed!: ReadableStreamDefaultController<Uint8Array>;
    const abort = new AbortController();
    const writing = store.put(PRJ, name, new ReadableStream({ start: (c) => void (feed = c) }), { maxBytes: 1 << 20, length: null, signal: abort.signal });
    feed.enqueue(bytes('first bytes'));
    await expect.poll(() => readdirSync(tmpDir).length).toBe(2);
    // Far in the future: every file is idle, but the write in flight keeps its own.
    expect(store.sweepIdleTemp(60_000, Date.now() + 3_600_000)).toEqual([`${name}.deadbeef`]);
    expect(readdirSync(tmpDir)).toHaveLength(1);
    // A young file is left alone.
    writeFileSync(join(tmpDir, `${name}.cafebabe`), 'just written');
    expect(store.sweepIdleTemp(60_000, Date.now())).toEqual([]);
    // The request ends before its body did: the write fails at once and removes its temp file.
    abort.abort();
    await expect(writing).rejects.toThrow(/ended before its body/);
    expect(readdirSync(tmpDir)).toEqual([`${name}.cafebabe`]);
  });
});
