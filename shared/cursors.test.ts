import { describe, expect, it } from 'vitest';
import { cursorSeal } from './cursors.ts';
import { ServiceError } from './errors.ts';

const SECRET = 's'.repeat(40);
const INNER = JSON.stringify({ pk: 'PRJ#prj_0123456789abcdef', sk: 'KEY#00ff', gsi1pk: 'ACCT#acct_0123456789abcdef' });

async function refusal(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(ServiceError);
    expect((err as ServiceError).code).toBe('invalid_request');
    return (err as ServiceError).message;
  }
  throw new Error('expected a refusal');
}

function decoded(cursor: string): string {
  return atob(cursor.replace(/-/g, '+').replace(/_/g, '/'));
}

describe('list cursors', () => {
  const seal = cursorSeal(SECRET);
  const list = ['keys', 'prj_0123456789abcdef'];

  it('open to what was sealed, for the same list', async () => {
    const cursor = await seal.seal(list, INNER);
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(await seal.open(list, cursor)).toBe(INNER);
  });

  it('show nothing of the key they hold', async () => {
    const cursor = await seal.seal(list, INNER);
    for (const text of [cursor, decoded(cursor)]) {
      expect(text).not.toContain('PRJ#');
      expect(text).not.toContain('prj_');
      expect(text).not.toContain('acct_');
      expect(text).not.toContain('KEY#');
    }
    // A fresh nonce each time: the same key never seals to the same text.
    expect(await seal.seal(list, INNER)).not.toBe(cursor);
  });

  it('refuse a cursor of another list, project, bucket or account', async () => {
    const cursor = await seal.seal(['objects', 'prj_0123456789abcdef', 'photos'], INNER);
    for (const other of [
      ['objects', 'prj_0123456789abcdef', 'videos'],
      ['objects', 'prj_fedcba9876543210', 'photos'],
      ['keys', 'prj_0123456789abcdef'],
      ['objects', 'prj_0123456789abcdef', 'photos', ''],
    ]) {
      expect(await refusal(seal.open(other, cursor))).toBe('cursor: is not valid');
    }
  });

  it('refuse a cursor sealed under another secret', async () => {
    const cursor = await cursorSeal('t'.repeat(40)).seal(list, INNER);
    expect(await refusal(seal.open(list, cursor))).toBe('cursor: is not valid');
  });

  it('refuse any altered character, and text that is no cursor', async () => {
    const cursor = await seal.seal(list, INNER);
    for (const at of [0, 1, 10, cursor.length - 1]) {
      const c = cursor[at] === 'A' ? 'B' : 'A';
      expect(await refusal(seal.open(list, cursor.slice(0, at) + c + cursor.slice(at + 1)))).toBe('cursor: is not valid');
    }
    for (const junk of ['', 'abc', '%%%', 'eyJ4IjoxfQ', btoa(INNER), cursor.slice(0, 20), `${cursor}AA`]) {
      expect(await refusal(seal.open(list, junk)), junk).toBe('cursor: is not valid');
    }
  });
});
