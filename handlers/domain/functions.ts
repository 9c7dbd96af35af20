/**
 * Functions (docs/functions.md): deploy, read, list, version history, delete, logs and invocation.
 * The project's host agent runs them and is the one writer of their items (it holds the module
 * bytes and the workers); the handlers authenticate, check ownership and read the metadata.
 *
 * Invocation is a relay: the request streams to the agent and the function's answer streams back,
 * never buffered. Owner sessions are checked here (the session and the project, one round trip);
 * a project key is handed to the agent, which verifies it from its key cache (the one revocation
 * reaches first, docs/dataplane.md "Revocation"), so a warm invocation reads nothing from DynamoDB.
 */
import { parseProjectKey, readSessionToken } from '../../shared/auth.ts';
import { functionView, getFunction, listFunctions, listVersions, versionView } from '../../shared/db/functions.ts';
import { getProject, type ProjectRecord } from '../../shared/db/projects.ts';
import { ServiceError, errors } from '../../shared/errors.ts';
import { pathParam } from '../../shared/http/body.ts';
import { isHopByHop, connectionTokens } from '../../shared/http/hop-by-hop.ts';
import { internalPaths } from '../../shared/internal-paths.ts';
import { verifyProjectKey } from '../../shared/project-keys.ts';
import {
  FUNCTION_CLIENT_HEADER_PREFIX,
  FUNCTION_HEADERS,
  functionSeesHeader,
  type Deployed,
  type FunctionLogs,
  type FunctionSettings,
  type FunctionVersionView,
  type FunctionView,
} from '../../shared/schemas/functions.ts';
import { projectIdSchema } from '../../shared/schemas/projects.ts';
import type { Deps } from '../context.ts';
import type { ProjectForAgent } from './lifecycle.ts';
import { pageOf, type AnsweredPage, type PageQuery } from './pages.ts';
import { agentFor, prefetchAgent, type AgentPrefetch } from './placement.ts';
import { ownedProjectOf } from './sessions.ts';

/** A deploy: who, which function, its settings and the module's bytes. */
export interface DeployInput extends ProjectForAgent {
  requestId: string;
  accountId: string;
  name: string;
  settings: FunctionSettings;
  body: ReadableStream<Uint8Array> | null;
  /** The declared length, or null when the module streams without one. */
  length: number | null;
  /** `CLOUD_ORIGIN` as the module's check at deploy sees it. */
  origin: string;
  signal: AbortSignal;
}

/** Deploys a new version through the project's agent; `created` tells a new function from a new version. */
export async function deployFunction(deps: Deps, input: DeployInput): Promise<Deployed> {
  const agent = await agentFor(deps, input.project, input.prefetched);
  const query = new URLSearchParams({
    timeout_ms: String(input.settings.timeout_ms),
    memory_mb: String(input.settings.memory_mb),
    max_concurrency: String(input.settings.max_concurrency),
  });
  const headers: Record<string, string> = {
    'content-type': 'application/octet-stream',
    [FUNCTION_HEADERS.maxBytes]: String(deps.settings.SVCD_FUNCTION_MAX_BYTES),
    [FUNCTION_HEADERS.actor]: input.accountId,
    [FUNCTION_HEADERS.origin]: input.origin,
  };
  if (input.length !== null) headers[FUNCTION_HEADERS.length] = String(input.length);
  return deps.agents.json<Deployed>(agent, 'PUT', `${internalPaths.function(input.project.id, input.name)}?${query}`, {
    raw: { body: input.body, headers },
    requestId: input.requestId,
    signal: input.signal,
  });
}

/** One page of the project's functions, by name. */
export async function listProjectFunctions(deps: Deps, projectId: string, query: PageQuery): Promise<AnsweredPage<FunctionView>> {
  const page = await pageOf(deps, ['functions', projectId], query, (limit, after) => listFunctions(deps.db, projectId, limit, after));
  return { items: page.items.map(functionView), next_cursor: page.next_cursor };
}

/** One function; 404 when the project has none by that name. */
export async function projectFunction(deps: Deps, projectId: string, name: string): Promise<FunctionView> {
  const head = await getFunction(deps.db, projectId, name);
  if (!head) throw errors.notFound(`function ${name} not found`);
  return functionView(head);
}

/** One page of the function's versions, newest first; 404 when there is no such function. */
export async function functionVersions(deps: Deps, projectId: string, name: string, query: PageQuery): Promise<AnsweredPage<FunctionVersionView>> {
  const head = await getFunction(deps.db, projectId, name);
  if (!head) throw errors.notFound(`function ${name} not found`);
  // The generation is part of the list's identity: a cursor of a deleted function's versions opens nothing here.
  const page = await pageOf(deps, ['function-versions', projectId, name, head.generation], query, (limit, after) => listVersions(deps.db, head, limit, after));
  return { items: page.items.map(versionView), next_cursor: page.next_cursor };
}

/** Deletes a function through the project's agent (invocations in flight finish); answers it as it was. */
export async function deleteFunction(deps: Deps, input: ProjectForAgent & { requestId: string; accountId: string; name: string }): Promise<FunctionView> {
  const agent = await agentFor(deps, input.project, input.prefetched);
  const answer = await deps.agents.json<{ function: FunctionView }>(agent, 'DELETE', internalPaths.function(input.project.id, input.name), {
    raw: { body: null, headers: { [FUNCTION_HEADERS.actor]: input.accountId } },
    requestId: input.requestId,
  });
  return answer.function;
}

/** The last `tail` lines of the function's log, from its agent. */
export async function functionLogs(deps: Deps, input: ProjectForAgent & { requestId: string; name: string; tail: number }): Promise<FunctionLogs> {
  const agent = await agentFor(deps, input.project, input.prefetched);
  return deps.agents.json<FunctionLogs>(agent, 'GET', `${internalPaths.functionLogs(input.project.id, input.name)}?tail=${input.tail}`, {
    requestId: input.requestId,
  });
}

/**
 * Tells the project's agent that a secret of the project changed, so its next invocation runs with
 * the new set (contract "PUT functions/secrets"). A project that does not exist has no functions;
 * an agent that cannot be told is 503 (the secret is stored: a retry tells it again).
 */
export async function tellSecretsChanged(deps: Deps, requestId: string, projectId: string): Promise<void> {
  const project = await getProject(deps.db, projectId);
  if (!project) return;
  const agent = await agentFor(deps, project);
  await deps.agents.json(agent, 'POST', internalPaths.functionSecretsChanged(projectId), { body: {}, requestId });
}

/** Who invokes: the owner's session (its project read and owned), or a project key the agent verifies. */
export type Invoker =
  | { kind: 'session'; accountId: string; project: ProjectRecord; prefetched: AgentPrefetch | undefined }
  | { kind: 'key'; key: string; projectId: string };

/**
 * Judges the credential of an invocation of the project named by the raw path parameter: a session
 * must stand and own the project (401, then 404); a project key is only parsed here (the agent
 * verifies it: 401 unknown or revoked, 403 another project's).
 */
export async function authorizeInvoker(deps: Deps, input: { token: string; projectIdParam: string | undefined }): Promise<Invoker> {
  if (parseProjectKey(input.token)) {
    return { kind: 'key', key: input.token, projectId: pathParam(input.projectIdParam, 'id', projectIdSchema) };
  }
  const session = await readSessionToken(deps.settings.SVCD_SESSION_SECRET, input.token);
  const projectId = pathParam(input.projectIdParam, 'id', projectIdSchema);
  const prefetched = prefetchAgent(deps, projectId);
  const project = await ownedProjectOf(deps, session, projectId);
  return { kind: 'session', accountId: session.accountId, project, prefetched };
}

/** An invocation as the route parsed it. */
export interface InvokeInput {
  requestId: string;
  invoker: Invoker;
  name: string;
  /** The client's method. */
  method: string;
  /** The path after `/invoke` as received (possibly empty), and the query with its `?` (or empty). */
  rest: string;
  search: string;
  /**
   * The client's headers as it sent them, credential and all (the route undid what the runtime
   * the handlers run in changed); the function's are chosen from them here.
   */
  headers: Headers;
  /** Whether the client sent a body (a `Content-Length` above 0, or chunked), whatever its method. */
  hasBody: boolean;
  /** The `Content-Length` the client declared, or null. */
  length: number | null;
  /** The body when `hasBody`. */
  body: ReadableStream<Uint8Array> | null;
  /** `CLOUD_ORIGIN`: the service's origin as the function should see it. */
  origin: string;
  signal: AbortSignal;
}

/** Statuses whose answers have no body (RFC 9110): a relayed one is answered without it. */
const NULL_BODY_STATUS = new Set([101, 103, 204, 205, 304]);

/**
 * Relays an invocation to the project's agent and answers the function's response as it comes:
 * status, headers (less the hop-by-hop ones) and body, streamed. The agent's own refusals (404,
 * 401/403 for a key, 429, 502, 503, 504) arrive as error envelopes and are passed on the same way.
 */
export async function invokeFunction(deps: Deps, input: InvokeInput): Promise<Response> {
  const { invoker } = input;
  const agent = await invocationAgent(deps, invoker);
  const projectId = invoker.kind === 'session' ? invoker.project.id : invoker.projectId;
  const hop = invocationHop(input);
  hop.headers[FUNCTION_HEADERS.origin] = input.origin;
  if (invoker.kind === 'key') hop.headers[FUNCTION_HEADERS.key] = invoker.key;
  let upstream: Response;
  try {
    upstream = await deps.agents.fetch(agent, hop.method, `${internalPaths.functionInvoke(projectId, input.name)}${input.rest}${input.search}`, {
      raw: { body: input.hasBody ? input.body : null, headers: hop.headers },
      requestId: input.requestId,
      signal: input.signal,
      passThrough: true,
    });
  } catch (err) {
    // A record reused without a read (handlers/domain/placement.ts): read it again next time.
    if (err instanceof ServiceError && err.code === 'orchestrator_unavailable') deps.placement.forgetAgent(agent.agent_id);
    throw err;
  }
  const answer = relayedAnswerHeaders(upstream.headers);
  const body = NULL_BODY_STATUS.has(upstream.status) ? null : upstream.body;
  if (body === null) await upstream.body?.cancel().catch(() => {});
  // `encodeBody: 'manual'`: workerd sends the bytes as the function encoded them, where it would
  // otherwise encode them again by the `Content-Encoding` they carry (Node ignores the field).
  return new Response(body, { status: upstream.status, statusText: statusTextOf(upstream.statusText), headers: answer, encodeBody: 'manual' } as ResponseInit);
}

/**
 * How an invocation crosses to the agent (docs/functions.md "Inside the host agent"): the method a
 * fetch can send — a GET or HEAD with a body goes as a POST, a HEAD without one as a GET, each marked
 * with the client's method — and the headers of that hop: each of the client's headers the function
 * sees under FUNCTION_CLIENT_HEADER_PREFIX, and whether and how long a body the client sent.
 */
export function invocationHop(input: { method: string; headers: Headers; hasBody: boolean; length: number | null }): {
  method: string;
  headers: Record<string, string>;
} {
  const { method, hasBody } = input;
  const listed = connectionTokens(input.headers.get('connection') ?? undefined);
  const headers: Record<string, string> = {};
  input.headers.forEach((value, name) => {
    if (!functionSeesHeader(name, listed)) return;
    const key = FUNCTION_CLIENT_HEADER_PREFIX + name;
    // Only `Set-Cookie` is listed once per value by Headers; a request has no business sending it.
    headers[key] = key in headers ? `${headers[key]}, ${value}` : value;
  });
  if (input.length !== null) headers[FUNCTION_HEADERS.length] = String(input.length);
  if (hasBody) headers[FUNCTION_HEADERS.body] = '1';
  const bodiless = method === 'GET' || method === 'HEAD';
  const hopMethod = hasBody ? (bodiless ? 'POST' : method) : method === 'HEAD' ? 'GET' : method;
  if (hopMethod !== method) headers[FUNCTION_HEADERS.method] = method;
  return { method: hopMethod, headers };
}

/**
 * The agent of the invoked project. A key's project is found by its remembered placement (which
 * never changes) and otherwise read; a project that does not exist answers what the key is worth
 * (401 unknown or revoked, 403 another project's), so a key learns nothing about other ids.
 */
async function invocationAgent(deps: Deps, invoker: Invoker) {
  if (invoker.kind === 'session') return agentFor(deps, invoker.project, invoker.prefetched);
  const { projectId } = invoker;
  const agentId = deps.placement.placementOf(projectId);
  if (agentId !== undefined) return agentFor(deps, { id: projectId, agent_id: agentId }, undefined, { reuse: true });
  const project = await getProject(deps.db, projectId);
  if (!project) {
    const key = await verifyProjectKey(deps.db, deps.settings.SVCD_KEY_PEPPER, invoker.key);
    if (key.projectId !== projectId) throw errors.denied('the project key belongs to another project');
    throw errors.notFound(`project ${projectId} not found`);
  }
  return agentFor(deps, project, undefined, { reuse: true });
}

/**
 * The function's answer headers for the client: hop-by-hop ones dropped, its `Content-Encoding`
 * restored, and the `Content-Length` of an answer to a HEAD (which crossed the agent with an empty body).
 */
function relayedAnswerHeaders(from: Headers): Headers {
  const listed = connectionTokens(from.get('connection') ?? undefined);
  const headLength = from.get(FUNCTION_HEADERS.contentLength);
  const out = new Headers();
  from.forEach((value, name) => {
    if (name === 'set-cookie' || isHopByHop(name, listed)) return;
    if (name === 'content-length' && headLength !== null) return;
    if (name === FUNCTION_HEADERS.contentLength) out.set('content-length', value);
    else out.append(name === FUNCTION_HEADERS.contentEncoding ? 'content-encoding' : name, value);
  });
  for (const cookie of from.getSetCookie()) out.append('set-cookie', cookie);
  return out;
}

/**
 * The function's reason phrase as a Response can carry it: a phrase is bytes (RFC 9110 §15), which
 * Node's fetch hands over decoded as UTF-8, and a Response refuses a character above U+00FF; the
 * bytes go back as they came (each one a character), so the client reads what the function wrote.
 */
export function statusTextOf(text: string): string {
  if (/^[\x00-\xff]*$/.test(text)) return text;
  let out = '';
  for (const byte of new TextEncoder().encode(text)) out += String.fromCharCode(byte);
  return out;
}
