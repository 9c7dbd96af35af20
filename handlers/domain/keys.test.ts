import { beforeAll, describe, expect, it } from 'vitest';
import { lookupKey } from '../../shared/db/keys.ts';
import { ServiceError } from '../../shared/errors.ts';
import { newId } from '../../shared/ids.ts';
import type { Deps } from '../context.ts';
import { domainDeps, type AgentCall } from '../../test/helpers/domain-deps.ts';
import { issueKey, listProjectKeys, revokeProjectKey } from './keys.ts';

let deps: Deps;
let agentId: string;
let calls: AgentCall[];

beforeAll(async () => {
  ({ deps, agentId, calls } = await domainDeps((call) => ({ key_id: call.path.split('/')[4], invalidated: true })));
});

describe('keys', () => {
  it('are issued with their secret once and listed without it', async () => {
    const projectId = newId('prj');
    const issued = await issueKey(deps, { projectId, label: 'ci' });
    expect(issued.key).toMatch(new RegExp(`^svc1_${issued.key_id}_[0-9a-f]{64}$`));
    const page = await listProjectKeys(deps, projectId, {});
    expect(page.items).toHaveLength(1);
    expect(page.items[0]).toMatchObject({ key_id: issued.key_id, label: 'ci', revoked_at: null });
    expect(JSON.stringify(page)).not.toContain(issued.key);
  });

  it('are revoked once, and a repeated revocation answers the same and tells the agent again', async () => {
    const project = { id: newId('prj'), agent_id: agentId };
    const { key_id } = await issueKey(deps, { projectId: project.id, label: null });
    const before = calls.length;
    const first = await revokeProjectKey(deps, { requestId: 'req_0000000000000001', project, keyId: key_id });
    expect(first.revoked_at).not.toBeNull();
    expect((await lookupKey(deps.db, key_id))?.revoked_at).toBe(first.revoked_at);
    const again = await revokeProjectKey(deps, { requestId: 'req_0000000000000002', project, keyId: key_id });
    expect(again).toEqual(first);
    expect(calls.slice(before)).toEqual([
      { agentId, method: 'POST', path: `/internal/v1/keys/${key_id}/invalidate`, body: { project_id: project.id } },
      { agentId, method: 'POST', path: `/internal/v1/keys/${key_id}/invalidate`, body: { project_id: project.id } },
    ]);
  });

  it("of another project cannot be revoked through this one", async () => {
    const { key_id } = await issueKey(deps, { projectId: newId('prj'), label: null });
    const refused = await revokeProjectKey(deps, { requestId: 'req_0000000000000003', project: { id: newId('prj'), agent_id: agentId }, keyId: key_id }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ServiceError);
    expect((refused as ServiceError).code).toBe('not_found');
  });
});
