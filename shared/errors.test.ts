import { describe, expect, it } from 'vitest';
import { ERROR_STATUS, ServiceError, errorResponse, isErrorCode } from './errors.ts';

describe('error mapping', () => {
  it('gives every contract code the status of DESIGN §3', () => {
    expect(ERROR_STATUS).toEqual({
      invalid_request: 400,
      authentication_required: 401,
      authorization_denied: 403,
      not_found: 404,
      conflict: 409,
      tenant_not_running: 409,
      tenant_running: 409,
      payload_too_large: 413,
      function_busy: 429,
      internal: 500,
      not_implemented: 501,
      upstream_unavailable: 502,
      function_bad_output: 502,
      orchestrator_unavailable: 503,
      function_runtime_missing: 503,
      function_timeout: 504,
    });
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
