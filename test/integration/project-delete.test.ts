/**
 * Renaming and deleting projects (docs/lifecycle.md "Deleting a project", docs/api.md "Decisions"):
 * `PATCH /v0/projects/{id}` and `DELETE /v0/projects/{id}` over HTTP with their authorization
 * matrix; a deleted project is 404 on every `/v0` route that takes its id and its keys are 401 on
 * `/v2` at once; everything it had (keys, buckets, objects and their blobs on both backends,
 * snapshots with their backup directories, previous directories, secrets, its data directory) is
 * gone when the DELETE answers; 409 while a snapshot is being taken; receipts readable at
 * `GET /v0/receipts?project=…` for the retention. Real DynamoDB Local, agent, engine and s3rver.
 */
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { buildDeps } from '../../handlers/deps.ts';
import { createApp } from '../../handlers/index.ts';
import { createS3Client } from '../../shared/blobs/s3.ts';
import { loadSettings } from '../../shared/config.ts';
import { getAgent } from '../../shared/db/agents.ts';
import { getProjectDeletion } from '../../shared/db/project-delete.ts';
import { projectSchema } from '../../shared/schemas/projects.ts';
import { lookupKey } from '../../shared/db/keys.ts';
import { keys as tableKeys } from '../../shared/db/table.ts';
import { decodeEnvelope } from '../helpers/envelope.ts';
import { fakeEngine } from '../helpers/lifecycle.ts';
import { tempDir } from '../helpers/env.ts';
import { signup, startTestService, type TestService } from '../helpers/service.ts';
import { SseReader } from '../helpers/sse.ts';
import { S3_TEST_BUCKET, s3TestSettings } from '../setup/s3rver.ts';

interface Answer {
  status: number;
  body: any;
  headers: Headers;
}

async function call(svc: TestService, method: string, path: string, token?: string, body?: unknown, headers?: Record<string, string>): Promise<Answer> {
  const r = await svc.request(method, path, { token, body, headers });
  const text = await r.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // Not JSON (object bytes).
  }
  return { status: r.status, body: parsed, headers: r.headers };
}

async function created(svc: TestService, token: string, name = 'doomed'): Promise<any> {
  const r = await call(svc, 'POST', '/v0/projects', token, { name });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body;
}

async function ok(svc: TestService, method: string, path: string, token: string, body?: unknown): Promise<any> {
  const r = await call(svc, method, path, token, body);
  expect(r.status, `${method} ${path}: ${JSON.stringify(r.body)}\n${svc.logs.slice(-5).join('\n')}`).toBeLessThan(300);
  return r.body;
}

/** A `/v2` request with a project key straight to the agent's listener. */
async function v2(svc: TestService, key: string, sql: string): Promise<{ status: number; body: any }> {
  const r = await fetch(`${svc.agent.dataplaneUrl}/v2/sql`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'x-svc-protocol-minor': '3', 'content-type': 'application/json' },
    body: JSON.stringify({ sql, params: [] }),
  });
  const bytes = new Uint8Array(await r.arrayBuffer());
  const isEnvelope = r.headers.get('content-type')?.includes('product') ?? false;
  return { status: r.status, body: isEnvelope ? decodeEnvelope(bytes) : JSON.parse(new TextDecoder().decode(bytes)) };
}

/** The sort keys left in the project's partition (read in the test only, to check what remains). */
async function partition(svc: TestService, projectId: string): Promise<string[]> {
  const out = await svc.db.doc.send(
    new QueryCommand({
      TableName: svc.db.table,
      KeyConditionExpression: 'pk = :pk',
      ExpressionAttributeValues: { ':pk': tableKeys.project(projectId).pk },
      ConsistentRead: true,
    }),
  );
  return (out.Items ?? []).map((i) => String(i.sk));
}

/** A value each path parameter accepts, so a route answers by ownership (the project's id given). */
function pathOf(pattern: string, projectId: string): string {
  const values: Record<string, string> = {
    id: projectId,
    key_id: 'a'.repeat(32),
    snapshot_id: 'snap_0123456789abcdef',
    bucket: 'bucket-one',
    'key+': 'dir/file.txt',
    upload: 'upl_0123456789abcdef',
  };
  return pattern.replace(/:([\w]+\+?)/g, (_m, name: string) => {
    if (name === 'name') return pattern.includes('/secrets/') ? 'SECRET_NAME' : '20260101T000000000Z-snap_0123456789abcdef';
    return values[name] ?? 'x';
  });
}

describe('project rename and delete', () => {
  let svc: TestService;
  let token: string;
  let other: string;

  beforeAll(async () => {
    svc = await startTestService();
    token = (await signup(svc)).token;
    other = (await signup(svc)).token;
  }, 60_000);
  afterAll(() => svc?.stop());

  describe('PATCH /v0/projects/{id}', () => {
    it('renames, answers the project as GET does, and keeps the name exactly as given', async () => {
      const p = await created(svc, token, 'before');
      await new Promise((r) => setTimeout(r, 5));
      const r = await call(svc, 'PATCH', `/v0/projects/${p.id}`, token, { name: '  after é  ' });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(Object.keys(r.body).sort()).toEqual(Object.keys(projectSchema.shape).sort());
      expect(r.body).toMatchObject({ id: p.id, name: '  after é  ', state: 'stopped', created_at: p.created_at, native: p.native });
      expect(Date.parse(r.body.updated_at)).toBeGreaterThan(Date.parse(p.updated_at));
      const read = await call(svc, 'GET', `/v0/projects/${p.id}`, token);
      expect(read.body).toEqual(r.body);
      const listed = await call(svc, 'GET', '/v0/projects?limit=1000', token);
      expect(listed.body.projects.find((x: any) => x.id === p.id).name).toBe('  after é  ');
    });

    it('refuses a name the creation rule refuses, naming the field, and changes nothing', async () => {
      const p = await created(svc, token, 'kept');
      const bad: unknown[] = [{}, { name: '' }, { name: ' \u3000 ' }, { name: 'x'.repeat(65) }, { name: 'a\u0007b' }, { name: null }, { name: 7 }];
      for (const body of bad) {
        const r = await call(svc, 'PATCH', `/v0/projects/${p.id}`, token, body);
        expect(r.status, JSON.stringify(body)).toBe(400);
        expect(r.body.error.code).toBe('invalid_request');
        expect(r.body.error.message).toMatch(/^name: /);
      }
      const unknown = await call(svc, 'PATCH', `/v0/projects/${p.id}`, token, { name: 'x', state: 'running' });
      expect(unknown.status).toBe(400);
      expect(unknown.body.error.message).toBe('state: is not a known field');
      const query = await call(svc, 'PATCH', `/v0/projects/${p.id}?force=1`, token, { name: 'x' });
      expect(query.status).toBe(400);
      expect(query.body.error.message).toMatch(/^force: /);
      expect((await call(svc, 'GET', `/v0/projects/${p.id}`, token)).body.name).toBe('kept');
    });

    it('answers 401 without a session or with a project key, 404 to another account, 400 for a malformed id', async () => {
      const p = await created(svc, token, 'mine');
      const key = (await ok(svc, 'POST', `/v0/projects/${p.id}/keys`, token, {})).key as string;
      const anonymous = await call(svc, 'PATCH', `/v0/projects/${p.id}`, undefined, { name: 'x' });
      expect(anonymous.status).toBe(401);
      expect(anonymous.headers.get('www-authenticate')).toBe('Bearer realm="svc-cloud"');
      const byKey = await call(svc, 'PATCH', `/v0/projects/${p.id}`, key, { name: 'x' });
      expect(byKey.status).toBe(401);
      const stranger = await call(svc, 'PATCH', `/v0/projects/${p.id}`, other, { name: 'x' });
      expect(stranger.status).toBe(404);
      expect(stranger.body.error.code).toBe('not_found');
      const nobody = await call(svc, 'PATCH', '/v0/projects/prj_ffffffffffffffff', other, { name: 'x' });
      expect([nobody.status, nobody.body.error.code]).toEqual([404, 'not_found']);
      const malformed = await call(svc, 'PATCH', '/v0/projects/prj_nothex', token, { name: 'x' });
      expect(malformed.status).toBe(400);
      expect(malformed.body.error.message).toMatch(/^id: /);
      expect((await call(svc, 'GET', `/v0/projects/${p.id}`, token)).body.name).toBe('mine');
    });
  });

  describe('DELETE /v0/projects/{id}', () => {
    it('answers 401 without a session or with a project key, 404 to another account, 400 for a malformed id or any input', async () => {
      const p = await created(svc, token, 'guarded');
      const key = (await ok(svc, 'POST', `/v0/projects/${p.id}/keys`, token, {})).key as string;
      const anonymous = await call(svc, 'DELETE', `/v0/projects/${p.id}`);
      expect(anonymous.status).toBe(401);
      expect(anonymous.headers.get('www-authenticate')).toBe('Bearer realm="svc-cloud"');
      expect((await call(svc, 'DELETE', `/v0/projects/${p.id}`, key)).status).toBe(401);
      const stranger = await call(svc, 'DELETE', `/v0/projects/${p.id}`, other);
      expect(stranger.status).toBe(404);
      expect(stranger.body.error.code).toBe('not_found');
      expect((await call(svc, 'DELETE', '/v0/projects/prj_XYZ', token)).status).toBe(400);
      expect((await call(svc, 'DELETE', `/v0/projects/${p.id}`, token, { force: true })).status).toBe(400);
      expect((await call(svc, 'DELETE', `/v0/projects/${p.id}?force=true`, token)).status).toBe(400);
      // A stray `..` after a sub-resource is resolved by URL parsing to `…/{id}/`: never the project.
      for (const path of [`/v0/projects/${p.id}/`, `/v0/projects/${p.id}/replaced/..`, `/v0/projects/${p.id}/snapshots/%2e%2e`]) {
        const slash = await call(svc, 'DELETE', path, token);
        expect(slash.status, path).toBe(404);
        expect(slash.body.error.message).toMatch(/no route/);
      }
      // None of them deleted anything.
      expect((await call(svc, 'GET', `/v0/projects/${p.id}`, token)).status).toBe(200);
    });

    it('removes a running project and everything it had; it is 404 on every route and its keys are 401 on /v2', async () => {
      const p = await created(svc, token, 'full');
      const id = p.id as string;
      const agentBefore = (await getAgent(svc.db, svc.agent.ctx.agentId))!;
      const key = (await ok(svc, 'POST', `/v0/projects/${id}/keys`, token, { label: 'app' })) as { key: string; key_id: string };
      await ok(svc, 'POST', `/v0/projects/${id}/wakeup`, token);
      expect((await v2(svc, key.key, 'CREATE TABLE t (v TEXT)')).status).toBe(200);
      expect((await v2(svc, key.key, "INSERT INTO t VALUES ('a')")).status).toBe(200);
      await ok(svc, 'POST', `/v0/projects/${id}/sleep`, token);
      const snap = await ok(svc, 'POST', `/v0/projects/${id}/snapshots`, token, { label: 'one' });
      const restored = await ok(svc, 'POST', `/v0/projects/${id}/restore`, token, { snapshot_id: snap.id });
      expect(existsSync(restored.replaced_dir)).toBe(true);
      await ok(svc, 'PUT', `/v0/projects/${id}/storage/buckets/bucket-one`, token);
      await ok(svc, 'PUT', `/v0/projects/${id}/storage/objects/bucket-one/dir/file.txt`, token, 'hello');
      await ok(svc, 'POST', `/v0/projects/${id}/storage/uploads`, token, { bucket: 'bucket-one', key: 'pending.bin' });
      await ok(svc, 'PUT', `/v0/projects/${id}/functions/secrets/API_TOKEN`, token, { value: 's3cr3t-value' });
      await ok(svc, 'POST', `/v0/projects/${id}/wakeup`, token);
      expect((await v2(svc, key.key, 'SELECT v FROM t')).status).toBe(200);
      const layout = svc.agent.ctx.tenants.layout;
      const blobDir = join(svc.agent.ctx.root, 'blobs', id);
      for (const dir of [layout.dataDir(id), layout.replacedRoot(id), layout.snapshotRoot(id), blobDir, layout.logDir(id)]) expect(existsSync(dir), dir).toBe(true);

      const r = await call(svc, 'DELETE', `/v0/projects/${id}`, token);
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(Object.keys(r.body).sort()).toEqual(Object.keys(projectSchema.shape).sort());
      expect(r.body).toMatchObject({ id, name: 'full', state: 'sleeping', created_at: p.created_at });

      // The very next /v2 request with its key is 401, with nothing read from anywhere but memory.
      const after = await v2(svc, key.key, 'SELECT v FROM t');
      expect(after.status).toBe(401);
      expect(after.body.error.code).toBe('authentication_required');

      // Every /v0 route that takes the project's id answers 404, as for a project that never existed.
      const routes = svc.app.routes.filter(([, path]) => path.startsWith('/v0/projects/:id'));
      expect(routes.length).toBeGreaterThan(20);
      // TUS discovery (OPTIONS …/storage/resumable) names the server's capabilities whatever the project (docs/storage.md).
      for (const [method, pattern] of routes.filter(([m, p]) => !(m === 'OPTIONS' && p.endsWith('/storage/resumable')))) {
        const body = method === 'GET' || method === 'HEAD' ? undefined : method === 'PUT' && pattern.includes('/objects/') ? 'bytes' : {};
        // A TUS request speaks TUS (its headers are checked before anything is looked up, docs/storage.md).
        const tus = pattern.includes('/storage/resumable')
          ? { 'tus-resumable': '1.0.0', 'upload-length': '1', 'upload-offset': '0', 'upload-metadata': `bucket ${btoa('files')},key ${btoa('k')}`, ...(method === 'PATCH' ? { 'content-type': 'application/offset+octet-stream', 'content-length': '1' } : {}) }
          : undefined;
        const answer = await call(svc, method, pathOf(pattern, id), token, tus ? (method === 'PATCH' ? 'x' : undefined) : body, tus);
        expect(answer.status, `${method} ${pattern}: ${JSON.stringify(answer.body)}`).toBe(404);
        if (method !== 'HEAD') expect(answer.body.error.code).toBe('not_found');
      }
      expect((await call(svc, 'GET', '/v0/projects?limit=1000', token)).body.projects.map((x: any) => x.id)).not.toContain(id);

      // Nothing of it is left: no engine, no directory, no blob, no item but its receipts and its deletion record.
      expect(svc.agent.ctx.tenants.liveEndpoint(id)).toBeNull();
      for (const dir of [layout.tenantDir(id), layout.snapshotRoot(id), blobDir, layout.logDir(id), layout.runRecord(id)]) expect(existsSync(dir), dir).toBe(false);
      const left = await partition(svc, id);
      expect(left.filter((sk) => !sk.startsWith('RCPT#'))).toEqual(['GONE']);
      expect(left.filter((sk) => sk.startsWith('RCPT#')).length).toBeGreaterThanOrEqual(3);
      expect(await lookupKey(svc.db, key.key_id)).toBeNull();
      expect((await getProjectDeletion(svc.db, id))!.state).toBe('deleted');
      expect((await getAgent(svc.db, svc.agent.ctx.agentId))!.tenants).toBe((agentBefore.tenants ?? 0) - 1);
      const me = await call(svc, 'GET', '/v0/me', token);
      if (me.status === 200 && typeof me.body.project_count === 'number') {
        const listed = (await call(svc, 'GET', '/v0/projects?limit=1000', token)).body.projects.length;
        expect(me.body.project_count).toBe(listed);
      }

      // Deleting it again is 404: it is gone.
      expect((await call(svc, 'DELETE', `/v0/projects/${id}`, token)).status).toBe(404);
    }, 60_000);

    it('ends every realtime stream of the project, opened with the session or with a key', async () => {
      const p = await created(svc, token, 'streaming');
      const key = (await ok(svc, 'POST', `/v0/projects/${p.id}/keys`, token, {})).key as string;
      const readers: SseReader[] = [];
      for (const credential of [token, key]) {
        const sub = await svc.request('GET', `/v0/projects/${p.id}/realtime/subscribe?channel=news`, { token: credential });
        expect(sub.status).toBe(200);
        const reader = new SseReader(sub);
        expect(await reader.next()).toEqual({ comment: 'subscribed' });
        readers.push(reader);
      }
      expect((await call(svc, 'DELETE', `/v0/projects/${p.id}`, token)).status).toBe(200);
      for (const reader of readers) {
        let frame = await reader.next(5000);
        while (frame && frame.comment !== undefined) frame = await reader.next(5000);
        expect(frame).toBeNull();
      }
    });

    it('deletes a project that never started, and keeps the other projects whole', async () => {
      const kept = await created(svc, token, 'kept');
      await ok(svc, 'POST', `/v0/projects/${kept.id}/wakeup`, token);
      const p = await created(svc, token, 'never started');
      const r = await call(svc, 'DELETE', `/v0/projects/${p.id}`, token);
      expect(r.status).toBe(200);
      expect(r.body.state).toBe('stopped');
      expect((await call(svc, 'GET', `/v0/projects/${p.id}`, token)).status).toBe(404);
      expect((await call(svc, 'GET', `/v0/projects/${kept.id}`, token)).body.state).toBe('running');
      await ok(svc, 'POST', `/v0/projects/${kept.id}/sleep`, token);
    });

    it('keeps the receipts readable to the owner at GET /v0/receipts?project=…, the deletion among them', async () => {
      const p = await created(svc, token, 'audited');
      await ok(svc, 'PUT', `/v0/projects/${p.id}/storage/buckets/bucket-one`, token);
      await ok(svc, 'PUT', `/v0/projects/${p.id}/storage/objects/bucket-one/a.txt`, token, 'x');
      const live = await call(svc, 'GET', `/v0/receipts?project=${p.id}`, token);
      expect(live.status).toBe(200);
      expect(live.body.receipts.map((x: any) => x.op)).toEqual(['object.put']);

      const del = await call(svc, 'DELETE', `/v0/projects/${p.id}`, token);
      expect(del.status).toBe(200);
      const r = await call(svc, 'GET', `/v0/receipts?project=${p.id}`, token);
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(r.body.receipts.map((x: any) => x.op)).toEqual(['project.delete', 'object.put']);
      const deletion = r.body.receipts[0];
      expect(deletion).toMatchObject({ project: p.id, target: p.id, request_id: del.headers.get('x-request-id') });
      expect(deletion.actor).toMatch(/^acct_/);
      expect(r.body.next_cursor).toBeNull();

      // Paginated like every list.
      const first = await call(svc, 'GET', `/v0/receipts?project=${p.id}&limit=1`, token);
      expect(first.body.receipts).toHaveLength(1);
      const second = await call(svc, 'GET', `/v0/receipts?project=${p.id}&limit=1&cursor=${encodeURIComponent(first.body.next_cursor)}`, token);
      expect(second.body.receipts.map((x: any) => x.op)).toEqual(['object.put']);

      // Not to anyone else, not without a session, not with a bad query; the project route is 404.
      expect((await call(svc, 'GET', `/v0/receipts?project=${p.id}`, other)).status).toBe(404);
      expect((await call(svc, 'GET', `/v0/receipts?project=${p.id}`)).status).toBe(401);
      expect((await call(svc, 'GET', '/v0/receipts?project=prj_ffffffffffffffff', token)).status).toBe(404);
      const missing = await call(svc, 'GET', '/v0/receipts', token);
      expect(missing.status).toBe(400);
      expect(missing.body.error.message).toMatch(/^project: /);
      expect((await call(svc, 'GET', `/v0/receipts?project=${p.id}&bucket=x`, token)).status).toBe(400);
      expect((await call(svc, 'GET', `/v0/projects/${p.id}/receipts`, token)).status).toBe(404);

      // Past the retention they are not readable any more.
      const retention = svc.agent.ctx.settings.SVCD_DELETED_RECEIPTS_RETENTION_DAYS;
      const deps = buildDeps(svc.env, () => {});
      const later = createApp({ ...deps, now: () => Date.now() + (retention + 1) * 24 * 3600 * 1000 });
      const expired = await later.fetch(new Request(`http://svc.test/v0/receipts?project=${p.id}`, { headers: { authorization: `Bearer ${token}` } }));
      expect(expired.status).toBe(404);
    });
  });
});

describe('DELETE while a snapshot is being taken', () => {
  let svc: TestService;
  let token: string;
  const bin = tempDir('svc-delete-bin-');
  const gate = join(bin.dir, 'gate');

  beforeAll(async () => {
    // An engine whose backup waits while the gate exists: a snapshot that lasts as long as the test wants.
    const engine = fakeEngine(bin.dir, 'slow-backup', { commands: { backup: `while [ -e '${gate}' ]; do sleep 0.05; done` } });
    svc = await startTestService({ SVCD_ENGINE_BIN: engine });
    token = (await signup(svc)).token;
  }, 60_000);
  afterAll(async () => {
    await svc?.stop();
    bin.cleanup();
  });

  it('is 409 conflict and leaves the project whole; once the snapshot is recorded, the deletion removes it too', async () => {
    const p = await created(svc, token);
    await ok(svc, 'POST', `/v0/projects/${p.id}/wakeup`, token);
    await ok(svc, 'POST', `/v0/projects/${p.id}/sleep`, token);
    mkdirSync(gate);
    const snapshot = call(svc, 'POST', `/v0/projects/${p.id}/snapshots`, token, {});
    const layout = svc.agent.ctx.tenants.layout;
    for (let i = 0; i < 200 && !svc.agent.ctx.tenants.busyWith(p.id); i++) await new Promise((r) => setTimeout(r, 20));
    expect(svc.agent.ctx.tenants.busyWith(p.id)).not.toBeNull();

    const refused = await call(svc, 'DELETE', `/v0/projects/${p.id}`, token);
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe('conflict');
    expect(refused.body.error.message).toMatch(/snapshot/);
    expect((await call(svc, 'GET', `/v0/projects/${p.id}`, token)).status).toBe(200);

    rmSync(gate, { recursive: true });
    const taken = await snapshot;
    expect(taken.status, JSON.stringify(taken.body)).toBe(201);
    expect(existsSync(layout.backupDir(p.id, taken.body.id))).toBe(true);

    expect((await call(svc, 'DELETE', `/v0/projects/${p.id}`, token)).status).toBe(200);
    expect(existsSync(layout.snapshotRoot(p.id))).toBe(false);
    expect((await call(svc, 'GET', `/v0/projects/${p.id}/snapshots/${taken.body.id}`, token)).status).toBe(404);
  }, 60_000);
});

describe('DELETE on the s3 backend', () => {
  let svc: TestService;
  let token: string;

  beforeAll(async () => {
    svc = await startTestService(s3TestSettings(inject('s3Endpoint')));
    token = (await signup(svc)).token;
  }, 60_000);
  afterAll(() => svc?.stop());

  it('removes every S3 blob under the project, rows and all', async () => {
    const p = await created(svc, token);
    await ok(svc, 'PUT', `/v0/projects/${p.id}/storage/buckets/bucket-one`, token);
    for (const key of ['a', 'b/c', 'd.txt']) await ok(svc, 'PUT', `/v0/projects/${p.id}/storage/objects/bucket-one/${key}`, token, `bytes of ${key}`);
    const s3 = createS3Client(loadSettings(svc.env));
    const listed = async () => (await s3.send(new ListObjectsV2Command({ Bucket: S3_TEST_BUCKET, Prefix: `blobs/${p.id}/` }))).Contents ?? [];
    expect(await listed()).toHaveLength(3);

    expect((await call(svc, 'DELETE', `/v0/projects/${p.id}`, token)).status).toBe(200);
    expect(await listed()).toHaveLength(0);
    expect((await partition(svc, p.id)).filter((sk) => !sk.startsWith('RCPT#'))).toEqual(['GONE']);
    expect((await call(svc, 'GET', `/v0/projects/${p.id}/storage/objects?bucket=bucket-one`, token)).status).toBe(404);
  });
});
