/**
 * The internal-API client (handlers → host agent, docs/architecture.md "The internal API"). Every
 * call carries a short-lived JWT (one token serves the calls of TOKEN_REUSE_MS, well inside its
 * 30 s life: signing costs about 0.1 ms, as much as a warm function invocation's whole relay
 * should); the agent's error envelopes come back as the same
 * ServiceError, so a handler can simply let them propagate. An unreachable agent is 503 `orchestrator_unavailable`: its tenants move only when an operator declares it lost (docs/durability.md).
 */
import { neverConnected } from './http/failures.ts';
import { issueInternalToken } from './auth.ts';
import { ServiceError, errors, isErrorCode } from './errors.ts';

/** Where an agent listens for internal calls. */
export interface AgentTarget {
  agent_id: string;
  internal_url: string;
}

/** How long one signed internal token is reused (its life is 30 s; an agent's clock may run ahead). */
const TOKEN_REUSE_MS = 15_000;

/** Options of one internal call. */
export interface CallOptions {
  body?: unknown;
  /** Raw request body (streams bytes through without buffering). */
  raw?: { body: ReadableStream<Uint8Array> | Uint8Array | null; headers?: Record<string, string> };
  requestId?: string;
  signal?: AbortSignal;
  /**
   * Answer the agent's response whatever its status, as a relay does (a function's own answer,
   * docs/functions.md "Invoke"): an error envelope is then the caller's to pass on.
   */
  passThrough?: boolean;
}

/** The client handlers use to reach host agents. */
export interface AgentClient {
  /** Calls the agent and answers its JSON body; an error envelope is rethrown as ServiceError. */
  json<T>(agent: AgentTarget, method: string, path: string, options?: CallOptions): Promise<T>;
  /** Calls the agent and answers the raw successful Response (for byte streams). */
  fetch(agent: AgentTarget, method: string, path: string, options?: CallOptions): Promise<Response>;
}

/** Builds an agent client signing with `internalSecret`; `fetchImpl` defaults to the global fetch. */
export function createAgentClient(internalSecret: string, fetchImpl: typeof fetch = (...a) => fetch(...a)): AgentClient {
  let signed: { token: Promise<string>; until: number } | null = null;
  const tokenNow = (): Promise<string> => {
    const now = Date.now();
    if (!signed || now >= signed.until) {
      const token = issueInternalToken(internalSecret);
      signed = { token, until: now + TOKEN_REUSE_MS };
      token.catch(() => (signed = null));
    }
    return signed.token;
  };
  async function send(agent: AgentTarget, method: string, path: string, options: CallOptions = {}): Promise<Response> {
    const token = await tokenNow();
    const headers: Record<string, string> = { authorization: `Bearer ${token}` };
    if (options.requestId) headers['x-request-id'] = options.requestId;
    let body: BodyInit | undefined;
    if (options.raw) {
      Object.assign(headers, options.raw.headers ?? {});
      body = (options.raw.body ?? undefined) as BodyInit | undefined;
    } else if (options.body !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(options.body);
    }
    let response: Response;
    try {
      response = await fetchImpl(new URL(path, agent.internal_url), {
        method,
        headers,
        body,
        signal: options.signal,
        // An agent never redirects; a relayed answer's redirect is the client's to follow.
        redirect: 'manual',
        // Streams need half duplex in Node's fetch; workers ignore the field.
        ...(body instanceof ReadableStream ? { duplex: 'half' } : {}),
      } as RequestInit);
    } catch (err) {
      if (options.signal?.aborted) throw err;
      // A relayed call the agent took and then dropped (it died mid-call) is lost, never replayed:
      // the upstream failed (docs/functions.md "Invoke"). Only a connection that was never made is
      // the agent being unreachable; workerd names neither, and its failures count as dropped.
      if (options.passThrough && !neverConnected(err)) throw errors.upstream(`host agent ${agent.agent_id} failed during the call`);
      throw errors.orchestrator(`host agent ${agent.agent_id} is unreachable`);
    }
    if (!response.ok && !options.passThrough) throw await toServiceError(response, agent);
    return response;
  }

  return {
    async json<T>(agent: AgentTarget, method: string, path: string, options?: CallOptions): Promise<T> {
      const response = await send(agent, method, path, options);
      return (await response.json()) as T;
    },
    fetch: send,
  };
}

async function toServiceError(response: Response, agent: AgentTarget): Promise<ServiceError> {
  let parsed: unknown;
  try {
    parsed = await response.json();
  } catch {
    parsed = undefined;
  }
  const error = (parsed as { error?: { code?: unknown; message?: unknown } } | undefined)?.error;
  if (error && isErrorCode(error.code) && typeof error.message === 'string') {
    // An agent that refuses our token is a deployment fault, not the client's credential problem.
    if (error.code === 'authentication_required') {
      return errors.orchestrator(`host agent ${agent.agent_id} refused the internal credential`);
    }
    return new ServiceError(error.code, error.message);
  }
  return errors.orchestrator(`host agent ${agent.agent_id} answered ${response.status}`);
}
