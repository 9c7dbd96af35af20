/**
 * The local runtime of `svc functions dev` (docs/functions.md "Running locally"): the runtime a host
 * agent runs functions in, on this machine — workerd with the agent's own configuration
 * (`runtimeConfig` of host-agent/functions/workerd-config.ts) and its supervisor
 * (host-agent/functions/supervisor.js), started and read by the agent's `spawnWorkerd`. As the agent
 * does, it serves the runtime a control socket (`GET /targets/<id>`: the module, its environment,
 * its origin) and an egress proxy, and sends it each request as `/<target id><path>` with the two
 * marks the supervisor reads. Unlike the agent: no OS sandbox, and egress goes anywhere (this is the
 * developer's machine; the local stack is reachable). Each reload is a new target id, so the next
 * request runs the new module in a fresh isolate.
 */
import { copyFileSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { connectionTokens, isHopByHop } from '../../../shared/http/hop-by-hop.ts';
import { spawnWorkerd, type SpawnedRuntime } from '../../../host-agent/functions/runtime-process.ts';
import { packagedWorkerd } from '../../../host-agent/functions/workerd-binary.ts';
import { FUNCTION_COMPATIBILITY_DATE, FUNCTION_COMPATIBILITY_FLAGS, runtimeConfig } from '../../../host-agent/functions/workerd-config.ts';
import { CliError } from '../errors.ts';

/** One version the runtime can load. */
interface Target {
  code: string;
  env: Record<string, string>;
  origin: string;
}

/** What the runtime reports. */
export interface DevRuntimeOptions {
  /** The workerd binary (default: the `workerd` package's). */
  workerd?: string | undefined;
  /** The heap limit of the isolate, in MiB (a deployed function's `memory_mb`). */
  memoryMb: number;
  /** A line the function wrote (stdout, stderr), or the supervisor or workerd about it (agent). */
  onLine(stream: 'stdout' | 'stderr' | 'agent', text: string): void;
}


/** The supervisor's source: beside the bundle (dist/client/), or in the checkout. */
function supervisorPath(): string {
  for (const candidate of ['./supervisor.js', '../../../host-agent/functions/supervisor.js']) {
    const path = fileURLToPath(new URL(candidate, import.meta.url));
    if (existsSync(path)) return path;
  }
  throw new CliError('the function runtime\'s supervisor (supervisor.js) is missing from this installation', 'reinstall the CLI');
}

/** A running local runtime. */
export class DevRuntime {
  readonly #dir: string;
  /** The versions the control socket answers for. */
  readonly #targets: Map<string, Target>;
  readonly #process: SpawnedRuntime;
  #current: string | null = null;
  #count = 0;
  #stopped = false;

  private constructor(dir: string, targets: Map<string, Target>, process: SpawnedRuntime) {
    this.#dir = dir;
    this.#targets = targets;
    this.#process = process;
  }

  /** Starts workerd with the agent's configuration; resolves once its supervisor answers. */
  static async start(options: DevRuntimeOptions): Promise<DevRuntime> {
    const workerd = options.workerd ?? packagedWorkerd();
    if (!workerd) {
      throw new CliError('`svc functions dev` runs functions in workerd, which is not installed', 'install it beside the CLI: `npm install --save-dev workerd` (an optional peer dependency of svc-cloud)');
    }
    const dir = mkdtempSync(join(tmpdir(), 'svc-dev-'));
    const paths = { listen: join(dir, 'runtime.sock'), control: join(dir, 'control.sock'), egress: join(dir, 'egress.sock') };
    copyFileSync(supervisorPath(), join(dir, 'supervisor.js'));
    writeFileSync(join(dir, 'config.capnp'), runtimeConfig({ ...paths, heapMb: options.memoryMb }));
    const targets = new Map<string, Target>();
    const control = createServer((req, res) => answerTarget(targets, req, res));
    const egress = createServer((req, res) => forwardOut(req, res));
    egress.on('connect', (_req, socket) => socket.end('HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n'));
    try {
      await Promise.all([listen(control, paths.control), listen(egress, paths.egress)]);
    } catch (err) {
      rmSync(dir, { recursive: true, force: true });
      throw err;
    }
    const spawned = spawnWorkerd([workerd, 'serve', '--experimental', join(dir, 'config.capnp')], null, [control, egress], {
      dir,
      onLine: (_target, stream, text) => options.onLine(stream, text),
    });
    const runtime = new DevRuntime(dir, targets, spawned);
    const problem = await runtime.#ready(15_000);
    if (problem) {
      await runtime.stop();
      throw new CliError(`workerd ${workerd} did not start: ${problem}${spawned.lastError() ? ` (${spawned.lastError()})` : ''}`);
    }
    return runtime;
  }

  /** Makes `code` the module the next request runs (a new isolate); answers its target id. */
  load(code: string, env: Record<string, string>, origin: string): string {
    const id = `dev${++this.#count}`;
    this.#targets.set(id, { code, env, origin });
    this.#current = id;
    return id;
  }

  /** Whether its supervisor loads the current module and finds a default `fetch`: null, else the problem. */
  async check(): Promise<string | null> {
    if (!this.#current) return 'nothing loaded';
    const answer = await this.#get(`/.check/${this.#current}`);
    const verdict = JSON.parse(answer) as { ok?: boolean; problem?: string };
    return verdict.ok ? null : (verdict.problem ?? 'the module failed to load');
  }

  /** Sends a client's request to the current module and its answer back (docs/functions.md "Invoke"). */
  serve(req: IncomingMessage, res: ServerResponse, onAnswer: (status: number) => void): void {
    if (!this.#current) {
      res.writeHead(503, { 'content-type': 'text/plain; charset=utf-8' }).end('the function has not built yet: see the terminal\n');
      return onAnswer(503);
    }
    const listed = connectionTokens(req.headers.connection);
    const headers: Record<string, string | string[]> = {};
    for (const [name, value] of Object.entries(req.headers)) {
      if (value === undefined || name === 'host' || name === 'expect' || name.startsWith('x-svc-fn-') || isHopByHop(name, listed)) continue;
      headers[name] = value;
    }
    const length = req.headers['content-length'];
    const hasBody = length !== undefined ? length !== '0' : req.headers['transfer-encoding'] !== undefined;
    headers['x-svc-fn-rt-body'] = hasBody ? '1' : '0';
    if (length !== undefined) Object.assign(headers, { 'content-length': length, 'x-svc-fn-rt-length': length });
    const out = httpRequest({ socketPath: join(this.#dir, 'runtime.sock'), method: req.method, path: `/${this.#current}${req.url ?? '/'}`, headers }, (answer) => {
      const flat: string[] = [];
      for (let i = 0; i < answer.rawHeaders.length; i += 2) {
        const name = answer.rawHeaders[i]!.toLowerCase();
        if (name === 'x-svc-rt-failed' || name === 'connection' || name === 'keep-alive' || name === 'transfer-encoding') continue;
        flat.push(name === 'x-svc-fn-content-encoding' ? 'content-encoding' : answer.rawHeaders[i]!, answer.rawHeaders[i + 1]!);
      }
      res.writeHead(answer.statusCode ?? 502, answer.statusMessage, flat);
      answer.pipe(res);
      onAnswer(answer.statusCode ?? 502);
    });
    out.on('error', (err) => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain; charset=utf-8' }).end(`the runtime did not answer: ${err.message}\n`);
      else res.destroy();
      onAnswer(502);
    });
    res.once('close', () => {
      if (!res.writableFinished) out.destroy();
    });
    if (hasBody) req.pipe(out);
    else out.end();
  }

  /** Stops workerd and removes its directory. Idempotent. */
  async stop(): Promise<void> {
    if (!this.#stopped) {
      this.#stopped = true;
      this.#process.child.kill('SIGTERM');
    }
    await this.#process.exited;
  }

  /** How workerd ended. */
  get exited(): Promise<unknown> {
    return this.#process.exited;
  }

  async #ready(timeoutMs: number): Promise<string | null> {
    const deadline = Date.now() + timeoutMs;
    let exited = false;
    void this.#process.exited.then(() => (exited = true));
    for (;;) {
      if (exited) return 'it exited while starting';
      try {
        if ((await this.#get('/.ping')) === 'ok') return null;
      } catch {
        // Not listening yet.
      }
      if (Date.now() > deadline) return `it did not answer within ${timeoutMs} ms`;
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  #get(path: string): Promise<string> {
    return new Promise((resolve, reject) => {
      const req = httpRequest({ socketPath: join(this.#dir, 'runtime.sock'), path, method: 'GET' }, (answer) => {
        let text = '';
        answer.setEncoding('utf8').on('data', (d: string) => (text += d)).on('end', () => resolve(text)).on('error', reject);
      });
      req.on('error', reject).end();
    });
  }
}

/** The control socket: `GET /targets/<id>`, as the agent answers it (host-agent/functions/project-runtime.ts). */
function answerTarget(targets: ReadonlyMap<string, Target>, req: IncomingMessage, res: ServerResponse): void {
  const match = /^\/targets\/([a-z0-9]{1,64})$/.exec(req.url ?? '');
  const target = match ? targets.get(match[1]!) : undefined;
  if (req.method !== 'GET' || !target) {
    res.writeHead(404, { 'content-length': 0 }).end();
    return;
  }
  const body = JSON.stringify({ ...target, compatibilityDate: FUNCTION_COMPATIBILITY_DATE, compatibilityFlags: FUNCTION_COMPATIBILITY_FLAGS });
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body);
}

/** The egress proxy: the isolate's `fetch` as an absolute-URI request, sent on as it is. */
function forwardOut(req: IncomingMessage, res: ServerResponse): void {
  let url: URL;
  try {
    url = new URL(req.url ?? '');
  } catch {
    res.writeHead(400, { 'content-length': 0 }).end();
    return;
  }
  const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
  const listed = connectionTokens(req.headers.connection);
  const headers = Object.fromEntries(Object.entries(req.headers).filter(([name]) => !isHopByHop(name, listed))) as Record<string, string>;
  const out = send(url, { method: req.method, headers }, (answer) => {
    const flat: string[] = [];
    for (let i = 0; i < answer.rawHeaders.length; i += 2) {
      if (!isHopByHop(answer.rawHeaders[i]!.toLowerCase(), null)) flat.push(answer.rawHeaders[i]!, answer.rawHeaders[i + 1]!);
    }
    res.writeHead(answer.statusCode ?? 502, answer.statusMessage, flat);
    answer.pipe(res);
  });
  out.on('error', (err) => {
    if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain; charset=utf-8' }).end(`${url.host} could not be reached (${(err as NodeJS.ErrnoException).code ?? err.message})\n`);
    else res.destroy();
  });
  req.pipe(out);
}

function listen(server: Server, path: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, () => {
      server.off('error', reject);
      resolve();
    });
  });
}
