/**
 * Function invocations with a project key, served by the agent itself at the local stack's origin
 * (docs/functions.md "The path through the service"; docs/local-stack.md "One origin"): the
 * client's request goes from the agent straight to the project's runtime, one hop instead of
 * crossing workerd and the handlers first — as realtime does (../realtime/public.ts).
 *
 * The rules are the public route's (handlers/routes/functions.ts), in the same order and with the
 * same answers: a project key of this very project (this agent's key cache, which a revocation
 * reaches before `DELETE` answers: 401 on the very next call; another project's key 403), then the
 * function's name, then the invocation as the runtime runs it. The function sees exactly the
 * client's request (less `Authorization`, hop-by-hop headers and the service's internal names), and
 * the client gets the function's answer with the service's `X-Request-Id` and CORS headers.
 *
 * Anything else is relayed to the handlers untouched, which serve it as before: an owner's session,
 * no credential, a CORS preflight, a project placed on another agent.
 */
import { bearerToken, parseProjectKey } from '../../shared/auth.ts';
import { errors } from '../../shared/errors.ts';
import { pathParam } from '../../shared/http/body.ts';
import { corsAnswerHeaders, type CorsPolicy } from '../../shared/http/cors.ts';
import { connectionTokens } from '../../shared/http/hop-by-hop.ts';
import { answerError } from '../../shared/http/node-http.ts';
import { newRequestId } from '../../shared/ids.ts';
import type { Log } from '../../shared/log.ts';
import { functionNameSchema, functionSeesHeader } from '../../shared/schemas/functions.ts';
import { projectIdSchema } from '../../shared/schemas/projects.ts';
import type { AgentContext } from '../context.ts';
import { logPublicRequest, type PublicRoute } from '../dataplane/origin.ts';
import type { KeyCache } from '../dataplane/key-cache.ts';

/** What the public invoke route needs of the agent. */
export interface PublicInvokeDeps {
  ctx: Pick<AgentContext, 'settings' | 'agentId' | 'functions'>;
  /** The origin the client reached (the stack's base URL): functions see it as `CLOUD_ORIGIN` unless that is set. */
  origin: string;
  keys: KeyCache;
  cors: CorsPolicy;
  log: Log;
}

/** Why a request is relayed to the handlers: the project is not this agent's to serve. */
class NotHere extends Error {}

/**
 * The public invoke route: answers false for a request it does not take (another route, no project
 * key, a preflight); otherwise serves it, or calls `elsewhere` (the handlers) when the project is
 * not this agent's.
 */
export function publicInvoke(deps: PublicInvokeDeps): PublicRoute {
  const { ctx, log, origin } = deps;
  return (req, res, match, expectsContinue, elsewhere) => {
    const { id: rawId, name: rawName } = match.params;
    if (rawId === undefined || rawName === undefined) return false;
    const authorization = req.headers.authorization;
    if (typeof authorization !== 'string' || req.headersDistinct.authorization?.length !== 1) return false;
    let presented;
    try {
      presented = parseProjectKey(bearerToken(authorization));
    } catch {
      return false;
    }
    if (!presented) return false;
    const requestId = newRequestId();
    const cors = corsAnswerHeaders(deps.cors, req.headers.origin);
    for (const [name, value] of Object.entries(cors)) res.setHeader(name, value);
    res.setHeader('x-request-id', requestId);
    const seen: { projectId?: string } = {};
    logPublicRequest(log, req, res, requestId, '/v0/projects/:id/functions/:name/invoke/:rest*', seen);
    const served = (async () => {
      const key = deps.keys.verifyWarm(presented) ?? (await deps.keys.verify(presented));
      const projectId = pathParam(rawId, 'id', projectIdSchema);
      seen.projectId = projectId;
      if (key.projectId !== projectId) throw errors.denied('the project key belongs to another project');
      if (key.owner !== undefined && key.owner !== ctx.agentId) throw new NotHere();
      const name = pathParam(rawName, 'name', functionNameSchema);
      const rest = (req.url ?? '').slice(`/v0/projects/${rawId}/functions/${rawName}/invoke`.length);
      const listed = connectionTokens(req.headers.connection);
      const headers: string[] = [];
      for (let i = 0; i < req.rawHeaders.length; i += 2) {
        const lower = req.rawHeaders[i]!.toLowerCase();
        if (functionSeesHeader(lower, listed)) headers.push(lower, req.rawHeaders[i + 1]!);
      }
      const declared = req.headers['content-length'];
      const length = declared !== undefined && /^\d{1,15}$/.test(declared) ? Number(declared) : null;
      const extra = ['x-request-id', requestId, ...Object.entries(cors).flat()];
      const hasBody = req.headers['transfer-encoding'] !== undefined || (length !== null && length > 0);
      // The client waits for leave to send its body (RFC 9110 §10.1.1), given once the request is taken.
      if (expectsContinue && hasBody) res.writeContinue();
      await ctx.functions.invoke(req, res, {
        projectId,
        name,
        method: req.method ?? 'GET',
        path: rest === '' || rest.startsWith('?') ? `/${rest}` : rest,
        headers,
        hasBody,
        length,
        origin: ctx.settings.SVCD_CLOUD_ORIGIN ?? origin,
        requestId,
        direct: { headers: extra },
      });
    })();
    served.catch((thrown: unknown) => {
      if (thrown instanceof NotHere) {
        for (const name of Object.keys(cors)) res.removeHeader(name);
        res.removeHeader('x-request-id');
        return elsewhere();
      }
      if (res.headersSent) {
        log(`agent: invocation ${requestId} failed after its head: ${(thrown as Error).message}`);
        res.destroy();
        return;
      }
      answerError(req, res, thrown, requestId, (line) => log(`agent: invocation ${requestId}: ${line}`));
    });
    return true;
  };
}
