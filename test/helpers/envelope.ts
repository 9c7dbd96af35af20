/**
 * The one decoder of the engine's product envelope for every suite, bench and campaign. It follows
 * the interface contract (docs/interface.md), not the engine's own encoder, so a drift shows.
 */

/**
 * Decodes a product envelope: `SVCRSP01`, u32 big-endian N, N bytes of UTF-8 JSON, nothing after.
 * Throws when any part is off.
 */
export function decodeEnvelope(raw: Uint8Array): any {
  const buf = Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength);
  if (buf.length < 12) throw new Error(`envelope shorter than its header: ${buf.length} bytes`);
  const magic = buf.subarray(0, 8).toString('latin1');
  if (magic !== 'SVCRSP01') throw new Error(`bad envelope magic ${JSON.stringify(magic)}: ${buf.subarray(0, 40).toString()}`);
  const length = buf.readUInt32BE(8);
  if (buf.length !== 12 + length) throw new Error(`envelope says ${length} bytes, carries ${buf.length - 12}`);
  return JSON.parse(buf.subarray(12).toString('utf8'));
}
