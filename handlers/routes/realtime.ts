/**
 * Routes: realtime (contract "POST /v0/projects/{id}/realtime/publish", "Events"; DESIGN §3 Realtime).
 * - `POST .../realtime/publish`: owner session only; forwarded to the hub in the project's host agent,
 *   which assigns `id` and `ts`; answers the event as delivered.
 * - `GET .../realtime/subscribe?channel=a&channel=b`: Server-Sent Events, for the owner session or a
 *   project key of that project. The agent's event stream is passed through unchanged, never
 *   buffered; a client that goes away cancels the body, which closes the upstream connection.
 */
import type { RouterType } from 'itty-router';
import { parseBearer, parseProjectKey } from '../shared/auth.ts';
import { getProject, type ProjectRecord } from '../shared/db/projects.ts';
import { errors } from '../shared/errors.ts';
import { verifyProjectKey } from '../shared/project-keys.ts';
import { payloadJson, publishRequestSchema, SSE_HEADERS, subscribeQuerySchema, subscriptionChannels } from '../shared/realtime.ts';
import { projectIdSchema } from '../shared/schemas.ts';
import { requireOwnedProject } from './auth.ts';
import type { Ctx } from './context.ts';
import { noBody, pathParam, queryOf, readJson } from './http.ts';
import { agentFor } from './domain/placement.ts';

type Routed = Request & { params: Record<string, string> };

/** Registers the realtime routes. */
export function register(router: RouterType<Request, [Ctx]>): void {
  router.post('/v0/projects/:id/realtime/publish', async (request, ctx) => {
    const { project } = await requireOwnedProject(request as Routed, ctx);
    const body = await readJson(request, publishRequestSchema, ctx.deps.settings.SVCD_JSON_MAX_BYTES);
    payloadJson(body.payload); // 413 here already, before any agent is involved
    const agent = await agentFor(ctx.deps, project);
    // The agent answers the delivered event as JSON text; it is passed on byte for byte.
    const upstream = await ctx.deps.agents.fetch(agent, 'POST', `/internal/v1/projects/${project.id}/realtime/publish`, {
      body: { channel: body.channel, event: body.event, payload: body.payload ?? null },
      requestId: ctx.requestId,
    });
    return new Response(upstream.body, { status: 200, headers: { 'content-type': 'application/json; charset=utf-8' } });
  });

  router.get('/v0/projects/:id/realtime/subscribe', async (request, ctx) => {
    const { project, keyId } = await subscriber(request as Routed, ctx);
    const { channel: channels } = queryOf(new URL(request.url), subscribeQuerySchema, { repeatable: ['channel'] });
    await noBody(request);
    const query = new URLSearchParams();
    for (const channel of subscriptionChannels(channels)) query.append('channel', channel);
    if (keyId) query.set('key_id', keyId);
    const agent = await agentFor(ctx.deps, project);
    const upstream = await ctx.deps.agents.fetch(agent, 'GET', `/internal/v1/projects/${project.id}/realtime/subscribe?${query}`, {
      requestId: ctx.requestId,
      signal: request.signal,
    });
    return new Response(upstream.body, { status: 200, headers: { ...SSE_HEADERS } });
  });
}

/**
 * Who may subscribe (DESIGN §3): the owner session, or a project key of this very project. A key of
 * another project is 403 `authorization_denied` (contract "Errors"); a revoked key is 401.
 */
async function subscriber(request: Routed, ctx: Ctx): Promise<{ project: ProjectRecord; keyId: string | null }> {
  const token = parseBearer(request.headers);
  if (!parseProjectKey(token)) {
    const { project } = await requireOwnedProject(request, ctx);
    return { project, keyId: null };
  }
  const key = await verifyProjectKey(ctx.deps.db, ctx.deps.settings.SVCD_KEY_PEPPER, token);
  const projectId = pathParam(request.params.id, 'id', projectIdSchema);
  if (key.projectId !== projectId) throw errors.denied('the project key belongs to another project');
  const project = await getProject(ctx.deps.db, projectId);
  if (!project) throw errors.notFound(`project ${projectId} not found`);
  return { project, keyId: key.keyId };
}
