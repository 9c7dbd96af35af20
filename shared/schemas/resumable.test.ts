// TUS's Upload-Metadata as the resumable route reads it (docs/storage.md "Resumable uploads").
import { describe, expect, it } from 'vitest';
import { MetadataError, parseUploadMetadata } from './resumable.ts';

const b64 = (s: string) => Buffer.from(s).toString('base64');

describe('Upload-Metadata', () => {
  it('reads name base64(value) pairs, values as UTF-8, a name alone as empty', () => {
    const got = parseUploadMetadata(`bucket ${b64('photos')}, key ${b64('a/é 日.png')},is_confidential`);
    expect(Object.fromEntries(got)).toEqual({ bucket: 'photos', key: 'a/é 日.png', is_confidential: '' });
    expect(parseUploadMetadata(null).size).toBe(0);
    expect(parseUploadMetadata('  ').size).toBe(0);
  });

  it('refuses a repeated name, a pair of three parts, and a value that is not base64 of UTF-8', () => {
    for (const raw of [`a ${b64('x')},a ${b64('y')}`, 'a b c', `a ${Buffer.from([0xff, 0xfe]).toString('base64')}`, 'a !!!!']) {
      expect(() => parseUploadMetadata(raw), raw).toThrow(MetadataError);
    }
  });
});
