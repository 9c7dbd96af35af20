/**
 * Internal realtime routes of the host agent (docs/realtime.md "Inside the host agent"):
 * - `POST /internal/v1/projects/{id}/realtime/publish` `{channel, event, payload}` → the event as delivered;
 * - `GET  /internal/v1/projects/{id}/realtime/subscribe?channel=…[&key_id=…]` → Server-Sent Events.
 *
 * Subscribe does not go through the fetch-style internal API: a stream there would cost a web
 * ReadableStream and a pipe per subscriber. It is served on the raw Node response instead
 * (`attachSubscribeStream`): once the head of a chunked HTTP/1.1 response is out, the hub writes each
 * event's one shared Buffer, already framed as a chunk, straight to the socket, and `res.end()` writes
 * the last chunk when the stream ends. It checks the same internal JWT before any work.
 */
import type { IncomingMessage, RequestListener, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { internalPathPattern, internalPaths, ROUTE_PARAMS } from '../../shared/internal-paths.ts';
import { errors } from '../../shared/errors.ts';
import { answerError } from '../../shared/http/node-http.ts';
import { KEY_ID_PATTERN, newRequestId } from '../../shared/ids.ts';
import { SSE_HEADERS, subscribeChannels } from '../../shared/realtime/events.ts';
import { projectIdSchema } from '../../shared/schemas/projects.ts';
import { publishRequestSchema } from '../../shared/schemas/realtime.ts';
import type { AgentContext } from '../context.ts';
import { pathParam, readJson } from '../../shared/http/body.ts';
import type { InternalRouter } from '../internal-api.ts';
import type { FrameSink } from '../realtime/hub.ts';

const SUBSCRIBE_PATH = internalPathPattern(internalPaths.realtimeSubscribe(ROUTE_PARAMS.id));

/** Registers the publish route (fetch-style). */
export function register(router: InternalRouter): void {
  router.post(internalPaths.realtimePublish(ROUTE_PARAMS.id), async (request, ctx) => {
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
    subscribe(req, res, match[1]!, ctx).catch((thrown: unknown) => {
      const requestId = String(req.headers['x-request-id'] ?? newRequestId());
      if (res.headersSent) ctx.log(`agent: realtime subscribe ${requestId} failed after its head: ${(thrown as Error).stack ?? thrown}`);
      answerError(req, res, thrown, requestId, ctx.log);
    });
  });
}

async function subscribe(req: IncomingMessage, res: ServerResponse, rawId: string, ctx: AgentContext): Promise<void> {
  await ctx.internalTokens.check(req.headers.authorization);
  const projectId = pathParam(rawId, 'id', projectIdSchema);
  const url = new URL(req.url ?? '/', 'http://agent.internal');
  const channels = subscribeChannels(url);
  const keyId = url.searchParams.get('key_id');
  if (keyId !== null && !KEY_ID_PATTERN.test(keyId)) throw errors.invalid('key_id: must be 32 lowercase hex characters');
  // The frames are HTTP/1.1 chunks; the only caller (the handlers' fetch) speaks HTTP/1.1.
  if (req.httpVersion !== '1.1') throw errors.invalid('event streams need HTTP/1.1');
  const socket = req.socket;
  if (res.destroyed || socket.destroyed) return;

  // Capacity is checked before the head goes out, so a refused subscriber gets a proper error answer;
  // the head, the opening comment and the registration then happen in this same tick.
  ctx.realtime.admit(projectId);
  socket.setNoDelay(true);
  res.writeHead(200, SSE_HEADERS);
  res.flushHeaders();
  const sink = responseSink(res, socket);
  sink.write(ctx.realtime.comment('subscribed'));
  ctx.realtime.subscribe(projectId, channels, sink, keyId);
}

/** The socket of a chunked response whose head is out, as the hub's sink (also host-agent/realtime/public.ts). */
export function responseSink(res: ServerResponse, socket: Socket): FrameSink {
  return {
    write: (chunk) => (socket.writable ? socket.write(chunk) : true),
    get writableLength() {
      return socket.writableLength;
    },
    get writableHighWaterMark() {
      return socket.writableHighWaterMark;
    },
    cork: () => socket.cork(),
    uncork: () => socket.uncork(),
    end: (last) => {
      if (last && socket.writable) socket.write(last);
      res.end(); // the terminating zero-length chunk
    },
    destroy: () => res.destroy(),
    once: (event, listener) => (event === 'drain' ? socket.once('drain', listener) : res.once('close', listener)),
  };
}
