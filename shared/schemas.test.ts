import { describe, expect, it } from 'vitest';
import { createProjectRequestSchema, labelSchema, pageQuerySchema, projectIdSchema } from './schemas.ts';
import { parseOr400 } from './validation.ts';
import { ServiceError } from './errors.ts';

function message(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ServiceError);
    expect((err as ServiceError).code).toBe('invalid_request');
    return (err as ServiceError).message;
  }
  throw new Error('expected invalid_request');
}

describe('schemas', () => {
  it('accept project names of 1 to 64 characters', () => {
    expect(parseOr400(createProjectRequestSchema, { name: 'a' })).toEqual({ name: 'a' });
    expect(parseOr400(createProjectRequestSchema, { name: 'é'.repeat(64) }).name).toHaveLength(64);
  });

  it.each([
    [{}, /^name: is required$/],
    [{ name: '' }, /^name: /],
    [{ name: 'x'.repeat(65) }, /^name: must be at most 64/],
    [{ name: 'a\nb' }, /^name: must not contain control/],
    [{ name: 5 }, /^name: /],
    [{ name: 'a', extra: 1 }, /unknown field "extra"/],
  ])('refuse project body %j naming the field', (body, pattern) => {
    expect(message(() => parseOr400(createProjectRequestSchema, body))).toMatch(pattern);
  });

  it('check project ids against the contract pattern', () => {
    expect(projectIdSchema.safeParse('prj_0123456789abcdef').success).toBe(true);
    expect(projectIdSchema.safeParse('prj_0123456789ABCDEF').success).toBe(false);
    expect(projectIdSchema.safeParse('prj_0123456789abcde').success).toBe(false);
  });

  it('bound labels at 64 characters, null allowed', () => {
    expect(labelSchema.safeParse(null).success).toBe(true);
    expect(labelSchema.safeParse('x'.repeat(64)).success).toBe(true);
    expect(labelSchema.safeParse('x'.repeat(65)).success).toBe(false);
  });

  it('bound page limits to 1..1000', () => {
    expect(parseOr400(pageQuerySchema, { limit: '10' })).toEqual({ limit: 10 });
    expect(message(() => parseOr400(pageQuerySchema, { limit: '0' }, 'query'))).toMatch(/^limit: /);
    expect(message(() => parseOr400(pageQuerySchema, { limit: '1001' }, 'query'))).toMatch(/^limit: /);
    expect(message(() => parseOr400(pageQuerySchema, { limit: '1.5' }, 'query'))).toMatch(/^limit: /);
  });
});
