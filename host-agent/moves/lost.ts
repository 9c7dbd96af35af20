/**
 * Agent loss (docs/durability.md "Agent loss"): an agent silent for `SVCD_AGENT_LOST_AFTER_S` may be
 * declared lost — by an operator (`bin/svc-agent lost AGENT`) or, with `SVCD_AGENT_LOST_AUTO`, by
 * any live agent on its own. Declaring is one conditional write (only while its heartbeat is still
 * the one judged too old). Then each of its projects is restored on a live agent from its newest
 * complete off-machine copy and pointed there, recording which snapshot it came back from: the
 * writes after that snapshot are the recovery-point loss. Each project's move is its own commit, so
 * a recovery cut short is taken up again by the next pass (any agent's) over agents marked lost.
 */
import { agentIsLive, choosePlacement, getAgent, listAgents, type AgentRecord } from '../../shared/db/agents.ts';
import { projectsOn, setAgentStatus, type RestoredFrom } from '../../shared/db/moves.ts';
import type { ProjectRecord } from '../../shared/db/projects.ts';
import { listSnapshots, type Snapshot } from '../../shared/db/snapshots.ts';
import { errors } from '../../shared/errors.ts';
import { newRequestId } from '../../shared/ids.ts';
import { nowIso } from '../../shared/time.ts';
import type { AgentContext } from '../context.ts';
import { announceMove } from './relocate.ts';
import { handOver, moveEach, type Progress } from './hand-over.ts';

/**
 * Declares `agentId` lost (409 while its heartbeat is younger than the setting, or when it
 * heartbeated meanwhile) and brings its projects back on live agents.
 */
export async function declareLost(ctx: AgentContext, agentId: string, report: (line: Progress) => void): Promise<Progress> {
  if (agentId === ctx.agentId) throw errors.invalid('an agent cannot declare itself lost');
  const agent = await getAgent(ctx.db, agentId);
  if (!agent) throw errors.notFound(`agent ${agentId} is not registered`);
  if (agent.status !== 'lost') {
    const silentS = (ctx.now() - Date.parse(agent.heartbeat_at)) / 1000;
    const afterS = ctx.settings.SVCD_AGENT_LOST_AFTER_S;
    if (silentS < afterS) throw errors.conflict(`agent ${agentId} heartbeated ${Math.round(silentS)} s ago; it can be declared lost after ${afterS} s of silence (SVCD_AGENT_LOST_AFTER_S)`);
    if (!(await setAgentStatus(ctx.db, agentId, 'lost', agent.heartbeat_at))) throw errors.conflict(`agent ${agentId} heartbeated meanwhile: it is not lost`);
    ctx.log(`agent: declared agent ${agentId} lost (silent ${Math.round(silentS)} s)`, { level: 'warn', event: 'agent.lost', agent_id: agentId });
  }
  return recoverProjects(ctx, agentId, report);
}

/** Recoveries running in this agent, by lost agent: one at a time each (a second waits for the first, then finds what is left). */
const recovering = new Map<string, Promise<unknown>>();

/** Brings back every project still placed on the lost agent; answers the last progress line. */
export function recoverProjects(ctx: AgentContext, lostId: string, report: (line: Progress) => void): Promise<Progress> {
  const previous = recovering.get(lostId) ?? Promise.resolve();
  const run = previous.catch(() => {}).then(() => recoverAll(ctx, lostId, report));
  recovering.set(lostId, run);
  void run.catch(() => {}).finally(() => recovering.get(lostId) === run && recovering.delete(lostId));
  return run;
}

async function recoverAll(ctx: AgentContext, lostId: string, report: (line: Progress) => void): Promise<Progress> {
  const projects = await projectsOn(ctx.db, lostId);
  const requestId = newRequestId();
  const last = await moveEach(projects, (project) => recoverOne(ctx, project, lostId, requestId), report);
  const { moved, failed } = last;
  ctx.log(`agent: recovered the projects of lost agent ${lostId}: ${moved} moved, ${failed} failed`, { level: failed > 0 ? 'warn' : 'info', event: 'agent.recover', moved, failed });
  return last;
}

/** One project of a lost agent, restored on the least-loaded live agent from its newest complete off-machine copy. */
async function recoverOne(ctx: AgentContext, project: ProjectRecord, lostId: string, requestId: string): Promise<{ to: string; state: 'sleeping' | 'stopped'; snapshot_id: string | null }> {
  const snapshot = await newestOffsite(ctx, project.id);
  const target = choosePlacement((await listAgents(ctx.db)).filter((a) => a.agent_id !== lostId), ctx.settings.SVCD_AGENT_STALE_MS, ctx.now());
  if (!target) throw errors.orchestrator('no live host agent takes projects');
  const at = nowIso(ctx.now());
  const state = snapshot ? 'sleeping' : 'stopped';
  const restoredFrom: RestoredFrom = { snapshot_id: snapshot?.id ?? null, snapshot_created_at: snapshot?.created_at ?? null, at, reason: 'agent_lost', lost_agent: lostId };
  await handOver(ctx, {
    projectId: project.id,
    from: lostId,
    to: target,
    state,
    at,
    restoredFrom,
    receive: { reason: 'recover', snapshot_id: snapshot?.id ?? null },
    op: 'project.recover',
    actor: `agent:${ctx.agentId}`,
    requestId,
  });
  await announceMove(ctx, project.id);
  ctx.log(`agent: ${project.id} of lost agent ${lostId} restored on ${target.agent_id} from ${snapshot?.id ?? 'no snapshot (its data is lost)'}`, {
    level: 'warn',
    event: 'project.recover',
    project_id: project.id,
  });
  return { to: target.agent_id, state, snapshot_id: snapshot?.id ?? null };
}

/** The project's newest snapshot whose off-machine copy is complete (checked in the store), or null. */
async function newestOffsite(ctx: AgentContext, projectId: string): Promise<Snapshot | null> {
  let cursor: string | undefined;
  do {
    const page = await listSnapshots(ctx.db, projectId, 100, cursor);
    for (const snapshot of page.items) {
      if (snapshot.offsite.state === 'complete' && (await ctx.backups.store?.isComplete(projectId, snapshot.id))) return snapshot;
    }
    cursor = page.nextCursor ?? undefined;
  } while (cursor);
  return null;
}

/** How long after an agent was declared lost the pass takes up what is still placed on it. */
const RESUME_AFTER_MS = 60_000;

/**
 * One pass of the automatic rule, run beside the heartbeat: with `SVCD_AGENT_LOST_AUTO`, agents
 * silent past the setting are declared lost; whatever the setting, projects still placed on an
 * agent marked lost (a recovery cut short) are taken up again.
 */
export async function lostAgentsPass(ctx: AgentContext): Promise<void> {
  const agents = await listAgents(ctx.db);
  // One agent acts: the live one with the smallest id (the others would only race it to the same commits).
  const live = agents.filter((a) => a.status === undefined && agentIsLive(a, ctx.settings.SVCD_AGENT_STALE_MS, ctx.now()));
  if (live.sort((a, b) => a.agent_id.localeCompare(b.agent_id))[0]?.agent_id !== ctx.agentId) return;
  for (const agent of agents) {
    if (agent.agent_id === ctx.agentId) continue;
    // A recovery cut short (its agent crashed, say): taken up once the one that declared it had time to finish.
    if (agent.status === 'lost' && agent.tenants > 0 && ctx.now() - Date.parse(agent.status_at ?? '') > RESUME_AFTER_MS) await recoverProjects(ctx, agent.agent_id, () => {});
    else if (ctx.settings.SVCD_AGENT_LOST_AUTO && silentPast(ctx, agent)) await declareLost(ctx, agent.agent_id, () => {}).catch(() => {});
  }
}

function silentPast(ctx: AgentContext, agent: AgentRecord): boolean {
  return agent.status !== 'lost' && ctx.now() - Date.parse(agent.heartbeat_at) >= ctx.settings.SVCD_AGENT_LOST_AFTER_S * 1000;
}
