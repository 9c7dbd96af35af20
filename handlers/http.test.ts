import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ServiceError } from '../shared/errors.ts';
import { pageQuerySchema } from '../shared/schemas/pagination.ts';
import { noBody, queryOf, readJson } from './http.ts';

async function refusal(fn: () => unknown): Promise<string> {
  try {
    await fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ServiceError);
    expect((err as ServiceError).code).toBe('invalid_request');
    return (err as ServiceError).message;
  }
  throw new Error('expected invalid_request');
}

const url = (q: string) => new URL(`http://svc.test/v0/projects${q}`);

describe('queryOf', () => {
  it('answers the parameters a route knows and refuses any other', async () => {
    expect(queryOf(url('?limit=5&cursor=abc'), pageQuerySchema)).toEqual({ limit: 5, cursor: 'abc' });
    expect(queryOf(url(''), pageQuerySchema)).toEqual({});
    expect(await refusal(() => queryOf(url('?foo=1'), pageQuerySchema))).toBe('foo: is not a known query parameter');
    expect(await refusal(() => queryOf(url('?limit=5&Limit=5'), pageQuerySchema))).toBe('Limit: is not a known query parameter');
    expect(await refusal(() => queryOf(url('?='), pageQuerySchema))).toBe('"": is not a known query parameter');
  });

  it('refuses a single parameter given twice, even with the same value', async () => {
    expect(await refusal(() => queryOf(url('?limit=5&limit=5'), pageQuerySchema))).toBe('limit: must be given once');
    expect(await refusal(() => queryOf(url('?cursor=a&cursor=b'), pageQuerySchema))).toBe('cursor: must be given once');
  });

  it('collects a repeatable parameter into an array, even when given once', () => {
    const schema = z.strictObject({ channel: z.array(z.string()).optional() });
    expect(queryOf(url('?channel=a'), schema, { repeatable: ['channel'] })).toEqual({ channel: ['a'] });
    expect(queryOf(url('?channel=a&channel=b'), schema, { repeatable: ['channel'] })).toEqual({ channel: ['a', 'b'] });
  });

  it('says what is wrong with a value in our words', async () => {
    expect(await refusal(() => queryOf(url('?limit=abc'), pageQuerySchema))).toBe('limit: must be a whole number from 1 to 1000');
  });
});

describe('noBody', () => {
  const post = (init: RequestInit) => new Request('http://svc.test/x', { method: 'POST', ...init });

  it('lets a request without a body, or with an empty one, through', async () => {
    await noBody(post({}));
    await noBody(post({ body: '' }));
    await noBody(post({ headers: { 'content-length': '0' } }));
    await noBody(new Request('http://svc.test/x'));
  });

  it('refuses any body, even an empty JSON object', async () => {
    for (const body of ['{}', ' ', 'x'.repeat(100_000)]) {
      expect(await refusal(() => noBody(post({ body })))).toBe('body: this route takes no body');
    }
  });

  it('refuses a GET that declares a body the runtime dropped', async () => {
    for (const headers of [{ 'content-length': '2' }, { 'transfer-encoding': 'chunked' }] as Record<string, string>[]) {
      expect(await refusal(() => noBody(new Request('http://svc.test/x', { headers })))).toBe('body: this route takes no body');
    }
  });
});

describe('readJson', () => {
  const schema = z.strictObject({ name: z.string() });
  const post = (q: string, body?: string) => new Request(`http://svc.test/x${q}`, { method: 'POST', body });

  it('refuses a query parameter: a JSON route takes its input in the body', async () => {
    expect(await refusal(() => readJson(post('?name=a', '{"name":"a"}'), schema, 1024))).toBe('name: is not a known query parameter');
  });

  it('names an unknown body field, and a missing one when the body is empty', async () => {
    expect(await refusal(() => readJson(post('', '{"name":"a","foo":1}'), schema, 1024))).toBe('foo: is not a known field');
    expect(await refusal(() => readJson(post(''), schema, 1024))).toBe('name: is required');
  });
});
