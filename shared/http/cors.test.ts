// The CORS policy of docs/api.md "Browsers and CORS", on plain values.
import { describe, expect, it } from 'vitest';
import { loadSettings } from '../config.ts';
import { allowedOrigin, corsAnswerHeaders, isPreflight, NO_CORS, parseCorsOrigins, preflightHeaders } from './cors.ts';

const secrets = { SVCD_SESSION_SECRET: 'x'.repeat(32), SVCD_KEY_PEPPER: 'y'.repeat(32), SVCD_INTERNAL_SECRET: 'z'.repeat(32) };

describe('SVCD_CORS_ORIGINS', () => {
  it('is empty by default: no origin is allowed', () => {
    const policy = parseCorsOrigins(loadSettings(secrets).SVCD_CORS_ORIGINS);
    expect(allowedOrigin(policy, 'https://app.example.com')).toBeNull();
    expect(corsAnswerHeaders(policy, 'https://app.example.com')).toEqual({});
  });

  it('* allows every origin and answers *', () => {
    const policy = parseCorsOrigins('*');
    expect(allowedOrigin(policy, 'http://localhost:5173')).toBe('*');
    expect(corsAnswerHeaders(policy, 'http://localhost:5173')).not.toHaveProperty('vary');
  });

  it('an exact list answers the origin itself, with Vary: Origin', () => {
    const policy = parseCorsOrigins('https://app.example.com, http://localhost:5173');
    expect(corsAnswerHeaders(policy, 'http://localhost:5173')).toMatchObject({
      'access-control-allow-origin': 'http://localhost:5173',
      vary: 'Origin',
    });
    expect(corsAnswerHeaders(policy, 'https://app.example.com')['access-control-expose-headers']).toContain('X-Request-Id');
  });

  it('a disallowed origin gets no CORS header at all', () => {
    const policy = parseCorsOrigins('https://app.example.com');
    expect(corsAnswerHeaders(policy, 'https://evil.example.com')).toEqual({ vary: 'Origin' });
    expect(preflightHeaders(policy, 'https://evil.example.com')).toEqual({ vary: 'Origin' });
    expect(corsAnswerHeaders(policy, 'https://app.example.com.evil.example')).toEqual({ vary: 'Origin' });
  });

  it('a request without Origin gets nothing', () => {
    expect(corsAnswerHeaders(parseCorsOrigins('*'), null)).toEqual({});
    expect(corsAnswerHeaders(parseCorsOrigins('https://a.example'), undefined)).toEqual({});
  });

  it.each([
    ['https://app.example.com/', 'must be written as the browser sends it: https://app.example.com'],
    ['https://APP.example.com', 'must be written as the browser sends it'],
    ['https://app.example.com:443', 'must be written as the browser sends it'],
    ['app.example.com', 'is not an origin'],
    ['ftp://app.example.com', 'must be an http or https origin'],
    ['null', 'never allowed'],
    ['*, https://app.example.com', 'cannot be listed with others'],
  ])('refuses %s at start, naming it', (value, message) => {
    expect(() => loadSettings({ ...secrets, SVCD_CORS_ORIGINS: value })).toThrow(/SVCD_CORS_ORIGINS/);
    expect(() => parseCorsOrigins(value)).toThrow(message);
  });
});

describe('preflight', () => {
  it('is OPTIONS with Access-Control-Request-Method', () => {
    expect(isPreflight('OPTIONS', 'POST')).toBe(true);
    expect(isPreflight('OPTIONS', null)).toBe(false);
    expect(isPreflight('GET', 'POST')).toBe(false);
  });

  it('allows the service headers and methods', () => {
    const headers = preflightHeaders(parseCorsOrigins('*'), 'http://localhost:3000');
    expect(headers['access-control-allow-origin']).toBe('*');
    for (const name of ['Authorization', 'Content-Type', 'X-Svc-Protocol-Minor', 'X-Svc-Project', 'Range', 'If-None-Match']) {
      expect(headers['access-control-allow-headers']).toContain(name);
    }
    expect(headers['access-control-allow-methods']).toBe('GET, HEAD, POST, PUT, PATCH, DELETE');
    expect(headers).not.toHaveProperty('access-control-allow-credentials');
  });

  it('answers nothing CORS without an allowed origin', () => {
    expect(preflightHeaders(NO_CORS, 'http://localhost:3000')).toEqual({});
  });
});
