/**
 * The envelope decoder every suite, bench and campaign uses: the SDK's own (client/envelope.ts), the
 * one place the product envelope is decoded. It follows the interface contract (docs/interface.md),
 * not the engine's encoder, so a drift shows.
 */
import { decodeEnvelope as decode } from '../../client/envelope.ts';

/**
 * Decodes a product envelope: `SVCRSP01`, u32 big-endian N, N bytes of UTF-8 JSON, nothing after.
 * Throws when any part is off.
 */
export function decodeEnvelope(raw: Uint8Array): any {
  return decode(raw);
}
