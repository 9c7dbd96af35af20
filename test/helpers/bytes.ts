/** Test bodies: deterministic byte patterns and streams of them, with and without a known length. */
import { Readable } from 'node:stream';

/** `n` bytes of a fixed pattern seeded by `seed`, so different writes differ. */
export function patternBytes(n: number, seed = 0): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) out[i] = (i * 31 + seed * 7 + (i >> 8)) & 0xff;
  return out;
}

/** A web stream of `bytes` in chunks of `chunk` bytes, with no length anywhere. */
export function webStreamOf(bytes: Uint8Array, chunk = 64 * 1024): ReadableStream<Uint8Array> {
  let at = 0;
  return new ReadableStream({
    pull(c) {
      if (at >= bytes.byteLength) return c.close();
      c.enqueue(bytes.slice(at, at + chunk));
      at += chunk;
    },
  });
}

/** A Node stream of `total` bytes of `a`, produced lazily in chunks of `size` (flat memory). */
export function lazyBytes(total: number, size = 64 * 1024): Readable {
  const block = Buffer.alloc(size, 0x61);
  let left = total;
  return new Readable({
    read() {
      if (left <= 0) return void this.push(null);
      const n = Math.min(size, left);
      left -= n;
      this.push(n === size ? block : block.subarray(0, n));
    },
  });
}
