/**
 * The directory lock (docs/engine.md "The directory lock"): serve holds it; status, backup and a second serve refuse with exit 3
 * while it is held; a lock left by a killed serve is taken over.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Engine } from '../test/helpers/engine.ts';
import { ServeRefused, cleanup, cli, initDataDir, startEngine, stopEngine, tempDir } from '../test/helpers/engine.ts';

afterAll(cleanup);

describe('while serve runs', () => {
  let engine: Engine;
  beforeAll(async () => {
    const { dataDir } = await initDataDir();
    engine = await startEngine(dataDir);
  });
  afterAll(async () => {
    await stopEngine(engine);
  });

  it('status refuses with exit 3 lock_held, naming the holder', async () => {
    const r = await cli(['status', '--data-dir', engine.dataDir, '--json']);
    expect(r.code).toBe(3);
    expect(r.json).toEqual({ error: { code: 'lock_held', message: expect.stringContaining(`pid ${engine.proc.pid}`) } });
  });

  it('backup refuses with exit 3 and creates no backup', async () => {
    const out = join(await tempDir(), 'snap');
    const r = await cli(['backup', '--data-dir', engine.dataDir, '--out', out, '--json']);
    expect(r.code).toBe(3);
    expect(existsSync(out)).toBe(false);
  });

  it('a second serve refuses with exit 3', async () => {
    const err = await startEngine(engine.dataDir).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ServeRefused);
    expect((err as ServeRefused).code).toBe(3);
    expect((err as ServeRefused).json.error.code).toBe('lock_held');
  });
});

describe('two serves started at the same instant', () => {
  it('exactly one wins', async () => {
    const { dataDir } = await initDataDir();
    const outcomes = await Promise.allSettled([startEngine(dataDir), startEngine(dataDir), startEngine(dataDir)]);
    const winners = outcomes.filter((o) => o.status === 'fulfilled');
    const losers = outcomes.filter((o): o is PromiseRejectedResult => o.status === 'rejected');
    expect(winners).toHaveLength(1);
    for (const l of losers) expect((l.reason as ServeRefused).code).toBe(3);
    await stopEngine((winners[0] as PromiseFulfilledResult<Engine>).value);
  });
});

describe('after serve is SIGKILLed', () => {
  it('the lock it held is taken over by status, then by a new serve', async () => {
    const { dataDir } = await initDataDir();
    const engine = await startEngine(dataDir);
    engine.proc.kill('SIGKILL');
    await engine.exited;
    // The dead holder's record is still on disk; it must not stop anyone.
    expect(existsSync(join(dataDir, 'lock-holder.json'))).toBe(true);

    const status = await cli(['status', '--data-dir', dataDir, '--json']);
    expect(status.code).toBe(0);
    const again = await startEngine(dataDir);
    expect(again.ready.pid).toBe(again.proc.pid);
    expect((await stopEngine(again)).code).toBe(0);
  });
});

describe('after serve stops cleanly', () => {
  it('status and backup get the lock', async () => {
    const { dataDir } = await initDataDir();
    const engine = await startEngine(dataDir);
    await stopEngine(engine);
    expect((await cli(['status', '--data-dir', dataDir, '--json'])).code).toBe(0);
    expect((await cli(['backup', '--data-dir', dataDir, '--out', join(await tempDir(), 'b'), '--json'])).code).toBe(0);
  });
});
