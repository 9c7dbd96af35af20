/**
 * Every (route, status) the suites observe, checked against the OpenAPI document when the run ends
 * (docs/api.md "How the reference is made"; test/setup/statuses.ts). Two sources record: the
 * handlers' own request log line (route pattern and status) of the in-process service
 * (./service.ts), and every answer of the service a suite receives through `fetch`
 * (test/setup/record-fetch.ts), attributed to its route by the declarations' matcher. Each test
 * process appends to a file of its own in the run's directory; nothing here can fail a test.
 */
import { appendFileSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { inject } from 'vitest';
import { matchRoute, refusesTrailingSlash, ROUTES } from '../../shared/api/index.ts';

/** One observation: the route's key (`"<METHOD> <pattern>"`) and the status answered. */
export interface Observed {
  route: string;
  status: number;
}

declare module 'vitest' {
  export interface ProvidedContext {
    /** Where this run's test processes record the statuses they observe (test/setup/statuses.ts). */
    statusesDir: string;
  }
}

const seen = new Set<string>();
let file: string | null | undefined;

function fileOfThisProcess(): string | null {
  if (file === undefined) {
    let dir: string | undefined;
    try {
      dir = inject('statusesDir');
    } catch {
      dir = undefined;
    }
    file = dir ? join(dir, `${process.pid}.jsonl`) : null;
  }
  return file;
}

const DECLARED = new Set(ROUTES.map((r) => r.key));

/**
 * Records that `route` (`"<METHOD> <pattern>"`, as a request log line names it) answered `status`:
 * public routes only (not the agents' internal API), and not a CORS preflight, answered for every
 * path (docs/api.md "Browsers and CORS"), unless the route declares OPTIONS (an invocation's).
 */
export function observeStatus(route: string, status: number): void {
  if (!(status > 0) || !/^[A-Z]+ \/(v0|v2|console)(\/|$)/.test(route)) return;
  if (route.startsWith('OPTIONS ') && !DECLARED.has(route)) return;
  const line = JSON.stringify({ route, status } satisfies Observed);
  if (seen.has(line)) return;
  seen.add(line);
  const to = fileOfThisProcess();
  if (!to) return;
  try {
    appendFileSync(to, `${line}\n`);
  } catch {
    // The run's directory is gone (its teardown ran): nothing left to check.
  }
}

/**
 * Records an answer of the service to `method url`, attributed to the route the handlers would
 * have served it with: only answers that carry the service's request id (a fake server's do not),
 * and none the handlers answer before routing (a path with a trailing slash no route takes).
 */
export function observeAnswer(method: string, url: string, response: Response): void {
  if (!/^req_[0-9a-f]{16}$/.test(response.headers.get('x-request-id') ?? '')) return;
  const { pathname } = new URL(url);
  if (refusesTrailingSlash(pathname)) return;
  const match = matchRoute(method.toUpperCase(), pathname);
  if (match) observeStatus(match.route.key, response.status);
}

/** Every observation recorded under `dir` (one file per test process). */
export function readObserved(dir: string): Observed[] {
  const out = new Map<string, Observed>();
  for (const name of readdirSync(dir)) {
    for (const line of readFileSync(join(dir, name), 'utf8').split('\n')) {
      if (line) out.set(line, JSON.parse(line) as Observed);
    }
  }
  return [...out.values()];
}

/** The parts of the document this check reads. */
interface Doc {
  paths: Record<string, Record<string, { 'x-svc-route'?: string; responses: Record<string, unknown> }>>;
}

/**
 * The observations the document does not list: a route it does not describe, or a status neither
 * among the route's responses nor covered by its `default` (an answer relayed unchanged).
 */
export function undocumented(observed: readonly Observed[], doc: Doc): string[] {
  const responses = new Map<string, Record<string, unknown>>();
  for (const methods of Object.values(doc.paths)) {
    for (const op of Object.values(methods)) if (op['x-svc-route']) responses.set(op['x-svc-route'], op.responses);
  }
  const missing: string[] = [];
  for (const { route, status } of observed) {
    const listed = responses.get(route);
    if (!listed) missing.push(`${route}: not in the document`);
    else if (!(String(status) in listed) && !('default' in listed)) missing.push(`${route} answered ${status}, which the document does not list`);
  }
  return missing.sort();
}
