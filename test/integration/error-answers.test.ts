/**
 * Every listener answers its errors through the one renderer (shared/errors.ts): whatever goes
 * wrong, and wherever, the answer's status is the one the table gives its code, the body is exactly
 * the envelope, `X-Request-Id` is there, and a 401 carries the challenge (docs/api.md "Errors").
 * Each listener runs in-process on port 0 over fakes that fail before any adapter is reached.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Deps } from '../../handlers/context.ts';
import { createGatewayHandler } from '../../handlers/gateway.ts';
import { createApp } from '../../handlers/index.ts';
import worker from '../../handlers/worker.ts';
import type { AgentContext } from '../../host-agent/context.ts';
import type { KeyCache } from '../../host-agent/dataplane/key-cache.ts';
import { startDataplane, type Dataplane } from '../../host-agent/dataplane/server.ts';
import { createInternalApi } from '../../host-agent/internal-api.ts';
import { InternalTokens } from '../../host-agent/internal-auth.ts';
import { attachSubscribeStream } from '../../host-agent/routes/realtime.ts';
import { startFront, type Front } from '../../infra/local/front-proxy.ts';
import { ConfigError } from '../../shared/config.ts';
import { ERROR_STATUS, STATUS_VARIANTS, errors, errorResponse, isErrorCode } from '../../shared/errors.ts';
import { listen, SERVER_OPTIONS, serveFetch, type Served } from '../../shared/http/node-http.ts';

const REQUEST_ID = /^req_[0-9a-f]{16}$/;

/** An answer as read off the wire or out of a Response. */
interface Answer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** The statuses a code may be answered with: its row, and any documented variant of it. */
function allowedStatuses(code: string): number[] {
  if (!isErrorCode(code)) return [];
  return [ERROR_STATUS[code], ...Object.values(STATUS_VARIANTS).filter((v) => v.code === code).map((v) => v.status)];
}

/** Asserts `answer` is a rendered error with `code`. */
function expectRendered(answer: Answer, code: string): void {
  const body = JSON.parse(answer.body) as unknown;
  expect(body).toEqual({ error: { code, message: expect.any(String) } });
  expect(allowedStatuses(code)).toContain(answer.status);
  expect(answer.headers['content-type']).toBe('application/json; charset=utf-8');
  expect(Number(answer.headers['content-length'])).toBe(Buffer.byteLength(answer.body));
  expect(answer.headers['x-request-id']).toMatch(REQUEST_ID);
  if (answer.status === 401) expect(answer.headers['www-authenticate']).toBe('Bearer realm="svc-cloud"');
  else expect(answer.headers['www-authenticate']).toBeUndefined();
}

async function fromResponse(r: Response): Promise<Answer> {
  const headers: Record<string, string> = {};
  r.headers.forEach((v, k) => (headers[k] = v));
  return { status: r.status, headers, body: await r.text() };
}

/** Sends `head` (and nothing more) on a fresh connection and reads the one answer until the close. */
function raw(url: string, head: string): Promise<Answer> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    const chunks: Buffer[] = [];
    socket.on('data', (d) => chunks.push(d));
    socket.on('error', reject);
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('latin1');
      const split = text.indexOf('\r\n\r\n');
      const [statusLine, ...lines] = text.slice(0, split).split('\r\n');
      const headers: Record<string, string> = {};
      for (const line of lines) {
        const colon = line.indexOf(':');
        headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
      }
      resolve({ status: Number(statusLine!.split(' ')[1]), headers, body: text.slice(split + 4) });
    });
    socket.write(head);
  });
}

const get = (url: string, path: string, headers: Record<string, string> = {}) => fetch(`${url}${path}`, { headers }).then(fromResponse);

const notAPath = 'OPTIONS * HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n';
const badLength = 'POST /v0/health HTTP/1.1\r\nhost: x\r\ncontent-length: 12x\r\nconnection: close\r\n\r\n';

const quiet = () => {};
const servers: { close(): Promise<void> | void }[] = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => s.close()));
});

describe('the handlers app (every entry: worker, Node, gateway)', () => {
  const app = createApp({ log: quiet, settings: {} } as unknown as Deps);

  it('renders an unknown route and a missing credential', async () => {
    expectRendered(await fromResponse(await app.fetch(new Request('http://svc.test/v0/nowhere'))), 'not_found');
    expectRendered(await fromResponse(await app.fetch(new Request('http://svc.test/v0/projects'))), 'authentication_required');
  });

  it('renders the 416 of an unsatisfiable Range from the table', async () => {
    const answer = await fromResponse(errorResponse(errors.rangeNotSatisfiable(100), 'req_0123456789abcdef'));
    expectRendered(answer, 'invalid_request');
    expect(answer.status).toBe(416);
    expect(answer.headers['content-range']).toBe('bytes */100');
  });

  it('the worker entry renders a misconfiguration', async () => {
    const spy = vi.spyOn(console, 'error').mockImplementation(quiet);
    try {
      const r = await worker.fetch(new Request('http://svc.test/v0/health'), { SVCD_PORT: 'not a port' }, { waitUntil: quiet });
      expectRendered(await fromResponse(r), 'internal');
    } finally {
      spy.mockRestore();
    }
  });

  it('the gateway entry renders a misconfiguration', async () => {
    const spy = vi.spyOn(console, 'error').mockImplementation(quiet);
    try {
      const handle = createGatewayHandler(() => {
        throw new ConfigError('invalid setting SVCD_PORT');
      });
      const result = await handle({ rawPath: '/v0/health', requestContext: { http: { method: 'GET' } } });
      expectRendered({ status: result.statusCode, headers: result.headers, body: result.body }, 'internal');
    } finally {
      spy.mockRestore();
    }
  });

  describe('the Node entry', () => {
    let served: Served;
    beforeAll(async () => {
      served = await serveFetch((request) => (new URL(request.url).pathname === '/boom' ? Promise.reject(new Error('boom')) : app.fetch(request)), {
        host: '127.0.0.1',
        port: 0,
      });
      servers.push(served);
    });

    it('renders the app errors, a handler failure, a target that is not a path and a malformed request', async () => {
      expectRendered(await get(served.url, '/v0/nowhere'), 'not_found');
      expectRendered(await get(served.url, '/boom'), 'internal');
      expectRendered(await raw(served.url, notAPath), 'invalid_request');
      expectRendered(await raw(served.url, badLength), 'invalid_request');
    });
  });
});

describe('the /v2 listener', () => {
  let plane: Dataplane;
  beforeAll(async () => {
    plane = await startDataplane({
      host: '127.0.0.1',
      port: 0,
      maxBytes: 1024,
      endpoints: { liveEndpoint: () => null },
      keys: {} as KeyCache,
      log: quiet,
    });
    servers.push(plane);
  });

  it('renders a missing key, a session token, an unknown path, a target that is not a path and a malformed request', async () => {
    expectRendered(await get(plane.url, '/v2/sql'), 'authentication_required');
    expectRendered(await get(plane.url, '/v2/sql', { authorization: 'Bearer not-a-key' }), 'authentication_required');
    expectRendered(await get(plane.url, '/v1/nothing-here'), 'not_found');
    expectRendered(await raw(plane.url, notAPath), 'invalid_request');
    expectRendered(await raw(plane.url, badLength.replace('/v0/health', '/v2/sql')), 'invalid_request');
  });
});

describe("the agent's internal API and its subscribe stream", () => {
  let url: string;
  beforeAll(async () => {
    const secret = 'x'.repeat(64);
    const ctx = { settings: { SVCD_INTERNAL_SECRET: secret }, log: quiet, internalTokens: new InternalTokens(secret) } as unknown as AgentContext;
    const api = createInternalApi(ctx, []);
    const server: Server = createServer(SERVER_OPTIONS, (req: IncomingMessage, res: ServerResponse) => {
      void api(new Request(`http://agent.test${req.url}`, { method: req.method, headers: req.headers as Record<string, string> }))
        .then(fromResponse)
        .then((a) => res.writeHead(a.status, a.headers).end(a.body));
    });
    attachSubscribeStream(server, ctx);
    await listen(server, '127.0.0.1', 0);
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    servers.push({ close: () => new Promise<void>((r) => (server.closeAllConnections(), server.close(() => r()))) });
  });

  it('renders a missing internal token on a fetch-style route and on the event stream', async () => {
    expectRendered(await get(url, '/internal/v1/health'), 'authentication_required');
    expectRendered(await get(url, '/internal/v1/projects/prj_0123456789abcdef/realtime/subscribe?channel=a'), 'authentication_required');
  });
});

describe('the local front', () => {
  let front: Front;
  beforeAll(async () => {
    // Nothing listens on the targets: a port that was free a moment ago.
    const probe = createServer();
    await listen(probe, '127.0.0.1', 0);
    const gone = `http://127.0.0.1:${(probe.address() as AddressInfo).port}`;
    await new Promise<void>((r) => probe.close(() => r()));
    front = await startFront({ handlers: gone, dataplane: gone }, { host: '127.0.0.1', port: 0, log: quiet });
    servers.push(front);
  });

  it('renders an upstream that does not answer, a target that is not a path and a malformed request', async () => {
    expectRendered(await get(front.url, '/v0/health'), 'orchestrator_unavailable');
    expectRendered(await get(front.url, '/v2/sql'), 'orchestrator_unavailable');
    expectRendered(await raw(front.url, notAPath), 'invalid_request');
    expectRendered(await raw(front.url, badLength), 'invalid_request');
  });
});
