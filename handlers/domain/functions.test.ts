/**
 * How an invocation crosses from the handlers to the agent (docs/functions.md "Inside the host
 * agent"): `invocationHop` on plain values, and the round trip through Node's fetch (the Node
 * entry's hop, which adds headers of its own) to the agent's `invocationRequest`.
 */
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { invocationRequest, type InvocationRequest } from '../../host-agent/routes/functions.ts';
import { invocationHop, statusTextOf } from './functions.ts';

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];

describe('invocationHop', () => {
  it("carries every header of the client's a function sees under the prefix, and nothing else of them", () => {
    const headers = new Headers([
      ['authorization', 'Bearer svc1_key'],
      ['host', 'api.example.test'],
      ['content-length', '5'],
      ['expect', '100-continue'],
      ['connection', 'keep-alive, x-hop'],
      ['x-hop', 'listed by Connection'],
      ['keep-alive', 'timeout=5'],
      ['te', 'trailers'],
      ['upgrade', 'h2c'],
      ['proxy-authorization', 'Basic x'],
      ['x-svc-fn-key', 'svc1_forged'],
      ['x-svc-fn-h-authorization', 'Bearer forged'],
      ['x-request-id', 'client-chosen'],
      ['accept-encoding', 'identity'],
      ['cf-connecting-ip', '9.9.9.9'],
      ['content-type', 'text/plain'],
      ['x-multi', '1'],
      ['x-multi', '2'],
    ]);
    const hop = invocationHop({ method: 'POST', headers, hasBody: true, length: 5 });
    expect(hop).toEqual({
      method: 'POST',
      headers: {
        'x-svc-fn-h-x-request-id': 'client-chosen',
        'x-svc-fn-h-accept-encoding': 'identity',
        'x-svc-fn-h-cf-connecting-ip': '9.9.9.9',
        'x-svc-fn-h-content-type': 'text/plain',
        'x-svc-fn-h-x-multi': '1, 2',
        'x-svc-fn-length': '5',
        'x-svc-fn-body': '1',
      },
    });
  });

  it('sends a GET or HEAD with a body as a marked POST, a HEAD without one as a marked GET, every other method as it is', () => {
    for (const method of METHODS) {
      for (const hasBody of [true, false]) {
        const hop = invocationHop({ method, headers: new Headers(), hasBody, length: hasBody ? 3 : null });
        const expected = hasBody ? (method === 'GET' || method === 'HEAD' ? 'POST' : method) : method === 'HEAD' ? 'GET' : method;
        expect(hop.method, `${method} ${hasBody ? 'with' : 'without'} a body`).toBe(expected);
        expect(hop.headers['x-svc-fn-method'], `${method} ${hasBody}`).toBe(expected === method ? undefined : method);
        expect(hop.headers['x-svc-fn-body'], `${method} ${hasBody}`).toBe(hasBody ? '1' : undefined);
      }
    }
  });

  it('says a declared length of 0 and a chunked body apart from no body', () => {
    expect(invocationHop({ method: 'POST', headers: new Headers(), hasBody: false, length: 0 }).headers).toEqual({ 'x-svc-fn-length': '0' });
    expect(invocationHop({ method: 'POST', headers: new Headers(), hasBody: true, length: null }).headers).toEqual({ 'x-svc-fn-body': '1' });
    expect(invocationHop({ method: 'POST', headers: new Headers(), hasBody: false, length: null }).headers).toEqual({});
  });
});

describe("the hop through Node's fetch", () => {
  let server: Server;
  let url: string;
  let received: (call: InvocationRequest, body: string) => void;
  beforeAll(async () => {
    server = createServer((req, res) => {
      const call = invocationRequest(req);
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        received(call, Buffer.concat(chunks).toString());
        res.end();
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as { port: number }).port}/invoke`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it("hands the agent exactly the client's method, headers and body, whatever fetch adds (Accept, User-Agent, Accept-Encoding, …)", async () => {
    for (const method of METHODS) {
      for (const body of ['hello', null]) {
        for (const acceptEncoding of ['identity', null]) {
          const client = new Headers({ 'x-request-id': 'client-chosen', 'x-thing': 'a"b' });
          if (acceptEncoding) client.set('accept-encoding', acceptEncoding);
          const length = body === null ? null : body.length;
          const hop = invocationHop({ method, headers: client, hasBody: body !== null, length });
          const got = new Promise<[InvocationRequest, string]>((resolve) => (received = (call, text) => resolve([call, text])));
          // As shared/agent-client.ts sends it: the service's request id and credential beside.
          const answer = await fetch(url, {
            method: hop.method,
            headers: { authorization: 'Bearer internal', 'x-request-id': 'req_0123456789abcdef', ...hop.headers },
            body: body === null ? undefined : new Blob([body]).stream(),
            duplex: 'half',
          } as RequestInit);
          await answer.arrayBuffer();
          const [call, text] = await got;
          const what = `${method} body=${body !== null} accept-encoding=${acceptEncoding}`;
          expect(call, what).toEqual({
            method,
            headers: [...(acceptEncoding ? ['accept-encoding', acceptEncoding] : []), 'x-request-id', 'client-chosen', 'x-thing', 'a"b'],
            hasBody: body !== null,
            length,
          });
          expect(text, what).toBe(body ?? '');
        }
      }
    }
  });
});

describe('statusTextOf', () => {
  it('keeps a Latin-1 phrase and gives back the UTF-8 bytes of any other, which a Response then takes', () => {
    expect(statusTextOf('I am a teapot')).toBe('I am a teapot');
    expect(statusTextOf('Caf\u00e9')).toBe('Caf\u00e9');
    const euro = statusTextOf('5 \u20ac');
    expect(euro).toBe('5 \u00e2\u0082\u00ac');
    expect(new Response(null, { status: 200, statusText: euro }).statusText).toBe(euro);
    expect(() => new Response(null, { status: 200, statusText: '5 \u20ac' })).toThrow();
  });
});
