/**
 * The OpenAPI 3.1 document of the public API (docs/api.md "How the reference is made"), generated
 * from the route declarations (shared/api/) and the zod schemas they name (shared/schemas/) with zod's
 * own JSON Schema output (draft 2020-12, the dialect OpenAPI 3.1 uses). Requests are described by
 * what a client may send (zod's input side), answers by what the service sends (its output side).
 * Errors come from the one table of shared/errors.ts. Web-standard only: the handlers serve it.
 */
import { z } from 'zod';
import { codesOfStatus, errorEnvelopeSchema } from '../schemas/common.ts';
import { keySchema } from '../schemas/keys.ts';
import { projectSchema } from '../schemas/projects.ts';
import { realtimeEventSchema } from '../schemas/realtime.ts';
import { receiptSchema } from '../schemas/receipts.ts';
import { secretMetadataSchema } from '../schemas/secrets.ts';
import { snapshotBackupSchema, snapshotLineageSchema, snapshotSchema } from '../schemas/snapshots.ts';
import { bucketSchema, objectRowSchema } from '../schemas/storage.ts';
import { ERROR_STATUS, WWW_AUTHENTICATE } from '../errors.ts';
import { patternParams, ROUTES, TAGS, type Access, type Media, type RouteDecl } from '../api/index.ts';

/** A JSON Schema (draft 2020-12) object. */
export type JsonSchema = Record<string, unknown>;

/** The document, as plain JSON. */
export interface OpenApiDocument {
  openapi: '3.1.0';
  info: Record<string, unknown>;
  servers: { url: string; description: string }[];
  tags: { name: string; description: string }[];
  paths: Record<string, Record<string, Operation>>;
  components: {
    schemas: Record<string, JsonSchema>;
    responses: Record<string, unknown>;
    headers: Record<string, unknown>;
    securitySchemes: Record<string, unknown>;
  };
}

/** One operation of the document (the fields this generator writes). */
export interface Operation {
  operationId: string;
  tags: string[];
  summary: string;
  description?: string;
  security: Record<string, string[]>[];
  parameters?: { name: string; in: 'path' | 'query' | 'header'; required: boolean; description?: string; schema: JsonSchema; explode?: boolean }[];
  requestBody?: { required: boolean; content: Record<string, { schema: JsonSchema }> };
  responses: Record<string, unknown>;
  'x-svc-route': string;
  'x-svc-pass-through'?: true;
}

/** Answers and inputs that read better named, once, under `components.schemas`. */
const NAMED = z.registry<{ id: string }>();
NAMED.add(projectSchema, { id: 'Project' });
NAMED.add(keySchema, { id: 'ProjectKey' });
NAMED.add(snapshotSchema, { id: 'Snapshot' });
NAMED.add(snapshotLineageSchema, { id: 'SnapshotLineage' });
NAMED.add(snapshotBackupSchema, { id: 'SnapshotBackup' });
NAMED.add(bucketSchema, { id: 'Bucket' });
NAMED.add(objectRowSchema, { id: 'ObjectRow' });
NAMED.add(realtimeEventSchema, { id: 'RealtimeEvent' });
NAMED.add(secretMetadataSchema, { id: 'FunctionSecret' });
NAMED.add(receiptSchema, { id: 'Receipt' });

const SAFE = Number.MAX_SAFE_INTEGER;

/** Drops what only repeats the type: zod's date-time pattern beside `format`, the safe-integer bounds. */
function tidy(ctx: { jsonSchema: JsonSchema }): void {
  const s = ctx.jsonSchema;
  if (s.format === 'date-time') delete s.pattern;
  if (s.type === 'integer') {
    if (s.minimum === -SAFE) delete s.minimum;
    if (s.maximum === SAFE) delete s.maximum;
  }
}

/** Rewrites `#/$defs/X` references into `#/components/schemas/X`, everywhere in `value`. */
function rehome(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(rehome);
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    out[k] = k === '$ref' && typeof v === 'string' ? v.replace(/^#\/\$defs\//, '#/components/schemas/') : rehome(v);
  }
  return out;
}

/** Converts a schema, moving its named parts into `components` (the same name is always the same schema). */
function convert(schema: z.ZodType, io: 'input' | 'output', components: Record<string, JsonSchema>): JsonSchema {
  const raw = z.toJSONSchema(schema, {
    target: 'draft-2020-12',
    io,
    unrepresentable: 'any',
    metadata: io === 'output' ? NAMED : undefined,
    override: tidy,
  }) as JsonSchema;
  const { $schema: _dialect, $defs, ...rest } = raw;
  for (const [name, def] of Object.entries(($defs ?? {}) as Record<string, JsonSchema>)) {
    const moved = rehome(def) as JsonSchema;
    const known = components[name];
    if (known && JSON.stringify(known) !== JSON.stringify(moved)) throw new Error(`openapi: two different schemas are named ${name}`);
    components[name] = moved;
  }
  return rehome(rest) as JsonSchema;
}

/** The OpenAPI path of an itty-router pattern: `:id` → `{id}`, `:key+` → `{key}`. */
export function openApiPath(pattern: string): string {
  return pattern.replace(/:([A-Za-z_][A-Za-z0-9_]*)\+?/g, '{$1}');
}

const SECURITY: Record<Access, Record<string, string[]>[]> = {
  none: [],
  session: [{ session: [] }],
  'session-or-key': [{ session: [] }, { projectKey: [] }],
  key: [{ projectKey: [] }],
};

const STATUS_TEXT: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  409: 'Conflict',
  413: 'Content Too Large',
  416: 'Range Not Satisfiable',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  501: 'Not Implemented',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
  504: 'Gateway Timeout',
};

function operationId(method: string, pattern: string): string {
  const words = pattern
    .split('/')
    .filter(Boolean)
    .map((part) => part.replace(/^:/, 'by_').replace(/\+$/, '').replace(/\.json$/, '_json'))
    .join('_');
  return `${method.toLowerCase()}_${words}`.replace(/[^A-Za-z0-9_]/g, '_');
}

/** The schema of a body that is not JSON: text for event streams, any bytes otherwise. */
function mediaSchema({ type, description }: Media): JsonSchema {
  return type.startsWith('text/') ? { type: 'string', description } : { description };
}

function headerObjects(headers: Record<string, string> | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = { 'X-Request-Id': { $ref: '#/components/headers/RequestId' } };
  for (const [name, description] of Object.entries(headers ?? {})) out[name] = { description, schema: { type: 'string' } };
  return out;
}

function parametersOf(route: RouteDecl, components: Record<string, JsonSchema>): NonNullable<Operation['parameters']> {
  const names = patternParams(route.path);
  const described = Object.keys(route.params ?? {});
  if (names.join() !== described.join()) {
    throw new Error(`openapi: ${route.key} describes parameters [${described.join(', ')}], its pattern has [${names.join(', ')}]`);
  }
  const parameters: NonNullable<Operation['parameters']> = [];
  for (const name of names) {
    const rest = route.path.includes(`:${name}+`);
    parameters.push({
      name,
      in: 'path',
      required: true,
      ...(rest ? { description: 'the rest of the path: may contain `/`; other reserved characters percent-encoded' } : {}),
      schema: convert(route.params![name]!, 'input', components),
    });
  }
  if (route.query && route.query !== 'forwarded') {
    const q = convert(route.query, 'input', components) as { properties?: Record<string, JsonSchema>; required?: string[] };
    for (const [name, schema] of Object.entries(q.properties ?? {})) {
      parameters.push({
        name,
        in: 'query',
        required: (q.required ?? []).includes(name),
        ...(route.repeatable?.includes(name) ? { description: 'may be given more than once', explode: true } : {}),
        schema,
      });
    }
  }
  for (const [name, h] of Object.entries(route.headers ?? {})) {
    parameters.push({ name, in: 'header', required: h.required ?? false, description: h.description, schema: { type: 'string' } });
  }
  return parameters;
}

function responsesOf(route: RouteDecl, components: Record<string, JsonSchema>, usedErrors: Set<number>): Record<string, unknown> {
  const responses: Record<string, unknown> = {};
  for (const [status, answer] of Object.entries(route.answers)) {
    const content: Record<string, unknown> = {};
    if (answer.json) content['application/json'] = { schema: convert(answer.json, 'output', components) };
    if (answer.content) content[answer.content.type] = { schema: mediaSchema(answer.content) };
    // What a route relays unchanged (the engine's answer, a function's) may have any status.
    responses[route.answerFlow === 'stream' ? 'default' : status] = {
      description: answer.description,
      headers: headerObjects(answer.headers),
      ...(Object.keys(content).length > 0 ? { content } : {}),
    };
  }
  for (const status of route.errors) {
    usedErrors.add(status);
    responses[String(status)] = { $ref: `#/components/responses/Error${status}` };
  }
  return responses;
}

function operationOf(route: RouteDecl, components: Record<string, JsonSchema>, usedErrors: Set<number>): { method: string; path: string; op: Operation } {
  const parameters = parametersOf(route, components);
  const op: Operation = {
    operationId: operationId(route.method, route.path),
    tags: [TAGS[route.tag]],
    summary: route.summary,
    ...(route.description ? { description: route.description } : {}),
    security: SECURITY[route.access],
    ...(parameters.length > 0 ? { parameters } : {}),
    responses: responsesOf(route, components, usedErrors),
    'x-svc-route': route.key,
    ...(route.servedBy === 'agent' ? { 'x-svc-pass-through': true as const } : {}),
  };
  const { body } = route;
  if (body.flow === 'json') {
    op.requestBody = { required: !body.optional, content: { 'application/json': { schema: convert(body.schema, 'input', components) } } };
  } else if (body.flow === 'bytes' || body.flow === 'stream') {
    op.requestBody = { required: false, content: { [body.media.type]: { schema: mediaSchema(body.media) } } };
  }
  return { method: route.method.toLowerCase(), path: openApiPath(route.path), op };
}

/** Builds the document from declarations (the service's own by default). */
export function buildOpenApiDocument(routes: readonly RouteDecl[] = ROUTES): OpenApiDocument {
  const schemas: Record<string, JsonSchema> = {};
  const usedErrors = new Set<number>();
  const paths: OpenApiDocument['paths'] = {};
  for (const route of routes) {
    const { method, path, op } = operationOf(route, schemas, usedErrors);
    paths[path] ??= {};
    if (paths[path][method]) throw new Error(`openapi: ${method.toUpperCase()} ${path} is described twice`);
    paths[path][method] = op;
  }
  const responses: Record<string, unknown> = {};
  for (const status of [...usedErrors].sort((a, b) => a - b)) {
    const codes = codesOfStatus(status);
    if (codes.length === 0) throw new Error(`openapi: no error code is answered with status ${status} (shared/errors.ts)`);
    schemas[`Error${status}`] = convert(errorEnvelopeSchema(codes), 'output', schemas);
    const headers = headerObjects(
      status === 401 ? { 'WWW-Authenticate': `\`${WWW_AUTHENTICATE}\`` } : status === 416 ? { 'Content-Range': '`bytes */size`' } : undefined,
    );
    responses[`Error${status}`] = {
      description: `${STATUS_TEXT[status] ?? 'Error'}: ${codes.map((c) => `\`${c}\``).join(', ')}`,
      headers,
      content: { 'application/json': { schema: { $ref: `#/components/schemas/Error${status}` } } },
    };
  }
  schemas.ErrorEnvelope = convert(errorEnvelopeSchema(), 'output', schemas);
  return {
    openapi: '3.1.0',
    info: {
      title: 'svc-cloud',
      version: '0',
      summary: 'Projects with one database engine each, object storage, realtime, function secrets, and the /v2 data plane.',
      description:
        'The control plane under `/v0` and the data plane under `/v2`. Every error is the envelope ' +
        '`{"error":{"code","message"}}` with the status of its code; every answer carries `X-Request-Id`. ' +
        `Error codes: ${Object.keys(ERROR_STATUS).map((c) => `\`${c}\``).join(', ')}.`,
    },
    servers: [{ url: '/', description: 'the service\'s origin (`/v0` and `/v2` on one base URL)' }],
    tags: Object.values(TAGS).map((name) => ({ name, description: name })),
    paths,
    components: {
      schemas,
      responses,
      headers: { RequestId: { description: 'the request\'s id (`req_` + 16 hex), also in every server log line about it', schema: { type: 'string' } } },
      securitySchemes: {
        session: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'a session token from `POST /v0/signup` or `POST /v0/sessions`' },
        projectKey: { type: 'http', scheme: 'bearer', bearerFormat: 'svc1_<key_id>_<secret>', description: 'a project key from `POST /v0/projects/{id}/keys`' },
      },
    },
  };
}

let built: string | undefined;

/** The service's document as JSON text, built once per process (it depends on nothing but code). */
export function openApiJson(): string {
  built ??= JSON.stringify(buildOpenApiDocument());
  return built;
}
