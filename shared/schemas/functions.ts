/**
 * Functions (docs/functions.md): the deploy settings, the function and version records as answered,
 * the logs query and answer, and the internal routes' inputs. One schema per input and answer, shared
 * by the handlers and the host agent.
 */
import { z } from 'zod';
import { isHopByHop } from '../http/hop-by-hop.ts';
import { ID_PATTERNS } from '../ids.ts';
import { timestampSchema } from './common.ts';
import { pageAnswerSchema } from './pagination.ts';

/** Function names (docs/functions.md "Names"). */
export const FUNCTION_NAME_PATTERN = /^[a-z][a-z0-9-]{0,62}$/;

/**
 * Names a function cannot take because a route of the service already answers that path:
 * `…/functions/secrets` is the secrets list (docs/secrets.md).
 */
export const RESERVED_FUNCTION_NAMES = ['secrets'] as const;

const reservedNames: readonly string[] = RESERVED_FUNCTION_NAMES;

/** `{name}` of a function. */
export const functionNameSchema = z
  .string()
  .regex(FUNCTION_NAME_PATTERN, 'must match ^[a-z][a-z0-9-]{0,62}$')
  .refine((n) => !reservedNames.includes(n), { message: `is reserved: ${RESERVED_FUNCTION_NAMES.join(', ')} names a route of the service` })
  .meta({ description: 'a lowercase letter, then up to 62 lowercase letters, digits or `-`' });

/** The bounds and defaults of the per-version settings (docs/functions.md "Deploy"). */
export const FUNCTION_SETTINGS = {
  timeout_ms: { min: 100, max: 60_000, default: 10_000 },
  memory_mb: { min: 32, max: 1024, default: 128 },
  max_concurrency: { min: 1, max: 64, default: 8 },
} as const;

/** A whole number from `min` to `max`, as query text. */
function boundedInt(min: number, max: number, what: string) {
  return z
    .string()
    .refine((s) => /^\d{1,9}$/.test(s) && Number(s) >= min && Number(s) <= max, `must be a whole number from ${min} to ${max}`)
    .transform(Number)
    .meta({ description: `${what}: a whole number from ${min} to ${max}` });
}

const { timeout_ms: T, memory_mb: M, max_concurrency: C } = FUNCTION_SETTINGS;

/** Query of the deploy: the version's settings, each optional (its default otherwise). */
export const deployQuerySchema = z.strictObject({
  timeout_ms: boundedInt(T.min, T.max, `wall-clock limit of one invocation in ms (default ${T.default})`).optional(),
  memory_mb: boundedInt(M.min, M.max, `heap limit of each worker in MiB (default ${M.default})`).optional(),
  max_concurrency: boundedInt(C.min, C.max, `invocations of the function at once (default ${C.default})`).optional(),
});

/** The settings of one version, defaults applied. */
export interface FunctionSettings {
  timeout_ms: number;
  memory_mb: number;
  max_concurrency: number;
}

/** The deploy query with its defaults applied. */
export function settingsOf(query: z.output<typeof deployQuerySchema>): FunctionSettings {
  return {
    timeout_ms: query.timeout_ms ?? T.default,
    memory_mb: query.memory_mb ?? M.default,
    max_concurrency: query.max_concurrency ?? C.default,
  };
}

/** Media types a module is deployed with (docs/functions.md "Deploy"); parameters such as `charset` are allowed. */
export const MODULE_MEDIA_TYPES = ['application/javascript', 'text/javascript'] as const;

/** Whether a `Content-Type` value names a JavaScript module. */
export function isModuleMediaType(value: string | null): boolean {
  if (value === null) return false;
  const type = value.split(';', 1)[0]!.trim().toLowerCase();
  return (MODULE_MEDIA_TYPES as readonly string[]).includes(type);
}

const versionFields = {
  project: z.string().regex(ID_PATTERNS.prj),
  name: z.string().regex(FUNCTION_NAME_PATTERN),
  version: z.int().min(1),
  sha256: z.string().regex(/^[0-9a-f]{64}$/).meta({ description: 'SHA-256 hex of the module bytes' }),
  size: z.int().min(1).meta({ description: 'module size in bytes' }),
  timeout_ms: z.int(),
  memory_mb: z.int(),
  max_concurrency: z.int(),
  created_at: timestampSchema,
};

/** A function as answered: its current version and that version's settings. */
export const functionSchema = z.object({ ...versionFields, updated_at: timestampSchema });
/** A function as answered. */
export type FunctionView = z.output<typeof functionSchema>;

/** One deployed version as answered (`created_at`: when it was deployed). */
export const functionVersionSchema = z.object(versionFields);
/** A version as answered. */
export type FunctionVersionView = z.output<typeof functionVersionSchema>;

/** Answer of `GET …/functions`. */
export const functionListSchema = pageAnswerSchema('functions', functionSchema);
/** Answer of `GET …/functions/{name}/versions`, newest first. */
export const functionVersionListSchema = pageAnswerSchema('versions', functionVersionSchema);

/** Most log lines one answer carries. */
export const FUNCTION_LOG_TAIL_MAX = 1000;
/** Lines answered when `tail` is not given. */
export const FUNCTION_LOG_TAIL_DEFAULT = 100;

/** Query of `GET …/functions/{name}/logs` (and of the agent's internal route). */
export const functionLogsQuerySchema = z.strictObject({
  tail: boundedInt(1, FUNCTION_LOG_TAIL_MAX, `lines (default ${FUNCTION_LOG_TAIL_DEFAULT})`).optional(),
});

/** The logs answer: the last lines, oldest first, without their line ends, secrets redacted. */
export const functionLogsSchema = z.object({
  project: z.string().regex(ID_PATTERNS.prj),
  name: z.string().regex(FUNCTION_NAME_PATTERN),
  lines: z.array(z.string()),
});
/** The logs answer as a type. */
export type FunctionLogs = z.output<typeof functionLogsSchema>;

// Internal API (handlers → host agent)

/** Headers of the internal function routes; a client's headers of these names never reach an agent. */
export const FUNCTION_HEADERS = {
  /** Deploy: the byte limit the agent enforces too. */
  maxBytes: 'x-svc-fn-max-bytes',
  /** Deploy, invoke: the `Content-Length` the client declared, when it declared one. */
  length: 'x-svc-fn-length',
  /** Deploy, delete: the account id for the receipt. */
  actor: 'x-svc-fn-actor',
  /** Invoke: the project key the client presented (the agent verifies it). */
  key: 'x-svc-fn-key',
  /** Invoke: `CLOUD_ORIGIN` as the function should see it. */
  origin: 'x-svc-fn-origin',
  /**
   * Invoke, handlers to agent: `1` when the client sent a body (a `Content-Length` above 0, or a
   * chunked one), whatever its method; the agent never judges by how the hop itself was framed.
   */
  body: 'x-svc-fn-body',
  /**
   * A function's own `Content-Encoding`, renamed on its way through the service so that no HTTP
   * client on the path decodes the body (fetch does); restored before the client gets it.
   */
  contentEncoding: 'x-svc-fn-content-encoding',
  /**
   * The client's method where a hop cannot carry it as it is. Handlers to agent: a HEAD without a
   * body travels as a GET, a GET or HEAD with a body as a POST (fetch sends neither with a body).
   * Agent to worker: a HEAD, sent as a GET (undici closes a connection after a HEAD, and a worker's
   * connections are pipes that cannot be opened again).
   */
  method: 'x-svc-fn-method',
  /** Worker to handlers: the `Content-Length` of an answer to a HEAD, which travels with an empty body. */
  contentLength: 'x-svc-fn-content-length',
} as const;

/** Prefix of every internal function header. */
export const FUNCTION_HEADER_PREFIX = 'x-svc-fn-';

/**
 * Invoke, handlers to agent: every header of the client's request that the function sees travels
 * under this prefix (`x-svc-fn-h-accept-encoding`), and nothing else becomes one of the function's
 * headers. No HTTP client on the hop adds, replaces or removes a header of such a name, as workerd's
 * fetch does with `Accept-Encoding`, `CF-Worker` and `CF-Connecting-IP`, and Node's with `Accept`,
 * `User-Agent` and others; and the hop's own `X-Request-Id` (the service's) never meets the
 * client's (docs/functions.md "Inside the host agent").
 */
export const FUNCTION_CLIENT_HEADER_PREFIX = 'x-svc-fn-h-';

/** The methods a function is invoked with (docs/functions.md "Invoke"). */
export const FUNCTION_METHODS: readonly string[] = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];

/**
 * Request headers a function never sees (docs/functions.md "Invoke") besides the hop-by-hop ones:
 * the client's credential and what frames the request on one connection (`Content-Length` is the
 * client's again on the function's request, given beside the headers).
 */
const UNSEEN_REQUEST_HEADERS: ReadonlySet<string> = new Set(['authorization', 'host', 'content-length', 'expect']);

/**
 * Whether a function sees the client's request header `name` (lowercase): not the credential, not
 * `Host`, `Content-Length` or `Expect`, not a hop-by-hop one (RFC 9110 §7.6.1, with the names the
 * client's `Connection` listed, `listed`), not one of the service's internal names.
 */
export function functionSeesHeader(name: string, listed: ReadonlySet<string> | null): boolean {
  return !UNSEEN_REQUEST_HEADERS.has(name) && !name.startsWith(FUNCTION_HEADER_PREFIX) && !isHopByHop(name, listed);
}

/** Answer of the agent's deploy route. */
export const deployedSchema = z.object({ function: functionSchema, created: z.boolean() });
/** Answer of the agent's deploy route, as a type. */
export type Deployed = z.output<typeof deployedSchema>;
