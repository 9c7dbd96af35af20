/**
 * The workerd configuration of a function runtime (./workerd-config.ts): its text, the values it
 * refuses, and the real workerd binary running it with the real supervisor (./supervisor.js) and
 * the agent's two sockets played by this test — a version loaded from the control socket, its
 * isolate's fetch going to the egress socket only (never to the control socket), the heap limit.
 * Without the OS layer: that is ./sandbox.ts's, tested through the integration suites.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request as httpRequest, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EgressFilter, egressPolicy } from './egress.ts';
import { packagedWorkerd } from './launch.ts';
import { FUNCTION_COMPATIBILITY_DATE, FUNCTION_COMPATIBILITY_FLAGS, runtimeConfig } from './workerd-config.ts';

const base = { listen: '/in/runtime.sock', control: '/out/control.sock', egress: '/out/egress.sock', heapMb: 128 };

describe('runtimeConfig', () => {
  it('runs the supervisor alone on the runtime socket, with the loader, the agent and the egress filter as its bindings', () => {
    const text = runtimeConfig(base);
    expect(text).toContain('using Workerd = import "/workerd/workerd.capnp";');
    expect(text).toContain('(name = "supervisor.js", esModule = embed "supervisor.js")');
    expect(text).toContain(`compatibilityDate = "${FUNCTION_COMPATIBILITY_DATE}"`);
    expect(text).toContain('(name = "LOADER", workerLoader = ())');
    expect(text).toContain('(name = "AGENT", service = "agent")');
    expect(text).toContain('(name = "EGRESS", service = "egress")');
    expect(text).toContain('globalOutbound = "agent"');
    expect(text).toContain('(name = "agent", external = (address = "unix:/out/control.sock", http = ()))');
    expect(text).toContain('(name = "egress", external = (address = "unix:/out/egress.sock", http = (style = proxy)))');
    expect(text).toContain('sockets = [ (name = "in", address = "unix:/in/runtime.sock", http = (), service = "supervisor") ]');
    expect(text).toContain('v8Flags = [ "--max-old-space-size=128" ]');
    // Three services, one socket; no network or disk service for anything to reach.
    expect(text.match(/\(\s*name = "[a-z]+",\s*(worker|external|network|disk) =/g)).toHaveLength(3);
    expect(text).not.toMatch(/network =|disk =|inet|0\.0\.0\.0|\*:/);
    expect(text.match(/address = /g)).toHaveLength(3);
  });

  it('takes the heap limit in whole MiB', () => {
    expect(runtimeConfig({ ...base, heapMb: 48 })).toContain('"--max-old-space-size=48"');
    expect(runtimeConfig({ ...base, heapMb: 64.9 })).toContain('"--max-old-space-size=64"');
  });

  it('refuses a value that would leave its literal', () => {
    for (const bad of ['/out/"x".sock', '/out/a\\b', '/out/a\nb', '/out/a\rb', '/out/a\0b']) {
      expect(() => runtimeConfig({ ...base, control: bad }), JSON.stringify(bad)).toThrow(/unexpected character in a configuration value/);
      expect(() => runtimeConfig({ ...base, listen: bad }), JSON.stringify(bad)).toThrow(/unexpected character/);
      expect(() => runtimeConfig({ ...base, egress: bad }), JSON.stringify(bad)).toThrow(/unexpected character/);
    }
  });

  it('names flags functions run with', () => {
    expect(FUNCTION_COMPATIBILITY_FLAGS).toContain('nodejs_compat');
    expect(FUNCTION_COMPATIBILITY_DATE).toMatch(/^\d{4}-\d{2}-\d{2}$/);
  });
});

const workerd = packagedWorkerd();

describe.skipIf(workerd === null)('the configuration under workerd, with the supervisor', () => {
  let dir: string;
  let child: ChildProcess;
  let control: Server;
  let egressServer: Server;
  let egress: EgressFilter;
  const controlRequests: string[] = [];
  const targets = new Map<string, { code: string; env: Record<string, string>; origin: string }>();
  let output = '';

  /** A request to the runtime's socket. */
  function call(path: string, init: { method?: string; body?: string } = {}): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
    return new Promise((resolve, reject) => {
      // As the agent sends an invocation: the client's body marked, with its declared length (runtime.ts).
      const marks = init.body === undefined ? {} : { 'x-svc-fn-rt-body': '1', 'x-svc-fn-rt-length': String(Buffer.byteLength(init.body)) };
      const req = httpRequest({ socketPath: join(dir, 'in', 'runtime.sock'), method: init.method ?? 'GET', path, headers: { host: 'runtime', ...marks } }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
      });
      req.on('error', reject);
      req.end(init.body);
    });
  }

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'svc-workerd-config-'));
    for (const d of ['cfg', 'in', 'out']) mkdirSync(join(dir, d));
    control = createServer((req, res) => {
      controlRequests.push(req.url ?? '');
      const spec = targets.get(/^\/targets\/([a-z0-9]+)$/.exec(req.url ?? '')?.[1] ?? '');
      if (!spec) {
        res.writeHead(404, { 'content-length': 0 }).end();
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ ...spec, compatibilityDate: FUNCTION_COMPATIBILITY_DATE, compatibilityFlags: FUNCTION_COMPATIBILITY_FLAGS }));
    });
    egress = new EgressFilter(egressPolicy('none', undefined), () => {});
    egressServer = egress.server('prj_config_test');
    await Promise.all([
      new Promise<void>((r) => control.listen(join(dir, 'out', 'control.sock'), r)),
      new Promise<void>((r) => egressServer.listen(join(dir, 'out', 'egress.sock'), r)),
    ]);
    copyFileSync(fileURLToPath(new URL('./supervisor.js', import.meta.url)), join(dir, 'cfg', 'supervisor.js'));
    writeFileSync(
      join(dir, 'cfg', 'config.capnp'),
      runtimeConfig({ listen: join(dir, 'in', 'runtime.sock'), control: join(dir, 'out', 'control.sock'), egress: join(dir, 'out', 'egress.sock'), heapMb: 48 }),
    );
    child = spawn(workerd!, ['serve', '--experimental', join(dir, 'cfg', 'config.capnp')], { env: {}, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout!.setEncoding('utf8').on('data', (d: string) => (output += d));
    child.stderr!.setEncoding('utf8').on('data', (d: string) => (output += d));
    const deadline = Date.now() + 15_000;
    for (;;) {
      const answer = await call('/.ping').catch(() => null);
      if (answer?.status === 200) break;
      if (Date.now() > deadline || child.exitCode !== null) throw new Error(`workerd did not start: ${output}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }, 30_000);

  afterAll(async () => {
    child?.kill('SIGKILL');
    control?.close();
    egressServer?.close();
    await egress?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('answers its ping', async () => {
    expect(await call('/.ping')).toMatchObject({ status: 200, body: 'ok' });
  });

  it('loads a version from the control socket, checks it and runs it with its environment and origin', async () => {
    targets.set('t1', {
      code: `export default { async fetch(request, env) { return Response.json({ url: request.url, method: request.method, body: await request.text(), env, process: process.env.SECRET ?? null }); } };`,
      env: { SECRET: 's3cr3t', PROJECT_ID: 'prj_x' },
      origin: 'https://api.example.test',
    });
    expect(JSON.parse((await call('/.check/t1')).body)).toEqual({ ok: true });
    const r = await call('/t1/a/b?c=d', { method: 'POST', body: 'hi' });
    expect(r.status).toBe(200);
    expect(JSON.parse(r.body)).toEqual({ url: 'https://api.example.test/a/b?c=d', method: 'POST', body: 'hi', env: { SECRET: 's3cr3t', PROJECT_ID: 'prj_x' }, process: 's3cr3t' });
  });

  it('reports a version that cannot load, and one the agent does not know', async () => {
    targets.set('t2', { code: `export default {};`, env: {}, origin: 'https://o.test' });
    expect(JSON.parse((await call('/.check/t2')).body)).toEqual({ ok: false, problem: 'the module has no default export with a fetch method' });
    targets.set('t3', { code: `export default { fetch( };`, env: {}, origin: 'https://o.test' });
    const broken = JSON.parse((await call('/.check/t3')).body) as { ok: boolean; problem: string };
    expect(broken.ok).toBe(false);
    expect(broken.problem).toMatch(/SyntaxError/);
    const unknown = await call('/nosuch/');
    expect(unknown.status).toBe(502);
    expect(unknown.headers['x-svc-rt-failed']).toBe('start');
  });

  it('sends an isolate\'s fetch to the egress filter only: never to the control socket, whatever the URL', async () => {
    targets.set('t4', {
      code: `export default { async fetch() {
        const out = [];
        for (const url of ['http://agent/targets/t1', 'http://runtime/.ping', 'https://example.com/']) {
          try { const r = await fetch(url); out.push({ url, status: r.status, refused: r.headers.get('x-svc-egress-refused'), body: (await r.text()).slice(0, 200) }); }
          catch (e) { out.push({ url, error: String(e) }); }
        }
        return Response.json(out);
      } };`,
      env: {},
      origin: 'https://o.test',
    });
    const before = controlRequests.length;
    const r = await call('/t4/');
    expect(r.status).toBe(200);
    const seen = JSON.parse(r.body) as { url: string; status: number; refused: string | null; body: string }[];
    for (const s of seen) {
      expect(s.status, s.url).toBe(403);
      expect(s.refused, s.url).toBe('functions have no egress on this deployment (SVCD_FUNCTION_EGRESS=none)');
      expect(s.body, s.url).not.toContain('s3cr3t');
    }
    // The only control request is the loading of t4 itself.
    expect(controlRequests.slice(before)).toEqual(['/targets/t4']);
    expect(egress.stats.refused).toBeGreaterThanOrEqual(3);
  });

  it('answers a HEAD with the length the function declares (its headers as a GET\'s, without the body)', async () => {
    targets.set('t7', {
      code: `export default { fetch(request) {
        if (new URL(request.url).pathname === '/bytes') return new Response(new Uint8Array(1234), { headers: { 'x-method': request.method } });
        const { readable, writable } = new FixedLengthStream(1234);
        const w = writable.getWriter(); void w.write(new Uint8Array(1234)).then(() => w.close());
        return new Response(readable, { headers: { 'x-method': request.method } });
      } };`,
      env: {},
      origin: 'https://o.test',
    });
    for (const path of ['/t7/bytes', '/t7/stream']) {
      const get = await call(path);
      expect(get.headers['content-length'], `GET ${path}`).toBe('1234');
      const head = await call(path, { method: 'HEAD' });
      expect(head.status, `HEAD ${path}`).toBe(200);
      expect(head.headers['x-method'], `HEAD ${path}`).toBe('HEAD');
      expect(head.body).toBe('');
      expect(head.headers['content-length'], `HEAD ${path}`).toBe('1234');
    }
  });

  it('gives an isolate no binding but its environment\'s strings', async () => {
    targets.set('t5', { code: `export default { fetch(request, env) { return Response.json(Object.entries(env).map(([k, v]) => [k, typeof v])); } };`, env: { A: '1' }, origin: 'https://o.test' });
    expect(JSON.parse((await call('/t5/')).body)).toEqual([['A', 'string']]);
  });

  it('ends the process when an isolate passes the heap limit (V8 aborts it)', async () => {
    targets.set('t6', { code: `export default { fetch() { const kept = []; for (;;) kept.push(new Array(1e6).fill(Math.random())); } };`, env: {}, origin: 'https://o.test' });
    await call('/t6/').catch(() => null);
    const deadline = Date.now() + 10_000;
    while (child.exitCode === null && child.signalCode === null && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(child.signalCode ?? child.exitCode).not.toBeNull();
    expect(output).toMatch(/Reached heap limit|JavaScript heap out of memory/);
  });
});
