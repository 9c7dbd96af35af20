/**
 * The Node listeners' fetch-style bridge over real sockets (raw bytes, so no client library frames
 * anything its own way): a GET's or HEAD's body reaches the handler as `request.body`, as workerd
 * hands it over, and only to a handler that asks for it; an answer's status text is written as the
 * Response gives it (docs/functions.md "Invoke").
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reasonPhrase, serveFetch, type Served } from './node-http.ts';

/** What the handler saw of a request. */
interface Seen {
  method: string;
  path: string;
  hasBody: boolean;
  body: string;
}

let served: Served;
const seen: Seen[] = [];

beforeAll(async () => {
  served = await serveFetch(
    async (request) => {
      const url = new URL(request.url);
      if (url.pathname === '/ignores-body') {
        seen.push({ method: request.method, path: url.pathname, hasBody: false, body: '' });
        return new Response('ignored', { status: 200 });
      }
      if (url.pathname === '/status') {
        const text = url.searchParams.get('text');
        return new Response('answered', text === null ? { status: Number(url.searchParams.get('code')) } : { status: Number(url.searchParams.get('code')), statusText: text });
      }
      const body = request.body === null ? '' : await new Response(request.body).text();
      seen.push({ method: request.method, path: url.pathname, hasBody: request.body !== null, body });
      return new Response(request.method === 'HEAD' ? null : 'read', { status: 200 });
    },
    { host: '127.0.0.1', port: 0 },
  );
});
afterAll(() => served?.close());

/** Writes `bytes` on a connection of its own and reads until the server closes it or `until` matches. */
function exchange(bytes: string | Buffer, until?: RegExp): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(served.port, '127.0.0.1', () => socket.write(bytes));
    let text = '';
    socket.setEncoding('latin1');
    socket.on('data', (d: string) => {
      text += d;
      if (until?.test(text)) {
        socket.destroy();
        resolve(text);
      }
    });
    socket.on('error', reject);
    socket.on('close', () => resolve(text));
  });
}

const request = (method: string, path: string, headers: string[], payload = '') => `${method} ${path} HTTP/1.1\r\nHost: x\r\n${headers.map((h) => `${h}\r\n`).join('')}Connection: close\r\n\r\n${payload}`;

describe('toWebRequest', () => {
  it('hands a GET or HEAD body over as request.body, declared or chunked', async () => {
    seen.length = 0;
    await exchange(request('GET', '/read', ['Content-Length: 5'], 'hello'));
    await exchange(request('GET', '/read', ['Transfer-Encoding: chunked'], '3\r\nhel\r\n2\r\nlo\r\n0\r\n\r\n'));
    await exchange(request('HEAD', '/read', ['Content-Length: 5'], 'hello'));
    await exchange(request('HEAD', '/read', ['Transfer-Encoding: chunked'], '5\r\nhello\r\n0\r\n\r\n'));
    expect(seen).toEqual([
      { method: 'GET', path: '/read', hasBody: true, body: 'hello' },
      { method: 'GET', path: '/read', hasBody: true, body: 'hello' },
      { method: 'HEAD', path: '/read', hasBody: true, body: 'hello' },
      { method: 'HEAD', path: '/read', hasBody: true, body: 'hello' },
    ]);
  });

  it('gives a GET or HEAD without a body none, as before', async () => {
    seen.length = 0;
    await exchange(request('GET', '/read', []));
    await exchange(request('GET', '/read', ['Content-Length: 0']));
    await exchange(request('HEAD', '/read', []));
    expect(seen).toEqual([
      { method: 'GET', path: '/read', hasBody: false, body: '' },
      { method: 'GET', path: '/read', hasBody: false, body: '' },
      { method: 'HEAD', path: '/read', hasBody: false, body: '' },
    ]);
  });

  it('leaves other methods as they were: a body stream, empty when nothing was sent', async () => {
    seen.length = 0;
    await exchange(request('POST', '/read', ['Content-Length: 5'], 'hello'));
    await exchange(request('DELETE', '/read', []));
    expect(seen).toEqual([
      { method: 'POST', path: '/read', hasBody: true, body: 'hello' },
      { method: 'DELETE', path: '/read', hasBody: true, body: '' },
    ]);
  });

  it("answers a GET whose body the route never reads as it answers such a POST: the answer, then the connection closed", async () => {
    seen.length = 0;
    for (const method of ['GET', 'POST']) {
      for (const length of [5, 100_000]) {
        const text = await exchange(`${method} /ignores-body HTTP/1.1\r\nHost: x\r\nContent-Length: ${length}\r\n\r\nhello`);
        expect(text, `${method} ${length}`).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
        expect(text.toLowerCase(), `${method} ${length}`).toContain('\r\nconnection: close\r\n');
      }
    }
    expect(seen.map((s) => s.method)).toEqual(['GET', 'GET', 'POST', 'POST']);
  });
});

describe('writeWebResponse', () => {
  it("writes the Response's status text, and node's standard phrase when it has none", async () => {
    const line = async (query: string) => (await exchange(request('GET', `/status?${query}`, []))).split('\r\n', 1)[0];
    expect(await line('code=203&text=Seen%20By%20Function')).toBe('HTTP/1.1 203 Seen By Function');
    expect(await line('code=404&text=Gone%20Fishing')).toBe('HTTP/1.1 404 Gone Fishing');
    expect(await line('code=404')).toBe('HTTP/1.1 404 Not Found');
    expect(await line('code=200&text=')).toBe('HTTP/1.1 200 OK');
  });
});

describe('reasonPhrase', () => {
  it('keeps ASCII, empty included, and gives back the bytes of UTF-8 text as undici decoded them', () => {
    expect(reasonPhrase('Seen By Function')).toBe('Seen By Function');
    expect(reasonPhrase('')).toBe('');
    expect(reasonPhrase(undefined)).toBeUndefined();
    const bytes = Buffer.from('Gesehen – ü', 'utf8');
    expect(Buffer.from(reasonPhrase(bytes.toString('utf8'))!, 'latin1')).toEqual(bytes);
  });

  it("answers node's standard phrase for text it could not write or whose bytes are lost", () => {
    expect(reasonPhrase('bad\r\nset-cookie: x=1')).toBeUndefined();
    expect(reasonPhrase('not UTF-8 \ufffd')).toBeUndefined();
  });
});

describe('request lines (RFC 9112 §3.2)', () => {
  const answer = async (bytes: string) => {
    const text = await exchange(bytes);
    const [head = '', body = ''] = text.split('\r\n\r\n');
    return { status: Number(head.slice(9, 12)), head: head.toLowerCase(), code: (JSON.parse(body) as { error: { code: string } }).error.code };
  };

  it('answers a method the service does not use, known to node or not, and CONNECT with 501 and the envelope', async () => {
    for (const line of ['M-SEARCH * HTTP/1.1', 'M-SEARCH /x HTTP/1.1', 'LINK /x HTTP/1.1', 'FROB /x HTTP/1.1', 'CONNECT example.test:443 HTTP/1.1']) {
      const a = await answer(`${line}\r\nHost: x\r\n\r\n`);
      expect(a.status, line).toBe(501);
      expect(a.code, line).toBe('not_implemented');
      expect(a.head, line).toContain('x-request-id: req_');
      expect(a.head, line).toContain('content-type: application/json');
    }
    expect(seen.some((s) => s.method !== 'GET' && s.method !== 'HEAD' && s.method !== 'POST')).toBe(false);
  });

  it('answers HTTP/1.1 without Host, or any request with two, with 400 and the envelope; HTTP/1.0 needs none', async () => {
    const missing = await answer('GET /ignores-body HTTP/1.1\r\nConnection: close\r\n\r\n');
    expect(missing).toMatchObject({ status: 400, code: 'invalid_request' });
    expect(missing.head).toContain('x-request-id: req_');
    const twice = await answer('GET /ignores-body HTTP/1.1\r\nHost: a\r\nHost: b\r\nConnection: close\r\n\r\n');
    expect(twice).toMatchObject({ status: 400, code: 'invalid_request' });
    expect(await exchange('GET /ignores-body HTTP/1.0\r\n\r\n')).toMatch(/^HTTP\/1\.1 200 /);
  });
});
