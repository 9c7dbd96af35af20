import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { signupRequestSchema } from './accounts.ts';
import { labelSchema } from './labels.ts';
import { pageQuerySchema } from './pagination.ts';
import { createProjectRequestSchema, projectIdSchema } from './projects.ts';
import { parseOr400 } from '../validation.ts';
import { invalidMessage } from '../../test/helpers/invalid.ts';

const message = invalidMessage;

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
    [{ name: 'a', extra: 1 }, /^extra: is not a known field$/],
    [{ nmae: 'a' }, /^nmae: is not a known field$/],
  ])('refuse project body %j naming the field', (body, pattern) => {
    expect(message(() => parseOr400(createProjectRequestSchema, body))).toMatch(pattern);
  });

  it('check project ids against the contract pattern', () => {
    expect(projectIdSchema.safeParse('prj_0123456789abcdef').success).toBe(true);
    expect(projectIdSchema.safeParse('prj_0123456789ABCDEF').success).toBe(false);
    expect(projectIdSchema.safeParse('prj_0123456789abcde').success).toBe(false);
  });

  it('refuse a name of only whitespace, and keep any other exactly as given', () => {
    expect(message(() => parseOr400(createProjectRequestSchema, { name: ' \u00a0 ' }))).toBe('name: must not be blank');
    expect(parseOr400(createProjectRequestSchema, { name: '  my app ' })).toEqual({ name: '  my app ' });
  });

  it('bound labels at 64 characters, null allowed', () => {
    expect(labelSchema.safeParse(null).success).toBe(true);
    expect(labelSchema.safeParse('x'.repeat(64)).success).toBe(true);
    expect(labelSchema.safeParse('x'.repeat(65)).success).toBe(false);
  });

  it('refuse a blank label, and a label of the wrong type in our words', () => {
    const body = z.strictObject({ label: labelSchema.optional() });
    expect(message(() => parseOr400(body, { label: '  ' }))).toBe('label: must not be blank');
    expect(message(() => parseOr400(body, { label: '' }))).toBe('label: must not be blank');
    expect(message(() => parseOr400(body, { label: 5 }))).toBe('label: must be a string or null');
    expect(parseOr400(body, { label: ' ci ' })).toEqual({ label: ' ci ' });
  });

  it('refuse a blank account name at signup', () => {
    expect(message(() => parseOr400(signupRequestSchema, { name: ' ' }))).toBe('name: must not be blank');
    expect(parseOr400(signupRequestSchema, {})).toEqual({});
  });

  it('bound page limits to 1..1000 with one message in our words', () => {
    expect(parseOr400(pageQuerySchema, { limit: '10' })).toEqual({ limit: 10 });
    expect(parseOr400(pageQuerySchema, { limit: '1000' })).toEqual({ limit: 1000 });
    for (const limit of ['0', '1001', '1.5', 'abc', '', '-1', ' 5', '1e2', '9'.repeat(400)]) {
      expect(message(() => parseOr400(pageQuerySchema, { limit }, 'query')), limit).toBe('limit: must be a whole number from 1 to 1000');
    }
  });

  it('know only limit and cursor on a page query', () => {
    expect(message(() => parseOr400(pageQuerySchema, { foo: '1' }, 'query'))).toBe('foo: is not a known field');
  });
});
