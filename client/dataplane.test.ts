/**
 * The SDK's data plane against the reference engine itself (docs/engine.md "HTTP surface"): the one
 * envelope decoder, result sets in @libsql/client's shape, arguments, search, and the engine's own
 * errors as `SvcError`s. The engine ignores `Authorization`, so the client talks to it directly.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanup, initDataDir, startEngine, type Engine } from '../test/helpers/engine.ts';
import { createClient, type SvcClient } from './client.ts';
import { decodeEnvelope, encodeEnvelope, EnvelopeError } from './envelope.ts';
import { SvcError } from './errors.ts';

let engine: Engine;
let db: SvcClient;

beforeAll(async () => {
  const { dataDir } = await initDataDir();
  engine = await startEngine(dataDir);
  db = createClient({ baseUrl: engine.base, key: 'svc1_unused-by-the-engine' });
});
afterAll(cleanup);

describe('the envelope decoder', () => {
  it('decodes what the engine answers, and refuses the raw body without its header', async () => {
    const r = await fetch(`${engine.base}/v2/capabilities`, { headers: { 'x-svc-protocol-minor': '3' } });
    const raw = new Uint8Array(await r.arrayBuffer());
    expect(decodeEnvelope(raw)).toMatchObject({ engine_version: '3.0.0', protocol_minor: 3 });
    expect(() => decodeEnvelope(raw.subarray(12))).toThrow(EnvelopeError);
  });

  it('refuses a short header, a wrong magic, a length that lies and trailing bytes', () => {
    const good = encodeEnvelope({ a: 1 });
    expect(decodeEnvelope(good)).toEqual({ a: 1 });
    expect(() => decodeEnvelope(good.subarray(0, 11))).toThrow(/shorter than its header/);
    const magic = good.slice();
    magic[0] = 0x58;
    expect(() => decodeEnvelope(magic)).toThrow(/bad envelope magic/);
    expect(() => decodeEnvelope(good.subarray(0, good.byteLength - 1))).toThrow(/says 7 bytes, carries 6/);
    const longer = new Uint8Array(good.byteLength + 1);
    longer.set(good);
    expect(() => decodeEnvelope(longer)).toThrow(/carries 8/);
  });

  it('reads an envelope that sits inside a larger buffer', () => {
    const good = encodeEnvelope(['x']);
    const padded = new Uint8Array(good.byteLength + 10);
    padded.set(good, 5);
    expect(decodeEnvelope(padded.subarray(5, 5 + good.byteLength))).toEqual(['x']);
  });
});

describe('sql and batch', () => {
  it('answers rows readable by name and by position, and JSON as objects', async () => {
    await db.sql('CREATE TABLE notes (id INTEGER PRIMARY KEY, title TEXT, body BLOB)');
    const ins = await db.sql('INSERT INTO notes (title, body) VALUES (?, ?)', ['first', new Uint8Array([1, 2, 3])]);
    expect(ins.rowsAffected).toBe(1);
    expect(ins.lastInsertRowid).toBe(1n);
    expect(ins.columns).toEqual([]);

    const rs = await db.sql({ sql: 'SELECT id, title, body FROM notes WHERE title = :t', args: { t: 'first' } });
    expect(rs.columns).toEqual(['id', 'title', 'body']);
    const row = rs.rows[0]!;
    expect([row.id, row.title, row[0], row[1], row.length]).toEqual([1, 'first', 1, 'first', 3]);
    expect(row.body).toBe('AQID');
    expect(JSON.parse(JSON.stringify(row))).toEqual({ id: 1, title: 'first', body: 'AQID' });
    expect(rs.toArrays()).toEqual([[1, 'first', 'AQID']]);
    expect(rs.lastInsertRowid).toBeUndefined();
    expect(rs.visibleCsn).toBeGreaterThanOrEqual(2);
    expect(rs.toJSON()).toMatchObject({ rows: [[1, 'first', 'AQID']], lastInsertRowid: null });
  });

  it('runs a batch as one transaction: all or nothing', async () => {
    const results = await db.batch([
      { sql: 'INSERT INTO notes (title) VALUES (?)', args: ['b1'] },
      { sql: 'INSERT INTO notes (title) VALUES (?)', args: [true] },
      'SELECT count(*) AS n FROM notes',
    ]);
    expect(results.map((r) => r.rowsAffected)).toEqual([1, 1, 0]);
    expect(results[2]!.rows[0]!.n).toBe(3);

    const failed = await db.batch(['INSERT INTO notes (title) VALUES (1)', 'INSERT INTO nope VALUES (1)']).catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(SvcError);
    expect(failed).toMatchObject({ status: 400, code: 'sql_error', source: 'engine' });
    expect((failed as SvcError).message).toMatch(/^statements\[1\]: /);
    expect((failed as SvcError).engineRequestId).toMatch(/^req_[0-9a-f]{16}$/);
    expect((await db.sql('SELECT count(*) AS n FROM notes')).rows[0]!.n).toBe(3);
  });

  it('sends dates as milliseconds and refuses what it cannot send exactly', async () => {
    const at = new Date('2026-01-02T03:04:05.678Z');
    expect((await db.sql('SELECT ? AS t', [at])).rows[0]!.t).toBe(at.getTime());
    expect((await db.sql('SELECT ? AS n', [42n])).rows[0]!.n).toBe(42);
    await expect(db.sql('SELECT ?', [2n ** 60n])).rejects.toThrow(RangeError);
    await expect(db.sql('SELECT ?', [Number.NaN])).rejects.toThrow(/args\[0\]: must be a finite number/);
    await expect(db.sql('SELECT ?', [undefined as never])).rejects.toThrow(/args\[0\]: cannot be sent \(undefined\)/);
  });

  it("throws the engine's own codes as SvcErrors", async () => {
    const bad = await db.sql('SELEC 1').catch((e: unknown) => e);
    expect(bad).toMatchObject({ name: 'SvcError', status: 400, code: 'sql_error', source: 'engine' });
    const missing = await db.v2('GET', 'nowhere').catch((e: unknown) => e);
    expect(missing).toMatchObject({ status: 404, code: 'not_found', source: 'engine' });
  });
});

describe('search, capabilities and dropTable', () => {
  it('searches an FTS5 table best first and drops it', async () => {
    await db.batch([
      'CREATE VIRTUAL TABLE docs USING fts5(title, body)',
      { sql: 'INSERT INTO docs (title, body) VALUES (?, ?)', args: ['Fox facts', 'a quick brown fox'] },
      { sql: 'INSERT INTO docs (title, body) VALUES (?, ?)', args: ['Dogs', 'a lazy dog'] },
    ]);
    const hits = await db.search('docs', 'fox', { limit: 5 });
    expect(hits).toHaveLength(1);
    expect(hits[0]).toMatchObject({ title: 'Fox facts' });
    expect(hits[0]!.snippet).toMatch(/<b>fox<\/b>/i);
    await expect(db.search('docs', '"unbalanced')).rejects.toMatchObject({ code: 'bad_query', source: 'engine' });

    expect((await db.capabilities()).features).toContain('search');
    expect(await db.dropTable('docs')).toMatchObject({ dropped: 'docs' });
    await expect(db.search('docs', 'fox')).rejects.toMatchObject({ status: 404, code: 'not_found' });
  });
});
