import { describe, expect, it } from 'vitest';
import type { ServerResponse } from 'node:http';
import { ERROR_STATUS, ServiceError, errorResponse, errors, isErrorCode, writeError, type ErrorCode } from './errors.ts';
import { isIdentityCoding } from './http/encoding.ts';

/** What `write` puts on a stand-in node:http response. */
async function writtenBy(write: (res: ServerResponse) => void): Promise<{ status: number; headers: Record<string, string>; body: string }> {
  let status = 0;
  let headers: Record<string, string> = {};
  let body = '';
  const res = {
    writeHead(s: number, h: Record<string, string>) {
      status = s;
      headers = h;
      return res;
    },
    end(b: Uint8Array) {
      body = new TextDecoder().decode(b);
      return res;
    },
  };
  write(res as unknown as ServerResponse);
  return { status, headers, body };
}

describe('error mapping', () => {
  it('answers every code with the status of its ServiceError, on both surfaces alike', async () => {
    for (const code of Object.keys(ERROR_STATUS) as ErrorCode[]) {
      const err = new ServiceError(code, 'x');
      const web = errorResponse(err, 'req_1');
      const node = await writtenBy((res) => writeError(res, err, 'req_1'));
      expect(web.status).toBe(err.status);
      expect(node.status).toBe(err.status);
      // The web answer also tells an edge not to compress it (shared/http/encoding.ts), which Node listeners drop.
      expect(node.headers).toEqual(Object.fromEntries([...web.headers].filter(([name, value]) => !isIdentityCoding(name, value))));
      expect(node.body).toBe(await web.text());
    }
  });

  it('answers a documented variant with its own status and the code of its row', async () => {
    const r = errorResponse(errors.rangeNotSatisfiable(7, { etag: '"e"', 'content-type': 'image/png' }), 'req_2');
    expect(r.status).toBe(416);
    expect(r.headers.get('content-range')).toBe('bytes */7');
    expect(r.headers.get('etag')).toBe('"e"');
    expect(r.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(((await r.json()) as { error: { code: string } }).error.code).toBe('invalid_request');
    expect(() => new ServiceError('not_found', 'x', { variant: 'range_not_satisfiable' })).toThrow();
  });

  it('renders a ServiceError as its envelope with the matching status', async () => {
    const r = errorResponse(new ServiceError('tenant_running', 'sleep first'), 'req_1');
    expect(r.status).toBe(409);
    expect(r.headers.get('x-request-id')).toBe('req_1');
    expect(await r.json()).toEqual({ error: { code: 'tenant_running', message: 'sleep first' } });
  });

  it('adds WWW-Authenticate to 401 answers only', () => {
    expect(errorResponse(new ServiceError('authentication_required', 'x'), 'r').headers.get('www-authenticate')).toBe(
      'Bearer realm="svc-cloud"',
    );
    expect(errorResponse(new ServiceError('not_found', 'x'), 'r').headers.get('www-authenticate')).toBeNull();
  });

  it('answers an unexpected exception as 500 internal without leaking its message', async () => {
    const logged: string[] = [];
    const r = errorResponse(new Error('db password is hunter2'), 'req_9', (l) => logged.push(l));
    expect(r.status).toBe(500);
    const body = (await r.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('internal');
    expect(body.error.message).toContain('req_9');
    expect(body.error.message).not.toContain('hunter2');
    expect(logged.join('\n')).toContain('hunter2');
  });

  it('recognises only contract codes', () => {
    expect(isErrorCode('not_found')).toBe(true);
    expect(isErrorCode('teapot')).toBe(false);
    expect(isErrorCode('toString')).toBe(false);
  });
});
