/** The realtime contract checks: payload size in UTF-8 bytes of JSON, publish body, subscribe channels. */
import { describe, expect, it } from 'vitest';
import { ServiceError } from '../errors.ts';
import { payloadJson, subscribeChannels } from './events.ts';
import { publishRequestSchema } from '../schemas/realtime.ts';

function codeOf(fn: () => unknown): string | null {
  try {
    fn();
    return null;
  } catch (err) {
    return err instanceof ServiceError ? err.code : 'not a ServiceError';
  }
}

describe('payloadJson', () => {
  it('answers the JSON text, null for an absent payload', () => {
    expect(payloadJson({ a: [1, 'x'] })).toBe('{"a":[1,"x"]}');
    expect(payloadJson(undefined)).toBe('null');
  });

  it('counts UTF-8 bytes of the JSON: 32,768 pass, 32,769 are 413', () => {
    expect(codeOf(() => payloadJson('x'.repeat(32_766)))).toBeNull();
    expect(codeOf(() => payloadJson('x'.repeat(32_767)))).toBe('payload_too_large');
    // 10,922 three-byte characters + quotes = 32,768 bytes; one more character is over.
    expect(codeOf(() => payloadJson('€'.repeat(10_922)))).toBeNull();
    expect(codeOf(() => payloadJson('€'.repeat(10_923)))).toBe('payload_too_large');
    // Escapes count as written: "\n" is two bytes of JSON.
    expect(codeOf(() => payloadJson('\n'.repeat(16_383)))).toBeNull();
    expect(codeOf(() => payloadJson('\n'.repeat(16_384)))).toBe('payload_too_large');
  });
});

describe('publishRequestSchema', () => {
  it('reserves system and checks both patterns', () => {
    expect(publishRequestSchema.safeParse({ channel: 'system', event: 'e' }).success).toBe(false);
    expect(publishRequestSchema.safeParse({ channel: 'systems', event: 'e' }).success).toBe(true);
    expect(publishRequestSchema.safeParse({ channel: 'a', event: 'A.b_c:d-9' }).success).toBe(true);
    expect(publishRequestSchema.safeParse({ channel: 'a', event: 'é' }).success).toBe(false);
    expect(publishRequestSchema.safeParse({ channel: 'a:b', event: 'e' }).success).toBe(false);
  });
});

describe('subscribeChannels', () => {
  const of = (q: string) => subscribeChannels(new URL(`http://x/?${q}`));

  it('collects repeated channels, collapsing duplicates and ignoring other parameters', () => {
    expect(of('channel=a&channel=b&channel=a&x=1')).toEqual(['a', 'b']);
    expect(of('channel=system')).toEqual(['system']);
  });

  it('refuses no channel, a bad one, and more than 32 with 400', () => {
    expect(codeOf(() => of(''))).toBe('invalid_request');
    expect(codeOf(() => of('channel='))).toBe('invalid_request');
    expect(codeOf(() => of('channel=A'))).toBe('invalid_request');
    expect(codeOf(() => of(Array.from({ length: 32 }, (_, i) => `channel=c${i}`).join('&')))).toBeNull();
    expect(codeOf(() => of(Array.from({ length: 33 }, (_, i) => `channel=c${i}`).join('&')))).toBe('invalid_request');
  });
});
