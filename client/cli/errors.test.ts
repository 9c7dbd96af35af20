/** What the CLI prints on failure and the exit code it answers (client/cli/errors.ts; docs/cli.md "Exit codes and errors"). */
import { describe, expect, it } from 'vitest';
import { SvcError } from '../errors.ts';
import { CliError, hintFor, report, UsageError } from './errors.ts';
import { Output } from './output.ts';

function capture(json: boolean): { out: Output; stdout: () => string; stderr: () => string } {
  let o = '';
  let e = '';
  const out = new Output({ json, out: { write: (s: string) => (o += s) }, err: { write: (s: string) => (e += s) }, env: {} });
  return { out, stdout: () => o, stderr: () => e };
}

const notRunning = new SvcError({ status: 409, code: 'tenant_not_running', message: 'no engine', requestId: 'req_0123456789abcdef' });

describe('report', () => {
  it('answers 1 for a service error, naming its code, request id and the next step', () => {
    const c = capture(false);
    expect(report(notRunning, c.out, { project: 'prj_0123456789abcdef' })).toBe(1);
    expect(c.stderr()).toBe('error: tenant_not_running: no engine (request req_0123456789abcdef)\nhint: the project\'s engine is not running: run `svc wakeup prj_0123456789abcdef`\n');
    expect(c.stdout()).toBe('');
  });

  it('also prints the error as JSON on stdout with --json', () => {
    const c = capture(true);
    report(notRunning, c.out, { project: 'prj_0123456789abcdef' });
    expect(JSON.parse(c.stdout())).toEqual({
      error: { code: 'tenant_not_running', message: 'no engine', status: 409, request_id: 'req_0123456789abcdef', source: 'service', hint: expect.stringContaining('svc wakeup') },
    });
  });

  it('answers 2 for a usage mistake and 1 for a local failure', () => {
    expect(report(new UsageError('bad'), capture(false).out, {})).toBe(2);
    const c = capture(false);
    expect(report(new CliError('not logged in', 'run `svc login`'), c.out, {})).toBe(1);
    expect(c.stderr()).toBe('error: not logged in\nhint: run `svc login`\n');
  });

  it('says the service could not be reached, and where', () => {
    const c = capture(false);
    const err = Object.assign(new TypeError('fetch failed'), { cause: { code: 'ECONNREFUSED' } });
    expect(report(err, c.out, { baseUrl: 'http://127.0.0.1:1' })).toBe(1);
    expect(c.stderr()).toContain('could not reach http://127.0.0.1:1: ECONNREFUSED');
  });
});

describe('hintFor', () => {
  it('tells a refused key from a refused session', () => {
    const refused = new SvcError({ status: 401, code: 'authentication_required', message: 'no', requestId: null });
    expect(hintFor(refused, {})).toContain('svc login');
    expect(hintFor(refused, { usedKey: true })).toContain('svc keys create');
    expect(hintFor(new SvcError({ status: 409, code: 'tenant_running', message: '', requestId: null }), { project: 'prj_x' })).toContain('svc sleep prj_x');
  });
});
