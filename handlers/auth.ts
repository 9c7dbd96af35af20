/** Authentication and ownership guards of the control plane (contract "Authentication"; docs/api.md). */
import { parseBearer, parseProjectKey, verifySessionToken } from '../shared/auth.ts';
import { errors } from '../shared/errors.ts';
import { getOwnedProject, type ProjectRecord } from '../shared/db/projects.ts';
import { projectIdSchema } from '../shared/schemas/projects.ts';
import type { Ctx } from './context.ts';
import { ownedProjectForAgent, type ProjectForAgent } from './domain/lifecycle.ts';
import { pathParam } from './http.ts';

type Routed = Request & { params: Record<string, string> };

/** Answers the account id of the session on the request; a project key here is 401 (contract "Authentication"). */
export async function requireSession(request: Request, ctx: Ctx): Promise<string> {
  const token = parseBearer(request.headers);
  if (parseProjectKey(token)) throw errors.unauthenticated('a project key is not accepted here: use a session token');
  return verifySessionToken(ctx.deps.settings.SVCD_SESSION_SECRET, token);
}

/**
 * Authenticates the session, validates `{id}`, and loads the project the caller owns. The
 * credential is checked first, so an anonymous caller learns nothing about which ids exist.
 */
export async function requireOwnedProject(request: Routed, ctx: Ctx): Promise<{ accountId: string; project: ProjectRecord }> {
  const accountId = await requireSession(request, ctx);
  const projectId = pathParam(request.params.id, 'id', projectIdSchema);
  const project = await getOwnedProject(ctx.deps.db, projectId, accountId);
  return { accountId, project };
}

/**
 * `requireOwnedProject` for routes that go on to call the project's agent: same checks in the same
 * order, with the agent record of a remembered placement read alongside the project.
 */
export async function requireProjectForAgent(request: Routed, ctx: Ctx): Promise<ProjectForAgent> {
  const accountId = await requireSession(request, ctx);
  const projectId = pathParam(request.params.id, 'id', projectIdSchema);
  return ownedProjectForAgent(ctx.deps, accountId, projectId);
}
