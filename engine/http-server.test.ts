/** The engine's `/v2` HTTP surface (docs/engine.md "HTTP surface"), driven over real HTTP against bin/svc-engine. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'node:http';
import type { Answer, Engine } from '../test/helpers/engine.ts';
import { decodeEnvelope } from '../test/helpers/envelope.ts';
import { CONTENT_TYPE, PROTOCOL, REQUEST_ID, call, cleanup, initDataDir, sql, startEngine } from '../test/helpers/engine.ts';

let engine: Engine;

beforeAll(async () => {
  const { dataDir } = await initDataDir();
  engine = await startEngine(dataDir);
});
afterAll(cleanup);

function expectEnvelopeHeaders(answer: Answer): void {
  expect(answer.headers.get('content-type')).toBe(CONTENT_TYPE);
  expect(answer.headers.get('x-svc-protocol-minor')).toBe('3');
  expect(answer.headers.get('x-svc-request-id')).toMatch(REQUEST_ID);
}

async function figures(): Promise<{ csn: number; catalog: number; time: number }> {
  const r = await sql(engine, { sql: 'SELECT visible_csn, catalog_version, logical_time_micros FROM _svc_meta' });
  const [csn, catalog, time] = r.results[0].rows[0];
  return { csn, catalog, time };
}

/** Raw node:http request, for bodies fetch cannot send (chunked without length, lying lengths). */
function rawRequest(
  path: string,
  headers: Record<string, string | number>,
  write: (req: ReturnType<typeof request>) => void,
): Promise<{ status: number; headers: Record<string, unknown>; body: unknown }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: engine.port, method: 'POST', path, headers: { ...PROTOCOL, ...headers } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: decodeEnvelope(Buffer.concat(chunks)) }));
    });
    req.on('error', reject);
    write(req);
  });
}

describe('every response', () => {
  it('carries the protocol headers and an envelope, on success and on every error status', async () => {
    const answers = [
      await call(engine, 'GET', '/v2/capabilities'),
      await call(engine, 'GET', '/v2/capabilities', undefined, {}),
      await call(engine, 'POST', '/v2/sql', { sql: 'SELEKT' }),
      await call(engine, 'GET', '/v2/nowhere'),
      await call(engine, 'POST', '/v2/sql', 'x'.repeat(1024 * 1024 + 1)),
    ];
    expect(answers.map((a) => a.status)).toEqual([200, 400, 400, 404, 413]);
    for (const a of answers) expectEnvelopeHeaders(a);
    for (const a of answers.slice(1)) expect(a.body).toEqual({ error: { code: expect.any(String), message: expect.any(String) } });
  });

  it('has a request id of its own', async () => {
    const ids = new Set<string | null>();
    for (let i = 0; i < 20; i++) ids.add((await call(engine, 'GET', '/v2/capabilities')).headers.get('x-svc-request-id'));
    expect(ids.size).toBe(20);
  });
});

describe('X-Svc-Protocol-Minor', () => {
  it.each(['0', '1', '2', '3'])('accepts minor %s', async (minor) => {
    const a = await call(engine, 'GET', '/v2/capabilities', undefined, { 'x-svc-protocol-minor': minor });
    expect(a.status).toBe(200);
  });

  it.each([
    ['absent', {}],
    ['above 3', { 'x-svc-protocol-minor': '4' }],
    ['not an integer', { 'x-svc-protocol-minor': 'three' }],
    ['a fraction', { 'x-svc-protocol-minor': '2.5' }],
    ['negative', { 'x-svc-protocol-minor': '-1' }],
    ['empty', { 'x-svc-protocol-minor': '' }],
  ])('refuses a header that is %s with 400', async (_what, headers) => {
    const a = await call(engine, 'GET', '/v2/capabilities', undefined, headers as Record<string, string>);
    expect(a.status).toBe(400);
    expect(a.body.error.code).toBe('bad_protocol_minor');
  });

  it('is checked before routing: an unknown path without it is 400, not 404', async () => {
    const a = await call(engine, 'GET', '/v2/nowhere', undefined, {});
    expect(a.status).toBe(400);
  });
});

describe('GET /v2/capabilities', () => {
  it('describes the engine', async () => {
    const a = await call(engine, 'GET', '/v2/capabilities');
    expect(a.body).toMatchObject({
      engine_version: '3.0.0',
      protocol_minor: 3,
      features: ['sql', 'search', 'tables.delete'],
      max_body_bytes: 1048576,
    });
  });
});

describe('unknown routes', () => {
  it.each([
    ['GET', '/v2/nowhere'],
    ['GET', '/v2/sql'],
    ['PUT', '/v2/capabilities'],
    ['POST', '/v2/tables/t'],
    ['DELETE', '/v2/tables/'],
    ['DELETE', '/v2/tables/a/b'],
    ['GET', '/'],
    ['GET', '/v1/capabilities'],
  ])('%s %s is an enveloped 404', async (method, path) => {
    const a = await call(engine, method, path);
    expect(a.status).toBe(404);
    expect(a.body.error.code).toBe('not_found');
    expectEnvelopeHeaders(a);
  });
});

describe('POST /v2/sql', () => {
  beforeAll(async () => {
    await sql(engine, {
      statements: [
        { sql: 'CREATE TABLE people (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, age INTEGER, photo BLOB, score REAL)' },
        { sql: "INSERT INTO people (name, age) VALUES ('ada', 36), ('alan', 41)" },
      ],
    });
  });

  it('runs one statement and answers columns, rows and counts', async () => {
    const r = await sql(engine, { sql: 'SELECT id, name FROM people ORDER BY id' });
    expect(r.results).toEqual([{ columns: ['id', 'name'], rows: [[1, 'ada'], [2, 'alan']], rows_changed: 0, last_insert_rowid: null }]);
    expect(r.visible_csn).toEqual(expect.any(Number));
  });

  it('binds positional parameters, integers as INTEGER', async () => {
    const ins = await sql(engine, { sql: 'INSERT INTO people (name, age) VALUES (?, ?)', params: ['grace', 85] });
    expect(ins.results[0]).toMatchObject({ rows_changed: 1, last_insert_rowid: 3 });
    const r = await sql(engine, { sql: 'SELECT typeof(age), age FROM people WHERE name = ?', params: ['grace'] });
    expect(r.results[0].rows).toEqual([['integer', 85]]);
  });

  it('binds named parameters written :name, $name and @name', async () => {
    const r = await sql(engine, {
      sql: 'SELECT :a AS a, $b AS b, @c AS c',
      params: { a: 1, b: 'two', c: null },
    });
    expect(r.results[0]).toMatchObject({ columns: ['a', 'b', 'c'], rows: [[1, 'two', null]] });
  });

  it('reports rows changed by an UPDATE and no insert rowid for it', async () => {
    const r = await sql(engine, { sql: 'UPDATE people SET age = age + 1 WHERE age IS NOT NULL' });
    expect(r.results[0]).toMatchObject({ rows_changed: 3, last_insert_rowid: null, columns: [], rows: [] });
  });

  it('returns rows from INSERT ... RETURNING with its counts', async () => {
    const r = await sql(engine, { sql: "INSERT INTO people (name) VALUES ('edsger') RETURNING id, name" });
    expect(r.results[0]).toMatchObject({ columns: ['id', 'name'], rows: [[expect.any(Number), 'edsger']], rows_changed: 1 });
    expect(r.results[0].last_insert_rowid).toBe(r.results[0].rows[0][0]);
  });

  it('converts values: big integers to strings, blobs to base64, booleans to 1/0, reals kept', async () => {
    const r = await sql(engine, {
      sql: 'SELECT 9223372036854775807, 9007199254740991, ?, ?, ?, 1.5',
      params: [{ base64: Buffer.from('hi!').toString('base64') }, true, false],
    });
    expect(r.results[0].rows[0]).toEqual(['9223372036854775807', 9007199254740991, Buffer.from('hi!').toString('base64'), 1, 0, 1.5]);
  });

  it('runs a batch in one transaction and answers one result per statement', async () => {
    const before = await figures();
    const r = await sql(engine, {
      statements: [
        { sql: 'INSERT INTO people (name) VALUES (?)', params: ['barbara'] },
        { sql: 'INSERT INTO people (name) VALUES (:n)', params: { n: 'donald' } },
        { sql: "SELECT count(*) FROM people WHERE name IN ('barbara', 'donald')" },
      ],
      transaction: true,
    });
    expect(r.results).toHaveLength(3);
    expect(r.results[2].rows).toEqual([[2]]);
    expect(r.visible_csn).toBe(before.csn + 1);
  });

  it('rolls the whole batch back when one statement fails, naming it', async () => {
    const before = await figures();
    const a = await call(engine, 'POST', '/v2/sql', {
      statements: [
        { sql: "INSERT INTO people (name) VALUES ('ken')" },
        { sql: "INSERT INTO people (name) VALUES ('ada')" }, // UNIQUE violation
      ],
    });
    expect(a.status).toBe(400);
    expect(a.body.error.code).toBe('sql_error');
    expect(a.body.error.message).toMatch(/statements\[1\].*UNIQUE constraint failed/);
    const r = await sql(engine, { sql: "SELECT count(*) FROM people WHERE name = 'ken'" });
    expect(r.results[0].rows).toEqual([[0]]);
    expect((await figures()).csn).toBe(before.csn);
  });

  it('lets a batch create a table and use it at once', async () => {
    const r = await sql(engine, {
      statements: [{ sql: 'CREATE TABLE fresh (x)' }, { sql: 'INSERT INTO fresh VALUES (1)' }, { sql: 'SELECT x FROM fresh' }],
    });
    expect(r.results[2].rows).toEqual([[1]]);
  });

  it.each([
    ['a syntax error', { sql: 'SELEKT 1' }, /syntax error/],
    ['an unknown table', { sql: 'SELECT * FROM nope' }, /no such table: nope/],
    ['two statements in one sql', { sql: 'SELECT 1; SELECT 2' }, /2 statements/],
    ['an empty sql', { sql: ' -- nothing\n ; ' }, /no statement/],
    ['BEGIN', { sql: 'BEGIN' }, /explicit transactions/],
    ['SAVEPOINT', { sql: 'SAVEPOINT s' }, /explicit transactions/],
    ['ATTACH', { sql: "ATTACH '/tmp/x.db' AS x" }, /ATTACH/],
    ['VACUUM INTO', { sql: "VACUUM INTO '/tmp/x.db'" }, /VACUUM/],
    ['VACUUM', { sql: '/* c */ vacuum' }, /VACUUM/],
    ['a pragma that changes a setting', { sql: 'PRAGMA journal_mode = DELETE' }, /PRAGMA journal_mode/],
    ['a temporary table', { sql: 'CREATE TEMP TABLE tt (x)' }, /temporary/],
    ['a write to the engine table', { sql: 'UPDATE _svc_meta SET visible_csn = 0' }, /_svc_meta/],
    ['dropping the engine table', { sql: 'DROP TABLE _svc_meta' }, /_svc_meta/],
    ['a trigger on the engine table', { sql: 'CREATE TRIGGER tr AFTER UPDATE ON _svc_meta BEGIN SELECT 1; END' }, /_svc_meta/],
    ['an unknown named parameter', { sql: 'SELECT :a', params: { b: 1 } }, /named parameter/i],
  ])('refuses %s with 400 sql_error and SQLite’s reason', async (_what, body, message) => {
    const a = await call(engine, 'POST', '/v2/sql', body);
    expect(a.status).toBe(400);
    expect(a.body.error.code).toBe('sql_error');
    expect(a.body.error.message).toMatch(message);
  });

  it('answers the current columns of a repeated SELECT * after the table changed shape', async () => {
    await sql(engine, { sql: 'CREATE TABLE shape (a)' });
    const select = { sql: 'SELECT * FROM shape' };
    expect((await sql(engine, select)).results[0].columns).toEqual(['a']);
    await sql(engine, { sql: 'ALTER TABLE shape ADD COLUMN b' });
    expect((await sql(engine, select)).results[0].columns).toEqual(['a', 'b']);
    await sql(engine, { sql: 'ALTER TABLE shape RENAME COLUMN a TO z' });
    expect((await sql(engine, select)).results[0].columns).toEqual(['z', 'b']);
  });

  it('allows read-only pragmas', async () => {
    const r = await sql(engine, { sql: 'PRAGMA table_info(people)' });
    expect(r.results[0].rows.map((row: unknown[]) => row[1])).toEqual(['id', 'name', 'age', 'photo', 'score']);
  });

  it('knows a trigger body is one statement', async () => {
    const r = await sql(engine, {
      sql: "CREATE TRIGGER people_log AFTER INSERT ON people BEGIN UPDATE people SET score = 1 WHERE id = new.id; SELECT 'x;y'; END",
    });
    expect(r.results).toHaveLength(1);
    await sql(engine, { sql: 'DROP TRIGGER people_log' });
  });

  it.each([
    ['not JSON', '{"sql":', /not valid JSON/],
    ['a JSON array', '[]', /JSON object/],
    ['an empty body', '', /not valid JSON/],
    ['sql not a string', { sql: 1 }, /sql must be a string/],
    ['params a string', { sql: 'SELECT ?', params: 'x' }, /params must be an array or an object/],
    ['a nested parameter', { sql: 'SELECT ?', params: [[1]] }, /params\[0\]/],
    ['an unknown field', { sql: 'SELECT 1', param: [] }, /unknown field param/],
    ['an empty batch', { statements: [] }, /non-empty array/],
    ['sql beside statements', { sql: 'SELECT 1', statements: [{ sql: 'SELECT 1' }] }, /unknown field sql/],
    ['transaction false', { statements: [{ sql: 'SELECT 1' }], transaction: false }, /transaction must be true/],
    ['a batch entry without sql', { statements: [{ params: [] }] }, /statements\[0\]\.sql must be a string/],
  ])('refuses %s with 400 bad_request naming the field', async (_what, body, message) => {
    const a = await call(engine, 'POST', '/v2/sql', body);
    expect(a.status).toBe(400);
    expect(a.body.error.code).toBe('bad_request');
    expect(a.body.error.message).toMatch(message);
  });
});

describe('lineage figures', () => {
  beforeAll(async () => {
    await sql(engine, { sql: 'CREATE TABLE counted (x INTEGER)' });
  });

  it('a read counts nothing', async () => {
    const before = await figures();
    const r = await sql(engine, { sql: 'SELECT count(*) FROM counted' });
    expect(r.visible_csn).toBe(before.csn);
    expect(await figures()).toEqual(before);
  });

  it('a write counts once per committed transaction, however many statements it holds', async () => {
    const before = await figures();
    await sql(engine, { sql: 'INSERT INTO counted VALUES (1)' });
    await sql(engine, { statements: [1, 2, 3].map((n) => ({ sql: 'INSERT INTO counted VALUES (?)', params: [n] })) });
    const after = await figures();
    expect(after.csn).toBe(before.csn + 2);
    expect(after.catalog).toBe(before.catalog);
    expect(after.time).toBeGreaterThan(before.time);
  });

  it('a write that changes no row counts nothing', async () => {
    const before = await figures();
    await sql(engine, { sql: 'DELETE FROM counted WHERE x < 0' });
    expect(await figures()).toEqual(before);
  });

  it('each schema change bumps catalog_version; the transaction bumps visible_csn once', async () => {
    const before = await figures();
    const r = await sql(engine, { statements: [{ sql: 'CREATE TABLE c1 (x)' }, { sql: 'CREATE INDEX c1_x ON c1 (x)' }] });
    const after = await figures();
    expect(after.catalog).toBe(before.catalog + 2);
    expect(after.csn).toBe(before.csn + 1);
    expect(r.visible_csn).toBe(after.csn);
  });

  it('a failed write counts nothing', async () => {
    const before = await figures();
    await call(engine, 'POST', '/v2/sql', { statements: [{ sql: 'CREATE TABLE c2 (x)' }, { sql: 'INSERT INTO nope VALUES (1)' }] });
    expect(await figures()).toEqual(before);
  });
});

describe('POST /v2/search', () => {
  beforeAll(async () => {
    await sql(engine, {
      statements: [
        { sql: 'CREATE VIRTUAL TABLE docs USING fts5 (title, body)' },
        ...[
          ['Foxes', 'The quick brown fox jumps over the lazy dog'],
          ['Dogs', 'A lazy dog sleeps all day'],
          ['Fox facts', 'fox fox fox: a fox is a small omnivore; foxes hunt at night'],
          ['Cats', 'Cats ignore everyone'],
        ].map(([title, body]) => ({ sql: 'INSERT INTO docs (title, body) VALUES (?, ?)', params: [title, body] })),
      ],
    });
  });

  it('answers hits best bm25 rank first, with rowid, rank, snippet and the columns', async () => {
    const a = await call(engine, 'POST', '/v2/search', { table: 'docs', query: 'fox' });
    expect(a.status).toBe(200);
    const hits = a.body.hits;
    expect(hits.map((h: { title: string }) => h.title)).toEqual(['Fox facts', 'Foxes']);
    expect(hits[0]).toEqual({ rowid: 3, rank: expect.any(Number), snippet: expect.stringContaining('<b>fox</b>'), title: 'Fox facts', body: expect.any(String) });
    expect(hits[0].rank).toBeLessThan(hits[1].rank);
  });

  it('honours limit', async () => {
    const a = await call(engine, 'POST', '/v2/search', { table: 'docs', query: 'lazy OR fox', limit: 2 });
    expect(a.body.hits).toHaveLength(2);
  });

  it('matches the table name case-insensitively, like SQL', async () => {
    const a = await call(engine, 'POST', '/v2/search', { table: 'DOCS', query: 'cats' });
    expect(a.body.hits).toHaveLength(1);
  });

  it.each([
    ['an unknown table', { table: 'nothing', query: 'x' }, 404, 'not_found'],
    ['a table that is not FTS5', { table: 'people', query: 'x' }, 404, 'not_found'],
    ['the engine table', { table: '_svc_meta', query: 'x' }, 404, 'not_found'],
    ['a name that is not an identifier', { table: 'docs; DROP TABLE people', query: 'x' }, 400, 'bad_request'],
    ['a quoted name', { table: 'docs"', query: 'x' }, 400, 'bad_request'],
    ['bad query syntax', { table: 'docs', query: 'fox AND (' }, 400, 'bad_query'],
    ['an empty query', { table: 'docs', query: '  ' }, 400, 'bad_request'],
    ['limit over 100', { table: 'docs', query: 'fox', limit: 101 }, 400, 'bad_request'],
    ['limit zero', { table: 'docs', query: 'fox', limit: 0 }, 400, 'bad_request'],
    ['limit not an integer', { table: 'docs', query: 'fox', limit: 2.5 }, 400, 'bad_request'],
  ])('refuses %s', async (_what, body, status, code) => {
    const a = await call(engine, 'POST', '/v2/search', body);
    expect(a.status).toBe(status);
    expect(a.body.error.code).toBe(code);
  });

  it('left the table alone after the injection attempt', async () => {
    const r = await sql(engine, { sql: 'SELECT count(*) FROM people' });
    expect(r.results[0].rows[0][0]).toBeGreaterThan(0);
  });
});

describe('DELETE /v2/tables/{name}', () => {
  it('drops the table, counting a write and a schema change', async () => {
    await sql(engine, { sql: 'CREATE TABLE doomed (x)' });
    const before = await figures();
    const a = await call(engine, 'DELETE', '/v2/tables/doomed');
    expect(a.status).toBe(200);
    expect(a.body).toEqual({ dropped: 'doomed', visible_csn: before.csn + 1, catalog_version: before.catalog + 1 });
    const gone = await call(engine, 'POST', '/v2/sql', { sql: 'SELECT * FROM doomed' });
    expect(gone.body.error.message).toMatch(/no such table/);
  });

  it('drops an FTS5 table with its shadow tables', async () => {
    await sql(engine, { sql: 'CREATE VIRTUAL TABLE gone_fts USING fts5 (a)' });
    expect((await call(engine, 'DELETE', '/v2/tables/gone_fts')).status).toBe(200);
    const r = await sql(engine, { sql: "SELECT count(*) FROM sqlite_schema WHERE name LIKE 'gone_fts%'" });
    expect(r.results[0].rows).toEqual([[0]]);
  });

  it.each([
    ['an unknown table', '/v2/tables/never', 404],
    ['the engine table', '/v2/tables/_svc_meta', 404],
    ['a schema table', '/v2/tables/sqlite_schema', 404],
    ['a name that is not an identifier', `/v2/tables/${encodeURIComponent('people; --')}`, 400],
  ])('refuses %s', async (_what, path, status) => {
    const a = await call(engine, 'DELETE', path);
    expect(a.status).toBe(status);
  });
});

describe('body limit', () => {
  it('accepts a body of exactly the limit', async () => {
    const prefix = '{"sql":"SELECT length(?)","params":["';
    const suffix = '"]}';
    const fill = 1024 * 1024 - prefix.length - suffix.length;
    const a = await call(engine, 'POST', '/v2/sql', `${prefix}${'x'.repeat(fill)}${suffix}`);
    expect(a.status).toBe(200);
    expect(a.body.results[0].rows).toEqual([[fill]]);
  });

  it('refuses a larger Content-Length with an enveloped 413', async () => {
    const a = await call(engine, 'POST', '/v2/sql', 'x'.repeat(1024 * 1024 + 1));
    expect(a.status).toBe(413);
    expect(a.body.error.code).toBe('payload_too_large');
  });

  it('refuses a chunked body by counting once it passes the limit', async () => {
    const answer = await rawRequest('/v2/sql', { 'transfer-encoding': 'chunked' }, (req) => {
      const chunk = Buffer.alloc(64 * 1024, 0x20);
      let sent = 0;
      const pump = () => {
        // Keeps sending up to 4 MiB; the engine must answer long before and must not wait for the end.
        while (sent < 4 * 1024 * 1024) {
          sent += chunk.length;
          if (!req.write(chunk)) return void req.once('drain', pump);
        }
        req.end();
      };
      req.on('error', () => {}); // the engine may close the connection while we still write
      pump();
    });
    expect(answer.status).toBe(413);
    expect((answer.body as { error: { code: string } }).error.code).toBe('payload_too_large');
  });

  it('still serves on a new connection afterwards', async () => {
    expect((await call(engine, 'GET', '/v2/capabilities')).status).toBe(200);
  });
});
