import { beforeAll, describe, expect, it } from 'vitest';
import { createProject as putProject, type ProjectRecord } from '../../shared/db/projects.ts';
import { ServiceError } from '../../shared/errors.ts';
import { newId } from '../../shared/ids.ts';
import type { Deps } from '../context.ts';
import { domainDeps, type AgentCall } from '../../test/helpers/domain-deps.ts';
import { createSnapshot, ownedProjectForAgent, restore, sleep, wakeup, withState } from './lifecycle.ts';

let deps: Deps;
let agentId: string;
let calls: AgentCall[];
const OWNER = 'acct_00000000000000aa';

beforeAll(async () => {
  ({ deps, agentId, calls } = await domainDeps((call) =>
    call.path.endsWith('/wakeup') ? { state: 'running', updated_at: '2026-01-02T00:00:00.000Z' } : { state: 'sleeping', updated_at: '2026-01-03T00:00:00.000Z' },
  ));
});

async function stored(): Promise<ProjectRecord> {
  const at = '2026-01-01T00:00:00.000Z';
  const record: ProjectRecord = { id: newId('prj'), name: 'p', state: 'stopped', created_at: at, updated_at: at, owner: OWNER, agent_id: agentId };
  await putProject(deps.db, record);
  return record;
}

describe('lifecycle', () => {
  it('answers the project with the state and time its agent records, the rest as read', () => {
    const project: ProjectRecord = { id: 'prj_0000000000000001', name: 'n', state: 'stopped', created_at: 'c', updated_at: 'u', owner: OWNER, agent_id: agentId };
    expect(withState(project, { state: 'running', updated_at: 'later' })).toEqual({
      id: 'prj_0000000000000001',
      name: 'n',
      state: 'running',
      created_at: 'c',
      updated_at: 'later',
      native: { pin: '3.0.0', data_plane: '/v2' },
      last_backup_at: null,
      last_backup_offsite: null,
      auto_sleep_after_s: null,
      backup: null,
      agent_id: agentId,
      restored_from: null,
    });
  });

  it("passes the recorded state to the project's agent and answers what it records", async () => {
    const owned = await ownedProjectForAgent(deps, OWNER, (await stored()).id);
    const woken = await wakeup(deps, { ...owned, requestId: 'req_0000000000000001' });
    expect(woken).toMatchObject({ id: owned.project.id, state: 'running', updated_at: '2026-01-02T00:00:00.000Z' });
    expect(calls.at(-1)).toMatchObject({ agentId, method: 'POST', body: { recorded: { state: 'stopped', updated_at: '2026-01-01T00:00:00.000Z' } } });
    expect(await sleep(deps, { ...owned, requestId: 'req_0000000000000002' })).toMatchObject({ state: 'sleeping' });
  });

  it('sends a snapshot label and a restore target as given', async () => {
    const owned = await ownedProjectForAgent(deps, OWNER, (await stored()).id);
    await createSnapshot(deps, { ...owned, requestId: 'req_0000000000000003', label: null });
    expect(calls.at(-1)).toMatchObject({ path: `/internal/v1/projects/${owned.project.id}/snapshots`, body: { label: null } });
    await restore(deps, { ...owned, requestId: 'req_0000000000000004', snapshotId: 'snap_0000000000000001' });
    expect(calls.at(-1)).toMatchObject({ path: `/internal/v1/projects/${owned.project.id}/restore`, body: { snapshot_id: 'snap_0000000000000001' } });
  });

  it("refuses another account's project as not found", async () => {
    const { id } = await stored();
    const refused = await ownedProjectForAgent(deps, 'acct_00000000000000bb', id).catch((e: unknown) => e);
    expect((refused as ServiceError).code).toBe('not_found');
  });
});
