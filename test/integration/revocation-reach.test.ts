/**
 * What a key's revocation and the data plane's body limit reach beyond the /v2 key cache: realtime
 * streams opened with a revoked key end; engines accept bodies up to SVCD_DATAPLANE_MAX_BYTES, so the
 * agent's limit (not the engine's own 1 MiB default) is the one a client meets.
 */
import { Pool } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signup, startTestService, type TestService } from '../helpers/service.ts';
import { SseReader } from '../helpers/sse.ts';

let svc: TestService;
let token: string;
let projectId: string;
beforeAll(async () => {
  svc = await startTestService({ SVCD_DATAPLANE_MAX_BYTES: String(4 * 1024 * 1024) });
  token = (await signup(svc)).token;
  const r = await svc.request('POST', '/v0/projects', { token, body: { name: 'reach' } });
  projectId = ((await r.json()) as { id: string }).id;
}, 60_000);
afterAll(() => svc?.stop());

async function newKey(): Promise<{ key: string; key_id: string }> {
  const r = await svc.request('POST', `/v0/projects/${projectId}/keys`, { token, body: {} });
  expect(r.status).toBe(201);
  return (await r.json()) as { key: string; key_id: string };
}

describe('revoking a key', () => {
  it('ends a realtime stream opened with it', async () => {
    const k = await newKey();
    const sub = await svc.request('GET', `/v0/projects/${projectId}/realtime/subscribe?channel=news`, { token: k.key });
    expect(sub.status).toBe(200);
    const sse = new SseReader(sub);
    expect(await sse.next()).toEqual({ comment: 'subscribed' });

    const del = await svc.request('DELETE', `/v0/projects/${projectId}/keys/${k.key_id}`, { token });
    expect(del.status).toBe(200);

    // Nothing published after the revocation reaches the stream: it has ended.
    await svc.request('POST', `/v0/projects/${projectId}/realtime/publish`, { token, body: { channel: 'news', event: 'after', payload: 1 } });
    let frame = await sse.next(5000);
    while (frame && frame.comment !== undefined) frame = await sse.next(5000);
    expect(frame).toBeNull();
  });
});

describe('the data plane body limit', () => {
  it('lets a 2 MiB statement through to the engine when SVCD_DATAPLANE_MAX_BYTES allows it', async () => {
    const wake = await svc.request('POST', `/v0/projects/${projectId}/wakeup`, { token });
    expect(wake.status).toBe(200);
    const k = await newKey();
    const pool = new Pool(svc.agent.dataplaneUrl);
    try {
      const body = JSON.stringify({ sql: 'SELECT length(?) AS n', params: ['x'.repeat(2 * 1024 * 1024)] });
      const r = await pool.request({
        method: 'POST',
        path: '/v2/sql',
        headers: { authorization: `Bearer ${k.key}`, 'x-svc-protocol-minor': '3', 'content-type': 'application/json' },
        body,
      });
      const bytes = Buffer.from(await r.body.arrayBuffer());
      expect(r.statusCode).toBe(200);
      const answer = JSON.parse(bytes.subarray(12, 12 + bytes.readUInt32BE(8)).toString('utf8'));
      expect(answer.results[0].rows).toEqual([[2 * 1024 * 1024]]);
    } finally {
      await pool.close();
    }
  });
});
