/**
 * How the lifecycle fails (docs/lifecycle.md "Starting an engine", "Pin check"): the pin check before each start, port
 * exhaustion, an engine that never gets ready, exits early or does not answer its capabilities probe,
 * per-project serialisation that never makes another project wait, and engine output kept in the
 * tenant log, never echoed to the client. The engine binary is a setting, so these run against small
 * fakes that delegate everything else to the real engine.
 */
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../infra/local/dynamodb.ts';
import { getProject } from '../../shared/db/projects.ts';
import { tempDir } from '../helpers/env.ts';
import { signup, startTestService, type TestService } from '../helpers/service.ts';
import { ENGINE, call, createProject, fakeEngine, pidAlive, sleep, wake, waitFor } from '../helpers/lifecycle.ts';

const bins = tempDir('svc-fake-engine-');

/**
 * A fake whose `serve` behaves by the `mode` file in the tenant directory: `hang` (never ready),
 * `exit` (fails at once, saying things only the log may hear), `noprobe` (prints a ready line but
 * does not listen); anything else is the real engine.
 */
const MODAL_SERVE = `mode=$(cat "$3/../mode" 2>/dev/null)
case "$mode" in
  hang) exec sleep 30 ;;
  exit) echo '{"error":{"code":"internal","message":"engine-detail-for-the-log-only"}}'; echo "stderr-detail-for-the-log-only" >&2; exit 1 ;;
  noprobe) echo "{\\"ready\\":true,\\"listen\\":\\"$5\\",\\"pid\\":$$,\\"data_dir\\":\\"$3\\"}"; exec sleep 30 ;;
esac
exec "${ENGINE}" "$@"`;

let svc: TestService;
let token: string;
let bin: string;

beforeAll(async () => {
  bin = fakeEngine(bins.dir, 'engine', { serve: MODAL_SERVE });
  svc = await startTestService({ SVCD_ENGINE_BIN: bin, SVCD_ENGINE_START_TIMEOUT_MS: '1500', SVCD_ENGINE_STOP_TIMEOUT_MS: '1000' });
  ({ token } = await signup(svc));
});

afterAll(async () => {
  await svc?.stop();
  bins.cleanup();
});

const tenants = () => svc.agent.ctx.tenants;
const setMode = (id: string, mode: string) => writeFileSync(join(tenants().layout.tenantDir(id), 'mode'), mode);

/** A project whose data directory exists (woken once, asleep now), ready for a mode. */
async function initialized(): Promise<string> {
  const id = await createProject(svc, token);
  await wake(svc, token, id);
  await sleep(svc, token, id);
  return id;
}

describe('engine start failures', () => {
  it('an engine without a ready line in time is killed and the answer is 502, the state not running', async () => {
    const id = await initialized();
    setMode(id, 'hang');
    const started = Date.now();
    const r = await call(svc, 'POST', `/v0/projects/${id}/wakeup`, token);
    expect(r.status).toBe(502);
    expect(r.body.error.code).toBe('upstream_unavailable');
    expect(Date.now() - started).toBeGreaterThanOrEqual(1400);
    expect(Date.now() - started).toBeLessThan(5000);
    expect(tenants().liveEndpoint(id)).toBeNull();
    expect(existsSync(tenants().layout.runRecord(id))).toBe(false);
    expect((await getProject(svc.db, id))!.state).toBe('sleeping');
    expect((await call(svc, 'GET', `/v0/projects/${id}`, token)).body.state).toBe('sleeping');
    // The process was killed, not left behind.
    const pid = Number(/engine \(pid (\d+)\) start failed/.exec(readFileSync(tenants().logs.path(id), 'utf8'))?.[1]);
    expect(pid).toBeGreaterThan(0);
    expect(pidAlive(pid)).toBe(false);
  });

  it('an engine that exits before it is ready is 502; what it said goes to the tenant log only', async () => {
    const id = await initialized();
    setMode(id, 'exit');
    const r = await call(svc, 'POST', `/v0/projects/${id}/wakeup`, token);
    expect(r.status).toBe(502);
    expect(r.body.error.code).toBe('upstream_unavailable');
    expect(JSON.stringify(r.body)).not.toMatch(/detail-for-the-log-only/);
    const log = readFileSync(tenants().logs.path(id), 'utf8');
    expect(log).toMatch(/engine-detail-for-the-log-only/);
    expect(log).toMatch(/stderr-detail-for-the-log-only/);
    expect(svc.logs.join('\n')).not.toMatch(/detail-for-the-log-only/);
  });

  it('a ready line without an answered capabilities probe is not ready: 502', async () => {
    const id = await initialized();
    setMode(id, 'noprobe');
    const r = await call(svc, 'POST', `/v0/projects/${id}/wakeup`, token);
    expect(r.status).toBe(502);
    expect(tenants().liveEndpoint(id)).toBeNull();
    // Fixed, it starts normally on the next wakeup.
    setMode(id, 'real');
    await wake(svc, token, id);
  });
});

describe('serialisation', () => {
  it('a slow start of one project never makes another project wait', async () => {
    const slow = await initialized();
    const quick = await initialized();
    setMode(slow, 'hang');
    const t0 = Date.now();
    const slowCall = call(svc, 'POST', `/v0/projects/${slow}/wakeup`, token).then((r) => ({ status: r.status, at: Date.now() - t0 }));
    await new Promise((r) => setTimeout(r, 50));
    const quickCall = await call(svc, 'POST', `/v0/projects/${quick}/wakeup`, token);
    const quickAt = Date.now() - t0;
    expect(quickCall.status).toBe(200);
    const slowResult = await slowCall;
    expect(slowResult.status).toBe(502);
    expect(quickAt).toBeLessThan(slowResult.at);
    expect(quickAt).toBeLessThan(1300);
  });

  it('a GET during a wakeup never answers the early running of an engine that does not get ready', async () => {
    const id = await initialized();
    setMode(id, 'hang');
    const wakeup = call(svc, 'POST', `/v0/projects/${id}/wakeup`, token);
    // The early `running` is written while the engine boots, unmarked: not a state the agent keeps yet.
    const early = await waitFor(async () => {
      const p = await getProject(svc.db, id);
      return p?.state === 'running' ? p : null;
    }, 1400);
    expect(early).toMatchObject({ state: 'running' });
    expect(early!.state_kept).toBeUndefined();
    // So GET asks the agent, which answers once the wakeup is over: never `running`.
    const got = await call(svc, 'GET', `/v0/projects/${id}`, token);
    expect(got.body.state).toBe('sleeping');
    expect((await wakeup).status).toBe(502);
    expect(await getProject(svc.db, id)).toMatchObject({ state: 'sleeping', state_kept: true });
  });

  it('a second operation on the same project waits for the first', async () => {
    const id = await initialized();
    setMode(id, 'hang');
    const t0 = Date.now();
    const wakeup = call(svc, 'POST', `/v0/projects/${id}/wakeup`, token);
    await new Promise((r) => setTimeout(r, 100));
    const head = await call(svc, 'GET', `/v0/projects/${id}/head`, token);
    // head ran after the failed wakeup had finished (≈1.5 s), and saw no engine.
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1400);
    expect(head.body.source).toBe('offline_status');
    expect((await wakeup).status).toBe(502);
  });
});

describe('pin check before each start', () => {
  it('a missing binary, then a wrong version, answer 503 orchestrator_unavailable; the fixed binary is picked up', async () => {
    const id = await initialized();
    const aside = `${bin}.aside`;
    renameSync(bin, aside);
    try {
      let r = await call(svc, 'POST', `/v0/projects/${id}/wakeup`, token);
      expect(r.status).toBe(503);
      expect(r.body.error.code).toBe('orchestrator_unavailable');
      expect(r.body.error.message).not.toContain(bins.dir);
      r = await call(svc, 'GET', `/v0/projects/${id}/head`, token);
      expect(r.status).toBe(503);
      r = await call(svc, 'POST', `/v0/projects/${id}/snapshots`, token, {});
      expect(r.status).toBe(503);

      fakeEngine(bins.dir, 'engine', { version: '3.0.1' });
      r = await call(svc, 'POST', `/v0/projects/${id}/wakeup`, token);
      expect(r.status).toBe(503);
      expect(r.body.error.code).toBe('orchestrator_unavailable');
      expect(svc.agent.ctx.pin.ok).toBe(false);
      // Sleep needs no engine binary.
      await sleep(svc, token, id);
    } finally {
      renameSync(aside, bin);
    }
    await wake(svc, token, id);
    expect(svc.agent.ctx.pin.ok).toBe(true);
  });
});

describe('ports', () => {
  it('an exhausted port range answers 503 orchestrator_unavailable; a freed port is used again', async () => {
    const port = await freePort();
    const small = await startTestService({ SVCD_ENGINE_PORTS: `${port}-${port}` });
    try {
      const { token: t } = await signup(small);
      const a = await createProject(small, t);
      const b = await createProject(small, t);
      await wake(small, t, a);
      expect(small.agent.ctx.tenants.liveEndpoint(a)).toEqual({ host: '127.0.0.1', port });
      const r = await call(small, 'POST', `/v0/projects/${b}/wakeup`, t);
      expect(r.status).toBe(503);
      expect(r.body.error.code).toBe('orchestrator_unavailable');
      expect((await getProject(small.db, b))!.state).toBe('stopped');
      await sleep(small, t, a);
      await wake(small, t, b);
      expect(small.agent.ctx.tenants.liveEndpoint(b)).toEqual({ host: '127.0.0.1', port });
    } finally {
      await small.stop();
    }
  });
});

