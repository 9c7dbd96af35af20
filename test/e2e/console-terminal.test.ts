/**
 * The terminal of `npm start` (docs/observability.md "Logs"): `infra/local/start.ts` as a real
 * process tree, its output read as a user sees it. A clean start prints no line that is not news
 * (no sweep that removed nothing), and every request line of a refusal carries the error code the
 * answer carried — from the handlers (`/v0`), from the agent's routes at the origin (realtime) and
 * from the `/v2` listener.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../../infra/local/dynamodb.ts';
import { REPO, tempDir } from '../helpers/env.ts';

const dir = tempDir('svc-terminal-');
let child: ChildProcess | undefined;
afterAll(async () => {
  if (child && child.exitCode === null) {
    const exited = new Promise((r) => child!.once('exit', r));
    child.kill('SIGTERM');
    await exited;
  }
  dir.cleanup();
});

interface Line {
  level?: string;
  service?: string;
  event?: string;
  msg?: string;
  route?: string;
  status?: number;
  code?: string;
  request_id?: string;
}

/** Every JSON line of the stack's stderr (the logs; the ready banner is on stdout). */
function jsonLines(text: string): Line[] {
  return text
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Line);
}

async function waitFor<T>(check: () => T | undefined, timeoutMs: number, what: string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = check();
    if (found !== undefined) return found;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('the terminal of npm start', () => {
  it('prints no empty sweep, and request lines carry the error code', async () => {
    const port = await freePort();
    const dynamoPort = await freePort();
    child = spawn(join(REPO, 'node_modules/.bin/node'), [join(REPO, 'infra/local/start.ts'), '--dir', dir.dir, '--dynamodb-port', String(dynamoPort)], {
      cwd: REPO,
      env: { PATH: process.env.PATH!, HOME: process.env.HOME ?? '/tmp', SVCD_PORT: String(port), SVCD_AGENT_PORT: '0', SVCD_DATAPLANE_PORT: '0', SVCD_METRICS_PORT: '0' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout!.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const url = await waitFor(() => /svc-cloud ready at (\S+)/.exec(stdout)?.[1], 90_000, `the ready line (${stdout}${stderr})`);
    await waitFor(() => jsonLines(stderr).find((l) => l.event === 'agent_ready'), 30_000, 'the agent');
    // The background sweeps (DynamoDB reads) have had their time.
    await new Promise((r) => setTimeout(r, 1500));

    // Refusals from each part of the stack, and one success.
    const health = await fetch(`${url}/v0/health`);
    expect(health.status).toBe(200);
    const noAuth = await fetch(`${url}/v0/projects`);
    expect(noAuth.status).toBe(401);
    const noRoute = await fetch(`${url}/v0/nowhere`);
    expect(noRoute.status).toBe(404);
    const publish = await fetch(`${url}/v0/projects/prj_0000000000000000/realtime/publish`, { method: 'POST', body: '{}' });
    expect(publish.status).toBe(401);
    const v2 = await fetch(`${url}/v2/sql`, { method: 'POST', headers: { 'x-svc-protocol-minor': '3' }, body: '{}' });
    expect(v2.status).toBe(401);
    const ids = [health, noAuth, noRoute, publish, v2].map((r) => r.headers.get('x-request-id') ?? r.headers.get('x-svc-request-id'));
    const lineOf = (id: string | null) => jsonLines(stderr).find((l) => l.event === 'request' && l.request_id === id);
    const lines = await waitFor(() => {
      const found = ids.map(lineOf);
      return found.every(Boolean) ? (found as Line[]) : undefined;
    }, 10_000, `the request lines of ${ids.join(', ')} in ${stderr}`);

    const [okLine, noAuthLine, noRouteLine, publishLine, v2Line] = lines as [Line, Line, Line, Line, Line];
    expect(okLine).toMatchObject({ status: 200 });
    expect(okLine.code).toBeUndefined();
    expect(noAuthLine).toMatchObject({ service: 'handlers', status: 401, code: 'authentication_required' });
    expect(noRouteLine).toMatchObject({ status: 404, code: 'not_found' });
    expect(publishLine).toMatchObject({ status: 401, code: 'authentication_required' });
    expect(v2Line).toMatchObject({ route: '/v2/:path+', status: 401, code: 'authentication_required' });

    // Nothing that is not news: no sweep that removed nothing, and no warning at a clean start.
    expect(stderr).not.toMatch(/swept/);
    const warnings = jsonLines(stderr).filter((l) => l.level === 'warn' || l.level === 'error');
    expect(warnings.map((l) => l.msg)).toEqual([]);
  }, 150_000);
});
