/**
 * Authentication and ownership guards of the control plane (contract "Authentication"; docs/api.md
 * "Credentials" and "Sessions"). Every guard checks the session fully: its token, then whether it
 * still stands (handlers/domain/sessions.ts), in the one DynamoDB round trip the route's first read
 * joins.
 */
import { parseBearer, parseProjectKey, readSessionToken, type SessionClaims } from '../shared/auth.ts';
import type { TableKey } from '../shared/db/client.ts';
import { errors } from '../shared/errors.ts';
import type { ProjectRecord } from '../shared/db/projects.ts';
import { projectIdSchema } from '../shared/schemas/projects.ts';
import type { Ctx } from './context.ts';
import type { ProjectForAgent } from './domain/lifecycle.ts';
import { agentToReadWith, prefetchedIn } from './domain/placement.ts';
import { confirmSession, ownedProjectOf, ownedProjectWith, type StandingSession } from './domain/sessions.ts';
import { pathParam } from './http.ts';

type Routed = Request & { params: Record<string, string> };

/**
 * The session token on the request, verified by its signature and lifetime only: not yet whether
 * it still stands, which `confirmSession` judges (the guards below always do). A project key here
 * is 401 (contract "Authentication").
 */
export async function presentedSession(request: Request, ctx: Ctx): Promise<SessionClaims> {
  const token = parseBearer(request.headers);
  if (parseProjectKey(token)) throw errors.unauthenticated('a project key is not accepted here: use a session token');
  const claims = await readSessionToken(ctx.deps.settings.SVCD_SESSION_SECRET, token);
  // For the request's log line: who the signed token names (docs/observability.md "Fields").
  ctx.seen.accountId = claims.accountId;
  return claims;
}

/** Answers the account id of a session that stands; anything else is 401. */
export async function requireSession(request: Request, ctx: Ctx): Promise<string> {
  return (await requireStandingSession(request, ctx)).claims.accountId;
}

/**
 * The session that stands, with its account and `extra` (the route's first items) read in the same
 * round trip; anything else is 401.
 */
export async function requireStandingSession(request: Request, ctx: Ctx, extra: readonly TableKey[] = []): Promise<StandingSession> {
  return confirmSession(ctx.deps, await presentedSession(request, ctx), extra);
}

/**
 * Authenticates the session, validates `{id}`, and loads the project the caller owns, the session's
 * standing and the project read together. A bad token is refused first, so an anonymous caller
 * learns nothing about which ids exist; a signed-out session is refused before ownership is judged.
 */
export async function requireOwnedProject(request: Routed, ctx: Ctx): Promise<{ accountId: string; project: ProjectRecord }> {
  const session = await presentedSession(request, ctx);
  const projectId = pathParam(request.params.id, 'id', projectIdSchema);
  const project = await ownedProjectOf(ctx.deps, session, projectId);
  return { accountId: session.accountId, project };
}

/**
 * `requireOwnedProject` for routes that go on to call the project's agent: same checks in the same
 * order, with the agent record of a remembered placement read in the same round trip as the
 * project.
 */
export async function requireProjectForAgent(request: Routed, ctx: Ctx): Promise<ProjectForAgent> {
  const session = await presentedSession(request, ctx);
  const projectId = pathParam(request.params.id, 'id', projectIdSchema);
  // Read in the batch that judges the session: its item is used only once that read has found the
  // session standing and the project the caller's (handlers/domain/placement.ts).
  const agent = agentToReadWith(ctx.deps, projectId);
  const { project, items } = await ownedProjectWith(ctx.deps, session, projectId, agent ? [agent.key] : []);
  return { project, prefetched: agent && prefetchedIn(agent.agentId, items) };
}
