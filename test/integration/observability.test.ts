/**
 * Observability (docs/observability.md): the engine-logs route and its authorization, the agent's
 * Prometheus exposition after a short workload, and no secret in any log line or file.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { routeTable } from '../../handlers/index.ts';
import { startTestService, signup, type TestService } from '../helpers/service.ts';
import { tempDir } from '../helpers/env.ts';

let svc: TestService;
let owner: { token: string; accountId: string; secret: string };
let other: { token: string };
let project: string;
let key: string;
let keyId: string;

async function jsonOf(r: Response): Promise<any> {
  return r.json();
}

async function v2(path: string, body?: unknown): Promise<Response> {
  return fetch(`${svc.agent.dataplaneUrl}/v2/${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { authorization: `Bearer ${key}`, 'x-svc-protocol-minor': '3', 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

beforeAll(async () => {
  svc = await startTestService();
  owner = await signup(svc);
  other = await signup(svc);
  const p = await jsonOf(await svc.request('POST', '/v0/projects', { token: owner.token, body: { name: 'observed' } }));
  project = p.id;
  const k = await jsonOf(await svc.request('POST', `/v0/projects/${project}/keys`, { token: owner.token, body: { label: 'ci' } }));
  key = k.key;
  keyId = k.key_id;
});

afterAll(async () => {
  await svc?.stop();
});

describe('GET /v0/projects/{id}/logs', () => {
  it('answers no lines for a tenant that never ran, and never wakes it', async () => {
    const r = await svc.request('GET', `/v0/projects/${project}/logs`, { token: owner.token });
    expect(r.status).toBe(200);
    expect(await r.json()).toEqual({ project, lines: [] });
    const p = await jsonOf(await svc.request('GET', `/v0/projects/${project}`, { token: owner.token }));
    expect(p.state).toBe('stopped');
  });

  it('answers the last lines of the engine log, oldest first, bounded by tail', async () => {
    expect((await svc.request('POST', `/v0/projects/${project}/wakeup`, { token: owner.token })).status).toBe(200);
    const all = (await jsonOf(await svc.request('GET', `/v0/projects/${project}/logs?tail=1000`, { token: owner.token }))).lines as string[];
    expect(all.some((l) => l.includes('engine serving on'))).toBe(true);
    const two = (await jsonOf(await svc.request('GET', `/v0/projects/${project}/logs?tail=2`, { token: owner.token }))).lines as string[];
    expect(two).toEqual(all.slice(-2));
  });

  it('streams new lines with follow=1 until the client leaves', async () => {
    const abort = new AbortController();
    const r = await svc.request('GET', `/v0/projects/${project}/logs?tail=1&follow=1`, { token: owner.token, headers: {} });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const reader = r.body!.getReader();
    const seen: string[] = [];
    const reading = (async () => {
      const decoder = new TextDecoder();
      let text = '';
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        text += decoder.decode(value, { stream: true });
        for (const m of text.matchAll(/event: line\ndata: (.*)\n\n/g)) seen.push(JSON.parse(m[1]!));
        if (seen.some((l) => l.includes('stopping engine'))) return;
      }
    })();
    expect((await svc.request('POST', `/v0/projects/${project}/sleep`, { token: owner.token })).status).toBe(200);
    await Promise.race([reading, new Promise((_, fail) => setTimeout(() => fail(new Error(`no new line in 10 s: ${seen.join(' | ')}`)), 10_000))]);
    await reader.cancel();
    abort.abort();
    expect(seen.length).toBeGreaterThanOrEqual(2);
  });

  it('refuses a bad tail or follow naming it, and any other parameter', async () => {
    for (const q of ['tail=0', 'tail=10001', 'tail=abc', 'follow=yes', 'lines=5']) {
      const r = await svc.request('GET', `/v0/projects/${project}/logs?${q}`, { token: owner.token });
      expect(r.status, q).toBe(400);
      expect((await r.json()).error.message).toMatch(new RegExp(`^${q.split('=')[0]}: `));
    }
  });

  it('is for the owner session only: none 401, a project key 401, another account 404', async () => {
    const path = `/v0/projects/${project}/logs`;
    const none = await svc.request('GET', path);
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toBe('Bearer realm="svc-cloud"');
    expect((await svc.request('GET', path, { token: key })).status).toBe(401);
    expect((await svc.request('GET', path, { token: other.token })).status).toBe(404);
    expect((await svc.request('GET', `/v0/projects/prj_0000000000000000/logs`, { token: owner.token })).status).toBe(404);
    expect((await svc.request('GET', path, { token: owner.token })).status).toBe(200);
  });
});

describe('the agent\'s metrics', () => {
  it('show a non-zero figure for every family after a short workload', async () => {
    // Workload: wakeup, /v2 traffic, a realtime delivery, object bytes, sleep, snapshot, restore.
    expect((await svc.request('POST', `/v0/projects/${project}/wakeup`, { token: owner.token })).status).toBe(200);
    expect((await v2('capabilities')).status).toBe(200);
    expect((await v2('sql', { sql: 'CREATE TABLE t (x INTEGER)' })).status).toBe(200);
    const sub = await svc.request('GET', `/v0/projects/${project}/realtime/subscribe?channel=m`, { token: owner.token });
    expect(sub.status).toBe(200);
    expect((await svc.request('POST', `/v0/projects/${project}/realtime/publish`, { token: owner.token, body: { channel: 'm', event: 'e', payload: 1 } })).status).toBe(200);
    await sub.body!.cancel();
    expect((await svc.request('PUT', `/v0/projects/${project}/storage/buckets/metrics`, { token: owner.token })).status).toBe(201);
    const put = await svc.app.fetch(
      new Request(`http://svc.test/v0/projects/${project}/storage/objects/metrics/a.txt`, { method: 'PUT', headers: { authorization: `Bearer ${owner.token}` }, body: 'hello bytes' }),
    );
    expect(put.status).toBe(201);
    expect((await svc.request('POST', `/v0/projects/${project}/sleep`, { token: owner.token })).status).toBe(200);
    const snap = await svc.request('POST', `/v0/projects/${project}/snapshots`, { token: owner.token, body: {} });
    expect(snap.status).toBe(201);
    const restored = await svc.request('POST', `/v0/projects/${project}/restore`, { token: owner.token, body: { snapshot_id: (await snap.json()).id } });
    expect(restored.status).toBe(200);
    await svc.request('POST', `/v0/projects/${project}/wakeup`, { token: owner.token });

    const r = await fetch(`${svc.agent.metricsUrl}/metrics`);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await r.text();
    const value = (series: string) => {
      const line = text.split('\n').find((l) => l.startsWith(`${series} `) || l.startsWith(`${series}{`));
      return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : NaN;
    };
    const sum = (name: string) =>
      text
        .split('\n')
        .filter((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`))
        .reduce((n, l) => n + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
    expect(value('svc_agent_tenants_running')).toBe(1);
    for (const op of ['wakeup', 'sleep', 'snapshot', 'restore']) {
      expect(value(`svc_agent_lifecycle_duration_seconds_count{operation="${op}",outcome="ok"}`), op).toBeGreaterThan(0);
    }
    expect(sum('svc_dataplane_requests_total')).toBeGreaterThanOrEqual(2);
    expect(value('svc_dataplane_requests_total{status="200"}')).toBeGreaterThanOrEqual(2);
    expect(value('svc_dataplane_request_duration_seconds_count')).toBeGreaterThanOrEqual(2);
    expect(value('svc_dataplane_received_bytes_total')).toBeGreaterThan(0);
    expect(value('svc_dataplane_sent_bytes_total')).toBeGreaterThan(0);
    expect(value('svc_dataplane_key_cache_hits_total')).toBeGreaterThan(0);
    expect(value('svc_dataplane_key_cache_misses_total')).toBeGreaterThan(0);
    expect(text).toMatch(/^svc_realtime_subscribers \d+$/m);
    expect(value('svc_realtime_deliveries_total')).toBeGreaterThan(0);
    expect(text).toMatch(/^svc_realtime_overflow_disconnects_total \d+$/m);
    expect(value('svc_blob_written_bytes_total')).toBeGreaterThanOrEqual('hello bytes'.length);
    expect(text).toContain('# TYPE svc_function_invocations_total counter');
    expect(value('process_cpu_user_seconds_total')).toBeGreaterThan(0);
    // Nothing labelled by project: the series count does not grow with projects.
    expect(text).not.toContain(project);
    // The Prometheus text format, line by line (promtool below, where it is installed).
    for (const line of text.split('\n')) {
      if (line === '' || line.startsWith('# HELP ') || line.startsWith('# TYPE ')) continue;
      expect(line).toMatch(/^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})? -?(\d+(\.\d+)?(e[-+]?\d+)?|NaN|\+Inf|-Inf)$/);
    }
    const promtool = spawnSync('promtool', ['--version'], { stdio: 'ignore' });
    if (promtool.error === undefined && promtool.status === 0) {
      const dir = tempDir('metrics-');
      try {
        const file = join(dir.dir, 'metrics.txt');
        writeFileSync(file, text);
        execFileSync('sh', ['-c', `promtool check metrics < "${file}"`], { stdio: 'pipe' });
      } finally {
        dir.cleanup();
      }
    }
  });

  it('serve only GET /metrics on their listener', async () => {
    expect((await fetch(`${svc.agent.metricsUrl}/`)).status).toBe(404);
    expect((await fetch(`${svc.agent.metricsUrl}/metrics`, { method: 'POST' })).status).toBe(404);
  });
});

describe('logs', () => {
  it('carry one structured line per request: id, method, route pattern, status, duration, project and account', async () => {
    const r = await svc.request('GET', `/v0/projects/${project}`, { token: owner.token });
    const id = r.headers.get('x-request-id')!;
    const line = svc.logs.find((l) => l.startsWith('request ') && l.includes(id));
    expect(line).toBeDefined();
    const fields = JSON.parse(line!.slice('request '.length));
    expect(fields).toMatchObject({ event: 'request', request_id: id, method: 'GET', route: '/v0/projects/:id', status: 200, project_id: project, account_id: owner.accountId });
    expect(typeof fields.duration_ms).toBe('number');
  });

  it('never carry a credential or a secret value, whatever route is driven (0 markers in lines and files)', async () => {
    const value = 'MARKER-secret-value-7f3a9c';
    const inviteMarker = 'MARKER-invite-5d1e';
    const cursor = 'MARKER-cursor-0b2c';
    const markers = [owner.token, owner.secret, key, key.slice(key.lastIndexOf('_') + 1), value, inviteMarker, other.token];
    // Every route of the table, with credentials in every place they may go and the markers in every body field.
    const fill = (pattern: string) =>
      pattern
        .replace(':id', project)
        .replace(':key_id', keyId)
        .replace(':snapshot_id', 'snap_0000000000000000')
        .replace(':bucket', 'metrics')
        .replace(':key+', 'leak/a.txt')
        .replace(':name', 'LEAK_SECRET')
        .replace(/:[a-z_]+\+?/g, 'x');
    const body = { value, account_secret: owner.secret, account_id: owner.accountId, invite_code: inviteMarker, label: value, name: value, channel: 'leak', event: 'e', payload: { token: owner.token, value }, bucket: 'metrics', key: 'leak/a.txt', snapshot_id: value };
    for (const [method, pattern] of routeTable()) {
      const path = `${fill(pattern)}?cursor=${cursor}`;
      for (const token of [owner.token, key, other.token]) {
        const init: RequestInit = { method, headers: { authorization: `Bearer ${token}`, cookie: `session=${owner.token}`, 'x-svc-project': project, 'content-type': 'application/json' } };
        if (method !== 'GET' && method !== 'HEAD') init.body = JSON.stringify(body);
        const r = await svc.app.fetch(new Request(`http://svc.test${path}`, init));
        if (r.headers.get('content-type')?.startsWith('text/event-stream')) await r.body?.cancel();
        else await r.arrayBuffer();
      }
    }
    // The data plane too, with the key, a session token and a wrong secret.
    await v2('sql', { sql: `SELECT '${value.slice(0, 0)}1'` });
    await fetch(`${svc.agent.dataplaneUrl}/v2/capabilities`, { headers: { authorization: `Bearer ${owner.token}`, 'x-svc-protocol-minor': '3' } });
    await fetch(`${svc.agent.dataplaneUrl}/v2/capabilities`, { headers: { authorization: `Bearer ${key.slice(0, -4)}beef`, 'x-svc-protocol-minor': '3' } });

    const found: string[] = [];
    const lines = svc.logs.join('\n');
    for (const m of markers) if (lines.includes(m)) found.push(`log line: ${m.slice(0, 12)}…`);
    // Every file the agent wrote (engine logs, records), bar the engine's own database files.
    const walk = (dir: string): string[] =>
      readdirSync(dir).flatMap((name) => {
        const full = join(dir, name);
        return statSync(full).isDirectory() ? walk(full) : [full];
      });
    for (const file of walk(svc.env.SVCD_ROOT!)) {
      if (/\/(data|blobs|snapshots)\//.test(file) || /\.(db|sqlite|wal|shm)$/.test(file)) continue;
      const text = readFileSync(file, 'latin1');
      for (const m of markers) if (text.includes(m)) found.push(`${file}: ${m.slice(0, 12)}…`);
    }
    expect(found).toEqual([]);
    // And the lines exist: the routes were driven.
    expect(svc.logs.filter((l) => l.startsWith('request ')).length).toBeGreaterThan(routeTable().length * 2);
  });
});
