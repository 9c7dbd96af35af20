/**
 * Realtime (contract "POST /v0/projects/{id}/realtime/publish", "Events"; docs/realtime.md): the hub
 * lives in the project's host agent. Publishing is the owner's; subscribing is the owner's or a
 * project key's of that very project. The agent's answers are passed on as streams, never buffered.
 */
import { parseProjectKey, verifySessionToken } from '../../shared/auth.ts';
import { getOwnedProject, getProject, type ProjectRecord } from '../../shared/db/projects.ts';
import { errors } from '../../shared/errors.ts';
import { pathParam } from '../../shared/http/body.ts';
import { verifyProjectKey } from '../../shared/project-keys.ts';
import { payloadJson, subscriptionChannels } from '../../shared/realtime.ts';
import { projectIdSchema } from '../../shared/schemas/projects.ts';
import type { Deps } from '../context.ts';
import { agentFor } from './placement.ts';

/** Who may subscribe to a project's events: its project, and the key used (null: the owner's session). */
export interface Subscriber {
  project: ProjectRecord;
  keyId: string | null;
}

/**
 * Publishes an event through the project's agent, which assigns `id` and `ts`; answers the agent's
 * JSON text of the delivered event. A payload over the limit is 413 before any agent is involved.
 */
export async function publish(
  deps: Deps,
  input: { requestId: string; project: ProjectRecord; channel: string; event: string; payload: unknown },
): Promise<ReadableStream<Uint8Array> | null> {
  payloadJson(input.payload);
  const agent = await agentFor(deps, input.project);
  const upstream = await deps.agents.fetch(agent, 'POST', `/internal/v1/projects/${input.project.id}/realtime/publish`, {
    body: { channel: input.channel, event: input.event, payload: input.payload ?? null },
    requestId: input.requestId,
  });
  return upstream.body;
}

/**
 * Who subscribes with `token` to the project named by the raw path parameter: the owner session, or
 * a project key of this very project. The credential is judged before the id, so an anonymous caller
 * learns nothing; a key of another project is 403 `authorization_denied`, a revoked key 401.
 */
export async function authorizeSubscriber(deps: Deps, input: { token: string; projectIdParam: string | undefined }): Promise<Subscriber> {
  const { db, settings } = deps;
  if (!parseProjectKey(input.token)) {
    const accountId = await verifySessionToken(settings.SVCD_SESSION_SECRET, input.token);
    const projectId = pathParam(input.projectIdParam, 'id', projectIdSchema);
    return { project: await getOwnedProject(db, projectId, accountId), keyId: null };
  }
  const key = await verifyProjectKey(db, settings.SVCD_KEY_PEPPER, input.token);
  const projectId = pathParam(input.projectIdParam, 'id', projectIdSchema);
  if (key.projectId !== projectId) throw errors.denied('the project key belongs to another project');
  const project = await getProject(db, projectId);
  if (!project) throw errors.notFound(`project ${projectId} not found`);
  return { project, keyId: key.keyId };
}

/** Opens the agent's event stream for `channels` (at least one, at most 32); ends when `signal` aborts. */
export async function subscribe(
  deps: Deps,
  input: { requestId: string; subscriber: Subscriber; channels: string[]; signal: AbortSignal },
): Promise<ReadableStream<Uint8Array> | null> {
  const { project, keyId } = input.subscriber;
  const query = new URLSearchParams();
  for (const channel of subscriptionChannels(input.channels)) query.append('channel', channel);
  if (keyId) query.set('key_id', keyId);
  const agent = await agentFor(deps, project);
  const upstream = await deps.agents.fetch(agent, 'GET', `/internal/v1/projects/${project.id}/realtime/subscribe?${query}`, {
    requestId: input.requestId,
    signal: input.signal,
  });
  return upstream.body;
}
