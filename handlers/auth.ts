/** Authentication and ownership guards of the control plane (contract "Authentication"; DESIGN §3). */
import { parseBearer, parseProjectKey, verifySessionToken } from '../shared/auth.ts';
import { errors } from '../shared/errors.ts';
import { getOwnedProject, type ProjectRecord } from '../shared/db/projects.ts';
import { projectIdSchema } from '../shared/schemas.ts';
import type { Ctx } from './context.ts';
import { pathParam } from './http.ts';

/** Answers the account id of the session on the request; a project key here is 401 (DESIGN §3). */
export async function requireSession(request: Request, ctx: Ctx): Promise<string> {
  const token = parseBearer(request.headers);
  if (parseProjectKey(token)) throw errors.unauthenticated('a project key is not accepted here: use a session token');
  return verifySessionToken(ctx.deps.settings.SVCD_SESSION_SECRET, token);
}

/**
 * Authenticates the session, validates `{id}`, and loads the project the caller owns. The
 * credential is checked first, so an anonymous caller learns nothing about which ids exist.
 */
export async function requireOwnedProject(
  request: Request & { params: Record<string, string> },
  ctx: Ctx,
): Promise<{ accountId: string; project: ProjectRecord }> {
  const accountId = await requireSession(request, ctx);
  const projectId = pathParam(request.params.id, 'id', projectIdSchema);
  const project = await getOwnedProject(ctx.deps.db, projectId, accountId);
  return { accountId, project };
}
