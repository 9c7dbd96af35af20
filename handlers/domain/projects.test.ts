import { beforeAll, describe, expect, it } from 'vitest';
import { getProject } from '../../shared/db/projects.ts';
import { ServiceError } from '../../shared/errors.ts';
import type { Deps } from '../context.ts';
import { domainDeps, type AgentCall } from '../../test/helpers/domain-deps.ts';
import { createProject, listOwnedProjects, readProject } from './projects.ts';

let deps: Deps;
let agentId: string;
let calls: AgentCall[];

beforeAll(async () => {
  ({ deps, agentId, calls } = await domainDeps(() => ({ state: 'running', updated_at: '2026-01-02T00:00:00.000Z' })));
});

describe('projects', () => {
  it('are created stopped on the live agent, keeping the name as given', async () => {
    const project = await createProject(deps, { owner: 'acct_0000000000000001', name: '  spaced  ' });
    expect(project).toMatchObject({ name: '  spaced  ', state: 'stopped', native: { pin: '3.0.0', data_plane: '/v2' } });
    expect((await getProject(deps.db, project.id))?.agent_id).toBe(agentId);
  });

  it('cannot be created when no agent is live', async () => {
    const later = { ...deps, now: () => Date.now() + deps.settings.SVCD_AGENT_STALE_MS + 60_000 };
    const refused = await createProject(later, { owner: 'acct_0000000000000001', name: 'x' }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ServiceError);
    expect((refused as ServiceError).code).toBe('orchestrator_unavailable');
  });

  it('are read as recorded when their agent keeps the state, without an internal call; 503 once the agent is stale', async () => {
    const { id, updated_at } = await createProject(deps, { owner: 'acct_0000000000000002', name: 'read me' });
    const project = (await getProject(deps.db, id))!;
    expect(project.state_kept).toBe(true);
    const before = calls.length;
    expect(await readProject(deps, { project, requestId: 'req_0000000000000001' })).toMatchObject({ id, state: 'stopped', updated_at });
    expect(calls.length).toBe(before);
    const later = { ...deps, now: () => Date.now() + deps.settings.SVCD_AGENT_STALE_MS + 60_000 };
    const refused = await readProject(later, { project, requestId: 'req_0000000000000002' }).catch((e: unknown) => e);
    expect((refused as ServiceError).code).toBe('orchestrator_unavailable');
  });

  it('are read with the state their agent reconciles when the record is not marked kept', async () => {
    const { id } = await createProject(deps, { owner: 'acct_0000000000000002', name: 'read me too' });
    const { state_kept: _kept, ...project } = (await getProject(deps.db, id))!;
    const read = await readProject(deps, { project, requestId: 'req_0000000000000003' });
    expect(read).toMatchObject({ id, state: 'running', updated_at: '2026-01-02T00:00:00.000Z' });
    expect(calls.at(-1)).toMatchObject({ agentId, path: `/internal/v1/projects/${id}/reconcile`, body: { recorded: { state: 'stopped' } } });
  });

  it('are listed per owner, page by page', async () => {
    const owner = 'acct_0000000000000003';
    for (const name of ['a', 'b', 'c']) await createProject(deps, { owner, name });
    const first = await listOwnedProjects(deps, owner, { limit: 2 });
    expect(first.items).toHaveLength(2);
    const second = await listOwnedProjects(deps, owner, { cursor: first.next_cursor! });
    expect(second).toMatchObject({ next_cursor: null });
    expect(new Set([...first.items, ...second.items].map((p) => p.name))).toEqual(new Set(['a', 'b', 'c']));
  });
});
