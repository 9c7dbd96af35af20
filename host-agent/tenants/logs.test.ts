/** Per-tenant logs: size rotation keeps the live file bounded and an engine's O_APPEND fd working. */
import { closeSync, existsSync, readFileSync, statSync, writeSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { tempDir } from '../../test/helpers/env.ts';
import { layoutOf } from './layout.ts';
import { LOG_KEEP, TenantLogs } from './logs.ts';
import { PortPool, portIsFree } from './ports.ts';
import { createServer, type Server } from 'node:net';
import { freePort } from '../../infra/local/dynamodb.ts';

const P = 'prj_0123456789abcdef';
let cleanup: (() => void) | undefined;
afterEach(() => cleanup?.());

function logs(maxBytes: number): TenantLogs {
  const t = tempDir('svc-logs-');
  cleanup = t.cleanup;
  return new TenantLogs(layoutOf(t.dir), maxBytes);
}

describe('TenantLogs', () => {
  it('rotates by size into numbered generations and keeps at most LOG_KEEP of them', () => {
    const l = logs(1024);
    for (let i = 0; i < 40; i++) l.append(P, `line ${i} ${'x'.repeat(200)}`);
    expect(statSync(l.path(P)).size).toBeLessThanOrEqual(1024 + 300);
    for (let g = 1; g <= LOG_KEEP; g++) expect(existsSync(`${l.path(P)}.${g}`)).toBe(true);
    expect(existsSync(`${l.path(P)}.${LOG_KEEP + 1}`)).toBe(false);
    expect(readFileSync(l.path(P), 'utf8')).toContain('line 39');
  });

  it('an engine writing through its own O_APPEND descriptor keeps writing into the live file after rotation', () => {
    const l = logs(1024);
    const fd = l.openAppend(P);
    try {
      writeSync(fd, `${'y'.repeat(2000)}\n`);
      expect(l.rotateIfNeeded(P)).toBe(true);
      writeSync(fd, 'after rotation\n');
    } finally {
      closeSync(fd);
    }
    expect(readFileSync(l.path(P), 'utf8')).toBe('after rotation\n');
    expect(readFileSync(`${l.path(P)}.1`, 'utf8')).toContain('yyyy');
  });
});

describe('PortPool', () => {
  it('hands each port out once and skips ports another program holds', async () => {
    const { holder, held } = await holdPortBeforeFreeOne();
    try {
      expect(await portIsFree('127.0.0.1', held)).toBe(false);
      const pool = new PortPool([held, held + 1]);
      const got = await pool.acquire();
      expect(got).toBe(held + 1);
      await expect(pool.acquire()).rejects.toMatchObject({ code: 'orchestrator_unavailable' });
      pool.release(got);
      expect(await pool.acquire()).toBe(held + 1);
    } finally {
      holder.close();
    }
  });
});

/**
 * A port held by "another program" with the next one free, both from below the kernel's ephemeral
 * range (infra/local/dynamodb.ts freePort), so nothing binding port 0 meanwhile can take the free one.
 */
async function holdPortBeforeFreeOne(): Promise<{ holder: Server; held: number }> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const held = await freePort();
    const holder = createServer();
    const bound = await new Promise<boolean>((r) => {
      holder.once('error', () => r(false));
      holder.listen(held, '127.0.0.1', () => r(true));
    });
    if (!bound) continue;
    if (held < 65535 && (await portIsFree('127.0.0.1', held + 1))) return { holder, held };
    holder.close();
  }
  throw new Error('no port with a free neighbour found');
}
