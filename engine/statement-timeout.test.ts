/**
 * The statement time limit (docs/engine.md "Statement time limit"): a request that runs past
 * `--statement-timeout-ms` answers the enveloped 400 `statement_timeout` in about the limit, the
 * runaway statement stops using CPU (its executor process is killed), the engine answers its next
 * request at once, requests waiting behind the runaway one are served, an interrupted write is rolled
 * back and committed data is intact; an executor that dies on its own answers `statement_aborted` and
 * the engine serves on.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { call, cleanup, cli, initDataDir, sql, startEngine, stopEngine, type Engine } from '../test/helpers/engine.ts';

afterAll(cleanup);

const RUNAWAY = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 300000000) SELECT count(*) FROM c';
const LIMIT_MS = 500;

/** The pids of the processes `pid` started (the executor of a serve). */
function childrenOf(pid: number): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[1]) === pid) found.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

/** CPU time (ms) a process has used, or null once it is gone. */
function cpuMs(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // utime and stime are fields 14 and 15 of stat, in clock ticks (100 per second on Linux).
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
  } catch {
    return null;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0] !== 'Z';
  } catch {
    return false;
  }
}

async function engineWithTable(extra: string[] = []): Promise<Engine> {
  const { dataDir } = await initDataDir();
  const engine = await startEngine(dataDir, ['--statement-timeout-ms', String(LIMIT_MS), ...extra]);
  await sql(engine, { sql: 'CREATE TABLE t (v TEXT)' });
  await sql(engine, { sql: "INSERT INTO t VALUES ('committed')" });
  return engine;
}

describe('a statement past the time limit', () => {
  it('answers statement_timeout in about the limit, frees the CPU, and the next request answers at once', async () => {
    const engine = await engineWithTable();
    const caps = await call(engine, 'GET', '/v2/capabilities');
    expect(caps.body.sql.statement_timeout_ms).toBe(LIMIT_MS);
    const [executor] = childrenOf(engine.proc.pid!);
    expect(executor).toBeGreaterThan(0);

    const started = Date.now();
    const r = await call(engine, 'POST', '/v2/sql', { sql: RUNAWAY });
    const took = Date.now() - started;
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe('statement_timeout');
    expect(r.body.error.message).toMatch(/500 ms/);
    expect(r.headers.get('content-type')).toBe('application/vnd.svc.product-v1');
    expect(took).toBeGreaterThanOrEqual(LIMIT_MS - 10);
    expect(took).toBeLessThan(LIMIT_MS + 1500);
    // The process that ran it is gone: nothing burns CPU on its behalf any more.
    expect(alive(executor!)).toBe(false);

    const next = Date.now();
    const ok = await sql(engine, { sql: 'SELECT v FROM t' });
    expect(ok.results[0].rows).toEqual([['committed']]);
    expect(Date.now() - next).toBeLessThan(2000);

    const [fresh] = childrenOf(engine.proc.pid!);
    expect(fresh).not.toBe(executor);
    const before = cpuMs(fresh!)!;
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(cpuMs(fresh!)! - before).toBeLessThan(100);
    expect(cpuMs(engine.proc.pid!)).not.toBeNull();
    const stopped = await stopEngine(engine);
    expect(stopped.code).toBe(0);
  });

  it('serves the requests that waited behind it, and only it times out', async () => {
    const engine = await engineWithTable();
    const runaway = call(engine, 'POST', '/v2/sql', { sql: RUNAWAY });
    await new Promise((resolve) => setTimeout(resolve, 100));
    const waiting = [1, 2, 3].map((i) => call(engine, 'POST', '/v2/sql', { sql: 'SELECT ? AS n', params: [i] }));
    const write = call(engine, 'POST', '/v2/sql', { sql: "INSERT INTO t VALUES ('behind')" });
    expect((await runaway).body.error.code).toBe('statement_timeout');
    for (const [i, answer] of (await Promise.all(waiting)).entries()) {
      expect(answer.status).toBe(200);
      expect(answer.body.results[0].rows).toEqual([[i + 1]]);
    }
    expect((await write).status).toBe(200);
    // Each ran once: the write that waited was not lost, nor applied twice.
    expect((await sql(engine, { sql: 'SELECT v FROM t ORDER BY rowid' })).results[0].rows).toEqual([['committed'], ['behind']]);
    await stopEngine(engine);
  });

  it('rolls back an interrupted write and keeps every committed row and figure', async () => {
    const engine = await engineWithTable();
    const before = await sql(engine, { sql: 'SELECT count(*) FROM t' });
    // A batch whose write opened the transaction before the runaway statement.
    const batch = await call(engine, 'POST', '/v2/sql', { statements: [{ sql: "INSERT INTO t VALUES ('lost')" }, { sql: RUNAWAY }] });
    expect(batch.status).toBe(400);
    expect(batch.body.error.code).toBe('statement_timeout');
    // A write that fills pages (and spills them to the WAL) for as long as it may.
    await sql(engine, { sql: 'CREATE TABLE big (x INTEGER)' });
    const csn = (await sql(engine, { sql: 'SELECT 1' })).visible_csn;
    const bulk = await call(engine, 'POST', '/v2/sql', {
      sql: 'INSERT INTO big WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 300000000) SELECT x FROM c',
    });
    expect(bulk.body.error.code).toBe('statement_timeout');
    const after = await sql(engine, { sql: 'SELECT v FROM t ORDER BY rowid' });
    expect(after.results[0].rows).toEqual([['committed']]);
    expect(after.visible_csn).toBe(csn);
    expect(before.visible_csn).toBe(csn - 1);
    expect((await sql(engine, { sql: 'SELECT count(*) FROM big' })).results[0].rows).toEqual([[0]]);
    expect((await sql(engine, { sql: 'PRAGMA integrity_check' })).results[0].rows).toEqual([['ok']]);
    expect((await stopEngine(engine)).code).toBe(0);
    const status = await cli(['status', '--data-dir', engine.dataDir, '--json']);
    expect(status.code).toBe(0);
    expect(status.json.visible_csn).toBe(csn);
  });

  it('stops cleanly on SIGTERM while a runaway statement runs', async () => {
    const { dataDir } = await initDataDir();
    const engine = await startEngine(dataDir, ['--statement-timeout-ms', '60000']);
    await sql(engine, { sql: 'CREATE TABLE t (v)' });
    const runaway = call(engine, 'POST', '/v2/sql', { sql: RUNAWAY }).catch(() => null);
    await new Promise((resolve) => setTimeout(resolve, 200));
    const started = Date.now();
    const stopped = await stopEngine(engine);
    expect(stopped.code).toBe(0);
    // The drain (5 s) bounds it, not the statement.
    expect(Date.now() - started).toBeLessThan(9000);
    await runaway;
    expect(engine.stderr()).toMatch(/database checkpointed, lock released/);
    const status = await cli(['status', '--data-dir', dataDir, '--json']);
    expect(status.code).toBe(0);
  }, 20_000);
});

describe('an executor that dies on its own', () => {
  it('answers statement_aborted for the request it ran, and the engine serves on', async () => {
    const engine = await engineWithTable(['--statement-timeout-ms', '20000']);
    const runaway = call(engine, 'POST', '/v2/sql', { sql: RUNAWAY });
    await new Promise((resolve) => setTimeout(resolve, 200));
    const [executor] = childrenOf(engine.proc.pid!);
    // What the kernel's OOM killer does to it when the engine's memory runs out.
    process.kill(executor!, 'SIGKILL');
    const r = await runaway;
    expect(r.status).toBe(500);
    expect(r.body.error.code).toBe('statement_aborted');
    expect((await sql(engine, { sql: 'SELECT v FROM t' })).results[0].rows).toEqual([['committed']]);
    expect((await stopEngine(engine)).code).toBe(0);
  });
});

describe('the option', () => {
  it('is refused unless a positive integer', async () => {
    const { dataDir } = await initDataDir();
    for (const value of ['0', '-1', 'soon', '1.5']) {
      const r = await cli(['serve', '--data-dir', dataDir, '--listen', '127.0.0.1:0', '--statement-timeout-ms', value]);
      expect(r.code, value).toBe(2);
      expect(r.json.error.code).toBe('bad_arguments');
    }
  });
});
