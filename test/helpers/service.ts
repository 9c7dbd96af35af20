/**
 * An in-process deployment for integration tests: the handlers app over real DynamoDB Local and a
 * real host agent (with the real engine) listening on port 0. Requests go through `app.fetch`.
 */
import { buildDeps } from '../../handlers/deps.ts';
import { createApp, type App } from '../../handlers/index.ts';
import { startAgent, type Agent } from '../../host-agent/agent.ts';
import { loadSettings } from '../../shared/config.ts';
import { lineFields, type Log } from '../../shared/log.ts';
import type { Db } from '../../shared/db/client.ts';
import { REPO, tempDir, testDeployment } from './env.ts';
import { observeStatus } from './observed.ts';

/** A running in-process service. */
export interface TestService {
  app: App;
  agent: Agent;
  db: Db;
  env: Record<string, string>;
  logs: string[];
  /** Sends a request to the app: `path` relative to http://svc.test. */
  request(method: string, path: string, init?: { token?: string; body?: unknown; headers?: Record<string, string> }): Promise<Response>;
  stop(): Promise<void>;
}

/** Starts the handlers app and one host agent on a fresh table and root. */
export async function startTestService(overrides: Record<string, string> = {}): Promise<TestService> {
  const root = tempDir('svc-agent-');
  const { env, db } = await testDeployment({ SVCD_ROOT: root.dir, ...overrides });
  const logs: string[] = [];
  // Each line as the service writes it: the message, then its fields as they leave the process (shared/log.ts).
  const log: Log = (line, fields) => {
    logs.push(fields ? `${line} ${JSON.stringify(lineFields(fields).rest)}` : line);
    // The handlers' request line names the route it was served by (test/helpers/observed.ts).
    if (fields?.event === 'request' && typeof fields.route === 'string' && fields.route !== '(no route)') observeStatus(`${String(fields.method)} ${fields.route}`, Number(fields.status));
  };
  const agent = await startAgent(loadSettings(env), { log, db, cwd: REPO });
  const deps = buildDeps(env, log);
  const app = createApp(deps);
  return {
    app,
    agent,
    db,
    env,
    logs,
    request(method, path, init = {}) {
      const headers: Record<string, string> = { ...(init.headers ?? {}) };
      if (init.token) headers.authorization = `Bearer ${init.token}`;
      let body: BodyInit | undefined;
      if (init.body !== undefined) {
        body = typeof init.body === 'string' ? init.body : JSON.stringify(init.body);
        headers['content-type'] ??= 'application/json';
      }
      return app.fetch(new Request(`http://svc.test${path}`, { method, headers, body }));
    },
    async stop() {
      await agent.stop();
      root.cleanup();
    },
  };
}

/** Signs up an account and answers its token and id. */
export async function signup(svc: TestService): Promise<{ token: string; accountId: string; secret: string }> {
  const r = await svc.request('POST', '/v0/signup', { body: {} });
  if (r.status !== 201) throw new Error(`signup failed: ${r.status} ${await r.text()}`);
  const b = (await r.json()) as { token: string; account_id: string; account_secret: string };
  return { token: b.token, accountId: b.account_id, secret: b.account_secret };
}
