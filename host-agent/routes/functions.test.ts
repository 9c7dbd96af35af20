/**
 * The client's request as the agent takes it from the handlers' hop (docs/functions.md "Inside the
 * host agent"): `invocationRequest` on real requests parsed by node:http, sent as raw bytes so that
 * what the hop carries is exactly what each case says.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ServiceError } from '../../shared/errors.ts';
import { asSentByTheClient, invocationRequest, type InvocationRequest } from './functions.ts';

let server: Server;
let port: number;
/** Called with each request the server receives. */
let seen: (req: IncomingMessage) => void;

beforeAll(async () => {
  server = createServer((req, res) => {
    seen(req);
    req.resume();
    req.on('end', () => res.end());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as { port: number }).port;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

/** Sends `head` (request line and header lines, without the blank line) and `body`; answers what `invocationRequest` made of it. */
function parsed(head: string, body = ''): Promise<InvocationRequest | ServiceError> {
  return new Promise((resolve, reject) => {
    seen = (req) => {
      try {
        resolve(invocationRequest(req));
      } catch (err) {
        resolve(err as ServiceError);
      }
    };
    const socket = connect(port, '127.0.0.1', () => socket.end(`${head}\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n${body}`));
    socket.on('error', reject);
    socket.resume();
  });
}

describe('invocationRequest', () => {
  it("takes the client's headers from the prefixed ones only, never the hop's own", async () => {
    const call = await parsed(
      [
        'POST /internal/v1/projects/prj_0123456789abcdef/functions/echo/invoke/a?b=c HTTP/1.1',
        // What the hop's own HTTP clients add or replace (workerd's fetch, Node's fetch).
        'authorization: Bearer internal.jwt',
        'x-request-id: req_0123456789abcdef',
        'accept-encoding: br, gzip',
        'cf-worker: worker.example.com',
        'user-agent: node',
        'accept: */*',
        'content-length: 5',
        // The client's, as the handlers sent them.
        'x-svc-fn-h-accept-encoding: identity',
        'x-svc-fn-h-x-request-id: client-chosen',
        'X-Svc-Fn-H-Content-Type: text/plain',
        'x-svc-fn-h-cf-connecting-ip: 9.9.9.9',
        'x-svc-fn-h-x-multi: 1, 2',
        'x-svc-fn-body: 1',
        'x-svc-fn-length: 5',
        'x-svc-fn-origin: https://api.example.test',
      ].join('\r\n'),
      'hello',
    );
    expect(call).toEqual({
      method: 'POST',
      headers: ['accept-encoding', 'identity', 'x-request-id', 'client-chosen', 'content-type', 'text/plain', 'cf-connecting-ip', '9.9.9.9', 'x-multi', '1, 2'],
      hasBody: true,
      length: 5,
    });
  });

  it('never hands on a prefixed name a function must not see, however it arrived', async () => {
    const call = await parsed(
      [
        'GET /x HTTP/1.1',
        'x-svc-fn-h-authorization: Bearer svc1_forged',
        'x-svc-fn-h-host: evil.test',
        'x-svc-fn-h-content-length: 99',
        'x-svc-fn-h-expect: 100-continue',
        'x-svc-fn-h-transfer-encoding: chunked',
        'x-svc-fn-h-connection: close',
        'x-svc-fn-h-te: trailers',
        'x-svc-fn-h-upgrade: websocket',
        'x-svc-fn-h-x-svc-fn-key: svc1_forged',
        'x-svc-fn-h-x-svc-fn-method: HEAD',
        'x-svc-fn-h-: empty name',
        'x-svc-fn-h-x-kept: yes',
      ].join('\r\n'),
    );
    expect(call).toEqual({ method: 'GET', headers: ['x-kept', 'yes'], hasBody: false, length: null });
  });

  it("answers the client's method: a marked hop's mark, else the hop's own", async () => {
    const cases: [string, string, string][] = [
      // [hop method, mark, the client's method]
      ['GET', 'HEAD', 'HEAD'],
      ['POST', 'GET', 'GET'],
      ['POST', 'HEAD', 'HEAD'],
      ['GET', '', 'GET'],
      ['DELETE', '', 'DELETE'],
      ['OPTIONS', '', 'OPTIONS'],
      ['PATCH', '', 'PATCH'],
    ];
    for (const [hop, mark, client] of cases) {
      const lines = [`${hop} /x HTTP/1.1`, ...(mark ? [`x-svc-fn-method: ${mark}`] : [])];
      const withBody = hop === 'POST';
      if (withBody) lines.push('x-svc-fn-body: 1', 'x-svc-fn-length: 2', 'content-length: 2');
      const call = (await parsed(lines.join('\r\n'), withBody ? 'hi' : '')) as InvocationRequest;
      expect(call, `${hop} marked ${mark}`).toMatchObject({ method: client, hasBody: withBody, length: withBody ? 2 : null });
    }
  });

  it("judges the body by the handlers' word, never by the hop's framing", async () => {
    // workerd declares 0 for a POST without a body; a chunked body has no length.
    expect(await parsed(['POST /x HTTP/1.1', 'content-length: 0'].join('\r\n'))).toMatchObject({ hasBody: false, length: null });
    expect(await parsed(['POST /x HTTP/1.1', 'x-svc-fn-length: 0', 'content-length: 0'].join('\r\n'))).toMatchObject({ hasBody: false, length: 0 });
    expect(await parsed(['PUT /x HTTP/1.1', 'x-svc-fn-body: 1', 'transfer-encoding: chunked'].join('\r\n'), '3\r\nabc\r\n0\r\n\r\n')).toMatchObject({
      hasBody: true,
      length: null,
    });
  });

  it('refuses a mark, a length or a body flag that is not one', async () => {
    for (const line of ['x-svc-fn-method: CONNECT', 'x-svc-fn-method: get', 'x-svc-fn-length: -1', 'x-svc-fn-length: 1e3', 'x-svc-fn-body: yes']) {
      const refused = await parsed(['GET /x HTTP/1.1', line].join('\r\n'));
      expect(refused, line).toBeInstanceOf(ServiceError);
      expect((refused as ServiceError).code, line).toBe('invalid_request');
    }
  });

  it("leaves the request itself saying what the client sent: its method and headers, nothing of the hop's", async () => {
    const req = await new Promise<IncomingMessage>((resolve) => {
      seen = resolve;
      const socket = connect(port, '127.0.0.1', () =>
        socket.end(['POST /x HTTP/1.1', 'host: 127.0.0.1', 'connection: close', 'x-request-id: req_0123456789abcdef', 'x-svc-fn-method: GET', 'x-svc-fn-h-x-a: 1', 'x-svc-fn-h-accept: text/html', '', ''].join('\r\n')),
      );
      socket.resume();
    });
    asSentByTheClient(req, invocationRequest(req));
    expect(req.method).toBe('GET');
    expect(req.rawHeaders).toEqual(['x-a', '1', 'accept', 'text/html']);
    expect({ ...req.headers }).toEqual({ 'x-a': '1', accept: 'text/html' });
  });
});
