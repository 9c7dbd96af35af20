/**
 * Functions of one project (docs/functions.md): deploy a module as a new version, read, list its
 * versions and logs, delete, and invoke it with the client's session or project key.
 */
import { errorOf, withCleanup, type CallOptions } from './http.ts';
import { listPages, type Pages } from './pages.ts';
import { ProjectApi } from './project-apis.ts';
import * as R from './routes.gen.ts';
import { withMethod } from './site.ts';
import type { FunctionInfo, FunctionLogs, FunctionsPage, FunctionVersion, FunctionVersionsPage, PageInput } from './types.ts';

/** Settings of a deployed version (docs/functions.md "Deploy"); each takes the service's default when left out. */
export interface DeployOptions extends CallOptions {
  /** Wall-clock limit of one invocation, 100 to 60000 ms. */
  timeoutMs?: number;
  /** Heap limit of each worker, 32 to 1024 MiB. */
  memoryMb?: number;
  /** Invocations at once, 1 to 64. */
  maxConcurrency?: number;
}

/** One invocation: what the function's `fetch(request)` receives. */
export interface InvokeInit extends CallOptions {
  /** Default GET (POST when a body is given). */
  method?: string;
  /** The path after `…/invoke`, such as `/users/7`. */
  path?: string;
  query?: Record<string, string>;
  headers?: Record<string, string>;
  body?: BodyInit | ReadableStream<Uint8Array> | null;
}

/** The error codes only the service answers an invocation with (docs/functions.md "Errors"). */
const SERVICE_CODES = new Set([
  'function_busy',
  'function_timeout',
  'function_bad_output',
  'function_runtime_missing',
  'authentication_required',
  'authorization_denied',
  'not_found',
  'invalid_request',
  'orchestrator_unavailable',
  'upstream_unavailable',
]);

/** The functions of one project. */
export class FunctionsApi extends ProjectApi {
  /** `PUT …/functions/{name}`: deploys `module` (one bundled ES module) as the function's new version. */
  deploy(name: string, module: string | Uint8Array | Blob | ReadableStream<Uint8Array>, options: DeployOptions = {}): Promise<FunctionInfo> {
    const query = { timeout_ms: options.timeoutMs, memory_mb: options.memoryMb, max_concurrency: options.maxConcurrency };
    const body = module instanceof Uint8Array ? new Blob([module as Uint8Array<ArrayBuffer>]) : module;
    return this.t.call(R.functions.deploy, { params: { ...this.project, name }, query, body, headers: { 'content-type': 'application/javascript' } }, options);
  }

  /** `GET …/functions`: the project's functions, page by page. */
  list(input: PageInput = {}, call?: CallOptions): Pages<FunctionsPage, FunctionInfo> {
    return listPages(this.t, R.functions.list, input, call, (p) => p.functions, { params: this.project });
  }

  /** `GET …/functions/{name}`: the function and its current version. */
  get(name: string, call?: CallOptions): Promise<FunctionInfo> {
    return this.t.call(R.functions.read, { params: { ...this.project, name } }, call);
  }

  /** `GET …/functions/{name}/versions`: every deployed version, newest first. */
  versions(name: string, input: PageInput = {}, call?: CallOptions): Pages<FunctionVersionsPage, FunctionVersion> {
    return listPages(this.t, R.functions.versions, input, call, (p) => p.versions, { params: { ...this.project, name } });
  }

  /** `DELETE …/functions/{name}`: invocations in flight finish. */
  delete(name: string, call?: CallOptions): Promise<FunctionInfo> {
    return this.t.call(R.functions.remove, { params: { ...this.project, name } }, call);
  }

  /** `GET …/functions/{name}/logs`: the last lines of its console, secrets redacted. */
  logs(name: string, options: { tail?: number } & CallOptions = {}): Promise<FunctionLogs> {
    const { tail, ...call } = options;
    return this.t.call(R.functions.logs, { params: { ...this.project, name }, query: { tail } }, call);
  }

  /**
   * Any method on `…/functions/{name}/invoke[/{path}]`, with the session or the project key: the
   * function's own `Response`, whatever its status. An answer of the service itself (an unknown
   * function, `function_busy`, `function_timeout`, …: its JSON error envelope) is thrown as a `SvcError`.
   */
  async invoke(name: string, init: InvokeInit = {}): Promise<Response> {
    const method = (init.method ?? (init.body === undefined || init.body === null ? 'GET' : 'POST')).toUpperCase();
    // `…/invoke`, or `…/invoke/:rest+` with the path as given (the function reads it undecoded).
    const routes = R.functions.invoke.filter((r) => r.path.endsWith('+') === !!init.path);
    const params = { ...this.project, name, ...(init.path ? { rest: init.path.replace(/^\/+/, '') } : {}) };
    const { response, done } = await this.t.open(
      withMethod(routes, method),
      {
        params: params as { id: string; name: string; rest: string },
        ...(init.query ? { query: init.query } : {}),
        ...(init.headers ? { headers: init.headers } : {}),
        ...(init.body === undefined ? {} : { body: init.body }),
        streaming: true,
        accept: statusesBelow(600),
      },
      init,
    );
    if (response.ok || !/^application\/json\b/i.test(response.headers.get('content-type') ?? '')) {
      if (!response.body) {
        done();
        return response;
      }
      return new Response(withCleanup(response.body, done), { status: response.status, statusText: response.statusText, headers: response.headers });
    }
    // A JSON error answer may be the service's envelope: read it (small) and judge.
    const text = await response.text();
    done();
    const copy = new Response(text, { status: response.status, statusText: response.statusText, headers: response.headers });
    try {
      const code = (JSON.parse(text) as { error?: { code?: unknown } })?.error?.code;
      if (typeof code === 'string' && SERVICE_CODES.has(code)) throw await errorOf(copy.clone());
    } catch (err) {
      if (!(err instanceof SyntaxError)) throw err;
    }
    return copy;
  }
}

function statusesBelow(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i);
}
