/**
 * A crash during a tenant's first wakeup (docs/lifecycle.md "Starting an engine", "States"): the host
 * agent runs as its own process (`bin/svc-agent`) and is SIGKILLed while `engine init` runs; the init
 * may finish on its own afterwards. The tenant stays `stopped` without a data directory, head and
 * snapshot answer 409 `tenant_not_running`, and the next wakeup initialises it. A data directory that
 * exists while `stopped` is recorded (a crash after init, before the state write) is recorded
 * `sleeping` at start.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Layout } from '../../host-agent/tenants/layout.ts';
import type { Db } from '../../shared/db/client.ts';
import { getProject } from '../../shared/db/projects.ts';
import { tempDir } from '../helpers/env.ts';
import { ChildAgent, processesWith, startChildDeployment, type ChildDeployment } from '../helpers/child-agent.ts';
import { ENGINE, call, engineSql, fakeEngine, sleep, wake, waitFor, type Api } from '../helpers/lifecycle.ts';

let d: ChildDeployment;
let agent: ChildAgent;
let db: Db;
let layout: Layout;
let bin: { dir: string; cleanup: () => void };
let slowEngine: string;
let token: string;
const api: Api = { request: (...args) => d.api.request(...args) };

beforeAll(async () => {
  bin = tempDir('svc-first-start-bin-');
  // The real engine, with `init` one second slower: time to SIGKILL the agent while it runs.
  slowEngine = fakeEngine(bin.dir, 'slow-init-engine', { commands: { init: 'sleep 1' } });
  d = await startChildDeployment('svc-first-start-', { SVCD_ENGINE_BIN: slowEngine });
  ({ agent, db, layout, token } = d);
});

afterAll(async () => {
  await d?.stop();
  bin?.cleanup();
});

async function newProject(): Promise<string> {
  const r = await call(api, 'POST', '/v0/projects', token, { name: 'first-start' });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body.id as string;
}

/** Waits until no engine command (one-shot or wrapper) works for `projectId` any more. */
async function orphansSettled(projectId: string): Promise<void> {
  const settled = await waitFor(() => processesWith(projectId).filter((pid) => !processesWith('serve', projectId).includes(pid)).length === 0, 15_000);
  expect(settled).toBe(true);
}

describe('a crash during a first wakeup', () => {
  it('leaves the tenant stopped without a data directory; head and snapshot answer 409; the next wakeup initialises it', async () => {
    const id = await newProject();
    const pending = call(api, 'POST', `/v0/projects/${id}/wakeup`, token);
    expect(await waitFor(() => processesWith(slowEngine, 'init', id).length > 0, 10_000, 2)).toBe(true);
    await agent.kill9();
    await pending;
    // The orphaned init finishes on its own; only then does the agent come back.
    await orphansSettled(id);
    await agent.start();

    expect((await getProject(db, id))!.state).toBe('stopped');
    expect(existsSync(layout.dataDir(id))).toBe(false);
    expect((await call(api, 'GET', `/v0/projects/${id}`, token)).body.state).toBe('stopped');
    const head = await call(api, 'GET', `/v0/projects/${id}/head`, token);
    expect(head.status, JSON.stringify(head.body)).toBe(409);
    expect(head.body.error.code).toBe('tenant_not_running');
    const snap = await call(api, 'POST', `/v0/projects/${id}/snapshots`, token, {});
    expect(snap.status, JSON.stringify(snap.body)).toBe(409);
    expect(snap.body.error.code).toBe('tenant_not_running');

    await wake(api, token, id);
    const address = (await call(api, 'GET', `/v0/projects/${id}/head`, token)).body.endpoint.address;
    expect((await engineSql(address, 'CREATE TABLE t (v TEXT)')).status).toBe(200);
    await sleep(api, token, id);
    const asleep = await call(api, 'GET', `/v0/projects/${id}/head`, token);
    expect(asleep.status).toBe(200);
    expect(asleep.body.source).toBe('offline_status');
    expect(readdirSync(layout.tenantDir(id)).filter((n) => n !== 'data')).toEqual([]);
  });

  it('a data directory recorded as stopped (a crash after init, before the state write) is recorded sleeping at start', async () => {
    const id = await newProject();
    await agent.kill9();
    const init = spawnSync(ENGINE, ['init', '--data-dir', layout.dataDir(id), '--json']);
    expect(init.status, init.stdout.toString()).toBe(0);
    await agent.start();

    // Corrected at start, before anyone asks.
    expect((await getProject(db, id))!.state).toBe('sleeping');
    const head = await call(api, 'GET', `/v0/projects/${id}/head`, token);
    expect(head.status, JSON.stringify(head.body)).toBe(200);
    expect(head.body).toMatchObject({ state: 'sleeping', source: 'offline_status' });
  });
});

