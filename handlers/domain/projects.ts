/**
 * Projects (contract "POST /v0/projects", "GET /v0/projects/{id}"): created stopped on the
 * least-loaded live host agent, moved only by relocation or an agent's loss (docs/durability.md); read with the state
 * reconciled by that agent; listed per owner; renamed by the owner (docs/api.md "Decisions": names),
 * who also sets its automatic sleep and backups (docs/lifecycle.md "Automatic sleep and backups").
 */
import { choosePlacement, listAgents } from '../../shared/db/agents.ts';
import { createProject as putProject, listProjects, projectView, updateProject as writeChanges, type ProjectChanges } from '../../shared/db/projects.ts';
import { errors } from '../../shared/errors.ts';
import { newId } from '../../shared/ids.ts';
import type { Project } from '../../shared/schemas/projects.ts';
import { nowIso } from '../../shared/time.ts';
import type { Deps } from '../context.ts';
import { reconciledProject, type LifecycleCall } from './lifecycle.ts';
import { pageOf, type AnsweredPage, type PageQuery } from './pages.ts';

/** Creates a stopped project for `owner` on a live agent; 503 `orchestrator_unavailable` when there is none. */
export async function createProject(deps: Deps, input: { owner: string; name: string }): Promise<Project> {
  const { settings, db } = deps;
  const agent = choosePlacement(await listAgents(db), settings.SVCD_AGENT_STALE_MS, deps.now());
  if (!agent) throw errors.orchestrator('no live host agent can run tenants');
  const at = nowIso(deps.now());
  const record = {
    id: newId('prj'),
    name: input.name,
    state: 'stopped' as const,
    created_at: at,
    updated_at: at,
    owner: input.owner,
    agent_id: agent.agent_id,
    // True from the start: nothing of a new tenant exists on its agent (docs/lifecycle.md "Reconciliation").
    state_kept: true,
  };
  await putProject(db, record);
  return projectView(record);
}

/** One page of `owner`'s projects. */
export async function listOwnedProjects(deps: Deps, owner: string, query: PageQuery): Promise<AnsweredPage<Project>> {
  const page = await pageOf(deps, ['projects', owner], query, (limit, after) => listProjects(deps.db, owner, limit, after));
  return { items: page.items.map(projectView), next_cursor: page.next_cursor };
}

/** The project with its recorded state reconciled against the live process (contract "GET project"; docs/lifecycle.md "Reconciliation"). */
export function readProject(deps: Deps, call: LifecycleCall): Promise<Project> {
  return reconciledProject(deps, call);
}

/**
 * Changes the project (`PATCH`) and answers it as GET does: the state reconciled first (503 when the
 * agent is not live, and then nothing is changed), then the changes and `updated_at` recorded with a
 * write that holds only while the project is still the caller's (404 once deleted). A name is kept
 * exactly as given, under the rule of creation; `auto_sleep_after_s` may not be under the
 * deployment's `SVCD_AUTO_SLEEP_MIN_S`. Its agent reads the settings from the record
 * (docs/lifecycle.md "Automatic sleep and backups"). Not receipted: receipts record changes to a
 * project's data (docs/api.md "Receipts"), and neither a name nor a setting is data.
 */
export async function updateProject(deps: Deps, call: LifecycleCall & { changes: ProjectChanges }): Promise<Project> {
  const min = deps.settings.SVCD_AUTO_SLEEP_MIN_S;
  const idle = call.changes.auto_sleep_after_s;
  if (typeof idle === 'number' && idle < min) throw errors.invalid(`auto_sleep_after_s: must be at least ${min} seconds (SVCD_AUTO_SLEEP_MIN_S), or null to turn it off`);
  await reconciledProject(deps, call);
  const changed = await writeChanges(deps.db, call.project.id, call.project.owner, call.changes, nowIso(deps.now()));
  return projectView(changed);
}
