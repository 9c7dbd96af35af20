/**
 * The DynamoDB side of a project's deletion (shared/db/project-delete.ts; docs/lifecycle.md
 * "Deleting a project") over a real table: the commit point's one transaction, the generic purge of
 * the partition (more items than one transaction holds, key lookups with their keys, receipts kept
 * with a time-to-live), its idempotence, and the record's end.
 */
import { QueryCommand, TransactWriteCommand } from '@aws-sdk/lib-dynamodb';
import { beforeAll, describe, expect, it } from 'vitest';
import { getAgent, registerAgent } from '../../shared/db/agents.ts';
import type { Db } from '../../shared/db/client.ts';
import { createKey, lookupKey } from '../../shared/db/keys.ts';
import {
  deletionsOf,
  getProjectDeletion,
  markProjectDeleted,
  markProjectDeleting,
  projectKeyIds,
  purgeProjectItems,
} from '../../shared/db/project-delete.ts';
import { createProject, getProject, type ProjectRecord } from '../../shared/db/projects.ts';
import { newReceipt, putReceipt } from '../../shared/db/receipts.ts';
import { createBucket } from '../../shared/db/storage.ts';
import { TTL_ATTRIBUTE, keys } from '../../shared/db/table.ts';
import { newId, randomHex } from '../../shared/ids.ts';
import { testDeployment } from '../helpers/env.ts';

let db: Db;
const agentId = newId('agt');
const owner = newId('acct');

beforeAll(async () => {
  ({ db } = await testDeployment());
  const at = new Date().toISOString();
  await registerAgent(db, { agent_id: agentId, internal_url: 'http://127.0.0.1:9', dataplane_url: 'http://127.0.0.1:9', capacity: 4, pin_ok: true, engine_version: null, started_at: at, heartbeat_at: at });
});

async function project(): Promise<ProjectRecord> {
  const at = new Date().toISOString();
  const record: ProjectRecord = { id: newId('prj'), name: 'p', state: 'sleeping', created_at: at, updated_at: at, owner, agent_id: agentId };
  await createProject(db, record);
  return record;
}

function receiptOf(projectId: string, op: 'object.put' | 'project.delete') {
  return newReceipt({ project: projectId, op, target: projectId, actor: owner, request_id: 'req_0000000000000001', at: new Date().toISOString() });
}

async function mark(p: ProjectRecord) {
  const at = new Date().toISOString();
  return markProjectDeleting(db, { project: p, at, expiresAt: new Date(Date.now() + 86_400_000).toISOString(), receipt: receiptOf(p.id, 'project.delete') });
}

async function items(projectId: string): Promise<Record<string, any>[]> {
  const found: Record<string, any>[] = [];
  let start: Record<string, unknown> | undefined;
  do {
    const out = await db.doc.send(
      new QueryCommand({ TableName: db.table, KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': keys.project(projectId).pk }, ExclusiveStartKey: start, ConsistentRead: true }),
    );
    found.push(...(out.Items ?? []));
    start = out.LastEvaluatedKey;
  } while (start);
  return found;
}

describe('markProjectDeleting', () => {
  it('swaps the project item for a deletion record with its receipt and uncounts it on its agent, at once', async () => {
    const before = (await getAgent(db, agentId))!.tenants;
    const p = await project();
    expect((await getAgent(db, agentId))!.tenants).toBe(before + 1);
    const deletion = await mark(p);
    expect(deletion).toMatchObject({ id: p.id, name: p.name, owner, agent_id: agentId, state: 'deleting', finished_at: null });
    expect(await getProject(db, p.id)).toBeNull();
    expect(await getProjectDeletion(db, p.id)).toEqual(deletion);
    expect((await deletionsOf(db, agentId)).map((d) => d.id)).toContain(p.id);
    expect((await items(p.id)).filter((i) => String(i.sk).startsWith('RCPT#')).map((i) => i.op)).toEqual(['project.delete']);
    expect((await getAgent(db, agentId))!.tenants).toBe(before);
  });

  it('is 404 for a project no longer there, or placed on another agent, and writes nothing', async () => {
    const p = await project();
    await mark(p);
    await expect(mark(p)).rejects.toMatchObject({ code: 'not_found' });
    const q = await project();
    await expect(mark({ ...q, agent_id: newId('agt') })).rejects.toMatchObject({ code: 'not_found' });
    expect(await getProject(db, q.id)).not.toBeNull();
    expect(await getProjectDeletion(db, q.id)).toBeNull();
  });
});

describe('purgeProjectItems', () => {
  it('removes every item but the receipts and the record, across transactions, key lookups included, and is idempotent', async () => {
    const p = await project();
    for (let i = 0; i < 120; i++) await createBucket(db, { project: p.id, name: `bucket-${i}`, created_at: new Date().toISOString() });
    const keyIds = Array.from({ length: 10 }, () => randomHex(16));
    for (const key_id of keyIds) await createKey(db, { key_id, project: p.id, label: null, created_at: new Date().toISOString(), verifier: 'ab' });
    for (let i = 0; i < 3; i++) await putReceipt(db, receiptOf(p.id, 'object.put'));
    expect((await projectKeyIds(db, p.id)).sort()).toEqual([...keyIds].sort());
    // An item kind nobody here knows (a later area's) goes too.
    await db.doc.send(new TransactWriteCommand({ TransactItems: [{ Put: { TableName: db.table, Item: { pk: keys.project(p.id).pk, sk: 'FN#hello', type: 'function' } } }] }));

    const deletion = await mark(p);
    expect(await purgeProjectItems(db, deletion)).toBe(131);
    const left = await items(p.id);
    expect(left.filter((i) => i.sk !== 'GONE').every((i) => String(i.sk).startsWith('RCPT#'))).toBe(true);
    expect(left.filter((i) => String(i.sk).startsWith('RCPT#'))).toHaveLength(4);
    const ttl = Math.ceil(Date.parse(deletion.expires_at) / 1000);
    for (const receipt of left.filter((i) => String(i.sk).startsWith('RCPT#'))) expect(receipt[TTL_ATTRIBUTE]).toBe(ttl);
    for (const key_id of keyIds) expect(await lookupKey(db, key_id)).toBeNull();

    expect(await purgeProjectItems(db, deletion)).toBe(0);

    await markProjectDeleted(db, deletion, new Date().toISOString());
    await markProjectDeleted(db, deletion, new Date().toISOString());
    const done = (await getProjectDeletion(db, p.id))!;
    expect(done.state).toBe('deleted');
    expect(done.finished_at).not.toBeNull();
    expect((await deletionsOf(db, agentId)).map((d) => d.id)).not.toContain(p.id);
    const record = (await items(p.id)).find((i) => i.sk === 'GONE')!;
    expect(record[TTL_ATTRIBUTE]).toBe(ttl);
    expect(record.gsi1pk).toBeUndefined();

    // Once closed, nothing is purged under it any more: the guard refuses.
    await createBucket(db, { project: p.id, name: 'late', created_at: new Date().toISOString() });
    await expect(purgeProjectItems(db, deletion)).rejects.toMatchObject({ code: 'conflict' });
  });
});
