/**
 * The sweep of `s3` blobs no catalog row references (docs/storage.md "Nothing lost" 8), against
 * s3rver and DynamoDB Local: an unreferenced blob older than the age rule is removed; a blob a row
 * names, and an unreferenced one younger than the rule (a PUT whose flip may be still to come), stay.
 * Replaced and deleted objects' blobs are removed after the answer on `s3` as on `fs`.
 */
import { ListObjectsV2Command, PutObjectCommand } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createS3Client, s3KeyOf } from '../../shared/blobs/s3.ts';
import { loadSettings } from '../../shared/config.ts';
import { sweepUnreferencedS3Blobs } from '../../host-agent/blobs/s3-sweep.ts';
import { s3TestSettings } from '../setup/s3rver.ts';
import { signup, startTestService, type TestService } from '../helpers/service.ts';

let svc: TestService;
let token: string;
let prj: string;

beforeAll(async () => {
  svc = await startTestService(s3TestSettings(inject('s3Endpoint')));
  ({ token } = await signup(svc));
  const r = await svc.request('POST', '/v0/projects', { token, body: { name: 's3-sweep' } });
  prj = ((await r.json()) as { id: string }).id;
  expect((await svc.request('PUT', `/v0/projects/${prj}/storage/buckets/sweep`, { token })).status).toBe(201);
});
afterAll(() => svc?.stop());

describe('the s3 sweep', () => {
  it('removes old unreferenced blobs only; replaced and deleted objects leave no blob', async () => {
    const settings = loadSettings(svc.env);
    const client = createS3Client(settings);
    const blobs = async () => {
      const page = await client.send(new ListObjectsV2Command({ Bucket: settings.SVCD_S3_BUCKET, Prefix: s3KeyOf(prj, '') }));
      return (page.Contents ?? []).map((o) => o.Key!.slice(s3KeyOf(prj, '').length)).sort();
    };
    const put = (key: string, body: string) => svc.request('PUT', `/v0/projects/${prj}/storage/objects/sweep/${key}`, { token, body, headers: { 'content-type': 'text/plain' } });
    expect((await put('kept', 'one')).status).toBe(201);
    expect((await put('kept', 'two')).status).toBe(200);
    expect((await put('gone', 'three')).status).toBe(201);
    expect((await svc.request('DELETE', `/v0/projects/${prj}/storage/objects/sweep/gone`, { token })).status).toBe(200);
    const row = (await (await svc.request('GET', `/v0/projects/${prj}/storage/objects?bucket=sweep`, { token })).json()) as { objects: { blob?: string }[] };
    expect(row.objects).toHaveLength(1);
    // The replaced blob goes after the answer: one blob left, the row's.
    await expect.poll(blobs).toHaveLength(1);
    const [referenced] = await blobs();

    const orphan = 'a'.repeat(64);
    await client.send(new PutObjectCommand({ Bucket: settings.SVCD_S3_BUCKET, Key: s3KeyOf(prj, orphan), Body: 'left by a crash' }));
    const agentId = svc.agent.ctx.agentId;
    // Younger than the age rule: kept.
    expect((await sweepUnreferencedS3Blobs(settings, svc.db, agentId, 3_600_000, Date.now())).removed).toEqual([]);
    expect(await blobs()).toEqual([referenced, orphan].sort());
    // Older: the unreferenced one goes, the row's stays.
    const swept = await sweepUnreferencedS3Blobs(settings, svc.db, agentId, 0, Date.now() + 60_000);
    expect(swept).toEqual({ removed: [`${prj}/${orphan}`], failed: [] });
    expect(await blobs()).toEqual([referenced]);
    // Another agent's sweep leaves this project alone.
    await client.send(new PutObjectCommand({ Bucket: settings.SVCD_S3_BUCKET, Key: s3KeyOf(prj, orphan), Body: 'again' }));
    expect((await sweepUnreferencedS3Blobs(settings, svc.db, 'agt_0000000000000000', 0, Date.now() + 60_000)).removed).toEqual([]);
    client.destroy();
  });
});
