/**
 * Durability and shutdown (docs/engine.md "Bodies, connections, shutdown"): an acknowledged commit survives SIGKILL; SIGTERM finishes
 * in-flight work, checkpoints the WAL into the database file, releases the lock and exits 0.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { request } from 'node:http';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { PROTOCOL, call, cleanup, cli, initDataDir, sha256File, sql, startEngine, stopEngine } from '../test/helpers/engine.ts';
import { decodeEnvelope } from '../test/helpers/envelope.ts';

afterAll(cleanup);

describe('crash safety', () => {
  it('keeps every acknowledged commit when serve is SIGKILLed mid-write', async () => {
    const { dataDir } = await initDataDir();
    const engine = await startEngine(dataDir);
    await sql(engine, { sql: 'CREATE TABLE acked (id INTEGER PRIMARY KEY, writer INTEGER, payload TEXT)' });

    const acknowledged: number[] = [];
    let nextId = 1;
    let killed = false;
    // Four writers keep requests in flight, so the kill lands between a commit and its answer, or mid-commit.
    const writer = async (w: number) => {
      while (!killed) {
        const id = nextId++;
        try {
          const a = await call(engine, 'POST', '/v2/sql', { sql: 'INSERT INTO acked VALUES (?, ?, ?)', params: [id, w, 'x'.repeat(200)] });
          if (a.status === 200) acknowledged.push(id);
        } catch {
          return; // connection refused or reset: the process is gone
        }
      }
    };
    const writers = [0, 1, 2, 3].map(writer);
    while (acknowledged.length < 300) await new Promise((r) => setTimeout(r, 5));
    killed = true;
    engine.proc.kill('SIGKILL');
    expect((await engine.exited).signal).toBe('SIGKILL');
    await Promise.all(writers);

    const again = await startEngine(dataDir);
    const r = await sql(again, { sql: 'SELECT id FROM acked ORDER BY id' });
    const present = new Set<number>(r.results[0].rows.map((row: number[]) => row[0]));
    const lost = acknowledged.filter((id) => !present.has(id));
    expect(lost).toEqual([]);
    // The figures committed with the rows: one transaction for the table, one per surviving insert.
    expect(r.visible_csn).toBe(1 + present.size);
    await stopEngine(again);
  }, 30_000);
});

describe('graceful stop', () => {
  it('SIGTERM exits 0 with the WAL checkpointed into the database file and the lock released', async () => {
    const { dataDir } = await initDataDir();
    const engine = await startEngine(dataDir);
    await sql(engine, { sql: 'CREATE TABLE kept (x)' });
    for (let i = 0; i < 20; i++) await sql(engine, { sql: 'INSERT INTO kept VALUES (?)', params: [i] });
    expect(statSync(join(dataDir, 'data.sqlite-wal')).size).toBeGreaterThan(0);

    const exit = await stopEngine(engine, 'SIGTERM');
    expect(exit).toEqual({ code: 0, signal: null });
    const wal = join(dataDir, 'data.sqlite-wal');
    expect(!existsSync(wal) || statSync(wal).size === 0).toBe(true);
    expect(existsSync(join(dataDir, 'lock-holder.json'))).toBe(false);

    // The file alone already holds the state: status (which checkpoints again) finds the same bytes.
    const digest = await sha256File(join(dataDir, 'data.sqlite'));
    const status = await cli(['status', '--data-dir', dataDir, '--json']);
    expect(status.code).toBe(0);
    expect(status.json.root_digest).toBe(digest);
    expect(status.json.visible_csn).toBe(21);
    expect(status.json.catalog_version).toBe(1);
  });

  it('SIGTERM lets a request whose body is still arriving finish before exiting', async () => {
    const { dataDir } = await initDataDir();
    const engine = await startEngine(dataDir);
    const body = Buffer.from(JSON.stringify({ sql: 'CREATE TABLE late (x)' }));
    const answer = new Promise<{ status: number; body: unknown }>((resolve, reject) => {
      const req = request(
        { host: '127.0.0.1', port: engine.port, method: 'POST', path: '/v2/sql', headers: { ...PROTOCOL, 'content-length': body.length } },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: decodeEnvelope(Buffer.concat(chunks)) }));
        },
      );
      req.on('error', reject);
      req.write(body.subarray(0, 10));
      // The engine sees the request start, then gets SIGTERM, then the rest of the body arrives.
      setTimeout(() => {
        engine.proc.kill('SIGTERM');
        setTimeout(() => req.end(body.subarray(10)), 300);
      }, 200);
    });
    const a = await answer;
    expect(a.status).toBe(200);
    expect(await engine.exited).toEqual({ code: 0, signal: null });
    const status = await cli(['status', '--data-dir', dataDir, '--json']);
    expect(status.json.catalog_version).toBe(1);
  });

  it('does not wait on idle keep-alive connections: exits promptly', async () => {
    const { dataDir } = await initDataDir();
    const engine = await startEngine(dataDir);
    // fetch keeps this connection open and idle after the answer.
    expect((await call(engine, 'GET', '/v2/capabilities')).status).toBe(200);
    const started = Date.now();
    const exit = await stopEngine(engine, 'SIGTERM');
    expect(exit.code).toBe(0);
    expect(Date.now() - started).toBeLessThan(2500);
    await expect(call(engine, 'GET', '/v2/capabilities')).rejects.toThrow();
  });
});
