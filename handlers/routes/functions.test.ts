/**
 * What the invoke route reads of the client's request before the relay (docs/functions.md
 * "Invoke"): whether it sent a body and its length, and its headers as it sent them where workerd
 * changed them (the `cf` object of workerd's requests is played here by a plain one).
 */
import { describe, expect, it } from 'vitest';
import { bodyOf, clientHeaders } from './functions.ts';

const URL_ = 'http://svc.test/v0/projects/prj_0123456789abcdef/functions/echo/invoke';

/** A request as workerd hands it over: its `Accept-Encoding` replaced, `CF-Connecting-IP` set, the client's encoding in `cf`. */
function fromWorkerd(headers: Record<string, string>, clientAcceptEncoding: string | undefined): Request {
  const request = new Request(URL_, { headers: { ...headers, 'accept-encoding': 'br, gzip', 'cf-connecting-ip': '127.0.0.1' } });
  Object.defineProperty(request, 'cf', { value: clientAcceptEncoding === undefined ? {} : { clientAcceptEncoding } });
  return request;
}

/** A stream of `chunks`, as the Node entry makes of a request body. */
function streamOf(...chunks: string[]): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(c) {
      for (const chunk of chunks) c.enqueue(new TextEncoder().encode(chunk));
      c.close();
    },
  });
}

describe('bodyOf', () => {
  it('a Content-Length above 0 or a chunked body is a body, whatever the method', async () => {
    const post = new Request(URL_, { method: 'POST', headers: { 'content-length': '5' }, body: 'hello' });
    expect(await bodyOf(post)).toEqual({ hasBody: true, length: 5, body: post.body });
    const chunked = new Request(URL_, { method: 'DELETE', headers: { 'transfer-encoding': 'chunked' }, body: streamOf('a'), duplex: 'half' } as RequestInit);
    expect(await bodyOf(chunked)).toEqual({ hasBody: true, length: null, body: chunked.body });
    expect(await bodyOf(new Request(URL_, { method: 'OPTIONS', headers: { 'content-length': '0' }, body: '' }))).toEqual({ hasBody: false, length: 0, body: null });
    expect(await bodyOf(new Request(URL_, { method: 'GET' }))).toEqual({ hasBody: false, length: null, body: null });
  });

  it('refuses a GET or HEAD body the entry could not hand over (the Node entry), with 501', async () => {
    for (const [method, headers] of [['GET', { 'content-length': '5' }], ['HEAD', { 'transfer-encoding': 'chunked' }]] as const) {
      const refused = await bodyOf(new Request(URL_, { method, headers })).catch((e: unknown) => e);
      expect(refused, method).toMatchObject({ code: 'not_implemented' });
    }
  });

  it('takes a stream without a framing header for a body only when it yields something, and loses none of it', async () => {
    const empty = await bodyOf(new Request(URL_, { method: 'DELETE', body: streamOf(), duplex: 'half' } as RequestInit));
    expect(empty).toEqual({ hasBody: false, length: null, body: null });
    const some = await bodyOf(new Request(URL_, { method: 'POST', body: streamOf('he', 'll', 'o'), duplex: 'half' } as RequestInit));
    expect(some).toMatchObject({ hasBody: true, length: null });
    expect(await new Response(some.body).text()).toBe('hello');
  });
});

describe('clientHeaders', () => {
  it('are the request headers themselves outside workerd', () => {
    const request = new Request(URL_, { headers: { 'accept-encoding': 'gzip', 'cf-connecting-ip': '9.9.9.9' } });
    expect(clientHeaders(request)).toBe(request.headers);
  });

  it("restore workerd's replaced Accept-Encoding to the client's, or to none, and drop the CF-Connecting-IP it set", () => {
    const restored = clientHeaders(fromWorkerd({ 'x-thing': '1' }, 'identity'));
    expect([...restored]).toEqual([
      ['accept-encoding', 'identity'],
      ['x-thing', '1'],
    ]);
    expect([...clientHeaders(fromWorkerd({ 'x-thing': '1' }, ''))]).toEqual([['x-thing', '1']]);
    // A cf object without the client's encoding (Cloudflare left it as it was): kept as it is.
    expect([...clientHeaders(fromWorkerd({}, undefined))]).toEqual([['accept-encoding', 'br, gzip']]);
  });
});
