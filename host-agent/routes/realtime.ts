/**
 * Internal realtime routes of the host agent (DESIGN §3 Realtime, §5):
 * - `POST /internal/v1/projects/{id}/realtime/publish` `{channel, event, payload}` → the event as delivered;
 * - `GET  /internal/v1/projects/{id}/realtime/subscribe?channel=…[&key_id=…]` → Server-Sent Events.
 *
 * Subscribe does not go through the fetch-style internal API: a stream there would cost a web
 * ReadableStream and a pipe per subscriber. It is served on the raw Node response instead, so the hub
 * writes each shared frame Buffer straight to the socket (`attachSubscribeStream`). It checks the same
 * internal JWT before any work.
 */
import type { IncomingMessage, RequestListener, Server, ServerResponse } from 'node:http';
import { parseBearer, verifyInternalToken } from '../../shared/auth.ts';
import { errorResponse, errors } from '../../shared/errors.ts';
import { newRequestId } from '../../shared/ids.ts';
import { publishRequestSchema, SSE_HEADERS, subscribeChannels } from '../../shared/realtime.ts';
import { projectIdSchema } from '../../shared/schemas.ts';
import type { AgentContext } from '../context.ts';
import { pathParam, readJson } from '../http.ts';
import type { InternalRouter } from '../internal-api.ts';
import { commentFrame } from '../realtime/sse.ts';

const SUBSCRIBE_PATH = /^\/internal\/v1\/projects\/([^/]+)\/realtime\/subscribe$/;
const KEY_ID = /^[0-9a-f]{32}$/;
const OPENED = commentFrame('subscribed');

/** Registers the publish route (fetch-style). */
export function register(router: InternalRouter): void {
  router.post('/internal/v1/projects/:id/realtime/publish', async (request, ctx) => {
    const { params } = request as Request & { params: Record<string, string> };
    const projectId = pathParam(params.id, 'id', projectIdSchema);
    const body = await readJson(request, publishRequestSchema, ctx.settings.SVCD_JSON_MAX_BYTES);
    const { json: delivered } = ctx.realtime.publish(projectId, body.channel, body.event, body.payload);
    return new Response(delivered, { status: 200, headers: { 'content-type': 'application/json; charset=utf-8' } });
  });
}

/**
 * Puts the raw subscribe route in front of the internal server's fetch-style listener: subscribe
 * requests are answered here, everything else goes on to the internal API unchanged.
 */
export function attachSubscribeStream(server: Server, ctx: AgentContext): void {
  const rest = server.listeners('request') as RequestListener[];
  server.removeAllListeners('request');
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const path = (req.url ?? '/').split('?', 1)[0]!;
    const match = req.method === 'GET' ? SUBSCRIBE_PATH.exec(path) : null;
    if (!match) {
      for (const listener of rest) listener.call(server, req, res);
      return;
    }
    subscribe(req, res, match[1]!, ctx).catch((thrown) => {
      const requestId = String(req.headers['x-request-id'] ?? newRequestId());
      if (res.headersSent) {
        ctx.log(`agent: realtime subscribe ${requestId} failed after its head: ${(thrown as Error).stack ?? thrown}`);
        res.destroy();
        return;
      }
      const answer = errorResponse(thrown, requestId, ctx.log);
      const headers: Record<string, string> = {};
      answer.headers.forEach((v, k) => (headers[k] = v));
      void answer.text().then((body) => res.writeHead(answer.status, headers).end(body));
    });
  });
}

async function subscribe(req: IncomingMessage, res: ServerResponse, rawId: string, ctx: AgentContext): Promise<void> {
  const headers = new Headers();
  if (typeof req.headers.authorization === 'string') headers.set('authorization', req.headers.authorization);
  await verifyInternalToken(ctx.settings.SVCD_INTERNAL_SECRET, parseBearer(headers));
  const projectId = pathParam(rawId, 'id', projectIdSchema);
  const url = new URL(req.url ?? '/', 'http://agent.internal');
  const channels = subscribeChannels(url);
  const keyId = url.searchParams.get('key_id');
  if (keyId !== null && !KEY_ID.test(keyId)) throw errors.invalid('key_id: must be 32 lowercase hex characters');
  if (res.destroyed || req.socket.destroyed) return;

  // Capacity is checked before the head goes out, so a refused subscriber gets a proper error answer;
  // the head, the opening comment and the registration then happen in this same tick.
  ctx.realtime.admit(projectId);
  req.socket.setNoDelay(true);
  res.writeHead(200, SSE_HEADERS);
  res.write(OPENED);
  ctx.realtime.subscribe(projectId, channels, res, keyId);
}
