/**
 * Checks answers against the service's OpenAPI document (docs/api.md "How the reference is made"):
 * finds the operation of a method and path, then validates a JSON body against the schema the
 * document gives for that status (JSON Schema 2020-12, formats included), so a field that drifts
 * from the document fails the suite that received it. End-to-end suites fetch the document from
 * the service they drive (`GET /v0/openapi.json`); `callJson` (./http.ts) checks every answer it gets.
 */
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { expect } from 'vitest';

// ajv-formats is CommonJS with a default export that TypeScript sees one level down.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (ajv: Ajv2020) => Ajv2020;

/** The parts of the document this checker reads. */
interface Doc {
  paths: Record<string, Record<string, { 'x-svc-route'?: string; responses: Record<string, unknown> }>>;
  components: { responses?: Record<string, unknown> };
}

interface Op {
  method: string;
  path: string;
  match: RegExp;
  /** Literal characters of the pattern: the more, the more specific. */
  weight: number;
  responses: Record<string, unknown>;
}

const ID = 'https://svc-cloud.invalid/openapi.json';

/** Escapes a JSON pointer token (RFC 6901). */
function token(s: string): string {
  return s.replace(/~/g, '~0').replace(/\//g, '~1');
}

/** Validates answers against one document. */
export class AnswerChecker {
  readonly #ajv: Ajv2020;
  readonly #ops: Op[] = [];
  readonly #doc: Doc;
  readonly #compiled = new Map<string, ValidateFunction>();

  constructor(doc: unknown) {
    this.#doc = doc as Doc;
    // Not strict: the document's own keywords (`openapi`, `paths`, `x-svc-…`) sit around the schemas.
    this.#ajv = new Ajv2020({ strict: false, allErrors: true });
    addFormats(this.#ajv);
    this.#ajv.addSchema({ ...(doc as object), $id: ID });
    for (const [path, methods] of Object.entries(this.#doc.paths)) {
      for (const [method, op] of Object.entries(methods)) {
        const route = op['x-svc-route'] ?? `${method.toUpperCase()} ${path}`;
        const pattern = route.slice(route.indexOf(' ') + 1);
        const source = pattern
          .split('/')
          .map((seg) => (seg.endsWith('+') && seg.startsWith(':') ? '.+' : seg.startsWith(':') ? '[^/]+' : seg.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
          .join('/');
        this.#ops.push({ method: method.toUpperCase(), path, match: new RegExp(`^${source}$`), weight: pattern.replace(/:[^/]+/g, '').length, responses: op.responses });
      }
    }
  }

  /** The operation serving `method path` (path without query), or undefined. */
  operation(method: string, path: string): { path: string; responses: Record<string, unknown> } | undefined {
    const m = method.toUpperCase() === 'HEAD' ? ['HEAD'] : [method.toUpperCase()];
    return this.#ops.filter((op) => m.includes(op.method) && op.match.test(path)).sort((a, b) => b.weight - a.weight)[0];
  }

  /**
   * Problems of a JSON answer to `method path` with `status`: the operation missing from the
   * document, the status not documented, or the body not matching its schema. Empty when it fits.
   */
  problems(method: string, rawPath: string, status: number, body: unknown): string[] {
    const path = rawPath.split('?', 1)[0]!;
    const op = this.operation(method, path);
    if (!op) return [`${method} ${path} is not in the OpenAPI document`];
    const opPath = `${ID}#/paths/${token(op.path)}/${method.toLowerCase()}/responses`;
    type Response = { $ref?: string; content?: Record<string, unknown> } | undefined;
    let response = op.responses[String(status)] as Response;
    let pointer = `${opPath}/${status}`;
    if (!response && op.responses.default) {
      response = op.responses.default as Response;
      pointer = `${opPath}/default`;
    }
    if (!response) return [`${method} ${op.path} answered ${status}, which the document does not list`];
    if (response.$ref) {
      const name = response.$ref.replace('#/components/responses/', '');
      response = this.#doc.components.responses?.[name] as Response;
      pointer = `${ID}#/components/responses/${token(name)}`;
    }
    if (!response?.content?.['application/json']) return [`${method} ${op.path} ${status} has no JSON body in the document`];
    const ref = `${pointer}/content/application~1json/schema`;
    let validate = this.#compiled.get(ref);
    if (!validate) {
      validate = this.#ajv.compile({ $ref: ref });
      this.#compiled.set(ref, validate);
    }
    if (validate(body)) return [];
    return (validate.errors ?? []).map((e) => `${method} ${op.path} ${status}: ${e.instancePath || '(body)'} ${e.message ?? ''} ${JSON.stringify(e.params)}`);
  }

  /** Fails the test when a JSON answer does not fit the document. */
  expectFits(method: string, path: string, status: number, body: unknown): void {
    expect(this.problems(method, path, status, body), `${method} ${path} → ${status} against the OpenAPI document`).toEqual([]);
  }
}

const byBase = new Map<string, Promise<AnswerChecker>>();

/** The checker of the service at `base`, from its own `GET /v0/openapi.json` (fetched once per base). */
export function checkerOf(base: string): Promise<AnswerChecker> {
  let checker = byBase.get(base);
  if (!checker) {
    checker = fetch(`${base}/v0/openapi.json`).then(async (r) => {
      if (r.status !== 200) throw new Error(`GET ${base}/v0/openapi.json answered ${r.status}`);
      return new AnswerChecker(await r.json());
    });
    byBase.set(base, checker);
  }
  return checker;
}

/**
 * Checks a fetched answer against the document of the service at `base` when its body is JSON,
 * and answers the parsed body (the response is consumed). Non-JSON answers are left alone.
 */
export async function checkedJson(base: string, method: string, path: string, response: Response): Promise<any> {
  const type = response.headers.get('content-type') ?? '';
  if (!type.startsWith('application/json')) return undefined;
  const body = await response.json();
  (await checkerOf(base)).expectFits(method, path, response.status, body);
  return body;
}
