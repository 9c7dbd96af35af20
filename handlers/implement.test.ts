import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { route } from '../shared/api/index.ts';
import { ServiceError } from '../shared/errors.ts';
import type { Ctx } from './context.ts';
import { implement, type Routed } from './implement.ts';

const decl = route({
  method: 'POST',
  path: '/v0/things/:id',
  tag: 'service',
  summary: 'a thing',
  access: 'session',
  params: { id: z.string().regex(/^t_\d+$/) },
  body: { flow: 'json', schema: z.strictObject({ n: z.number() }) },
  answers: { 200: { description: 'ok', json: z.object({ id: z.string(), n: z.number() }) } },
});

const ctx = { deps: { settings: { SVCD_JSON_MAX_BYTES: 1024 } }, requestId: 'req_0000000000000000' } as unknown as Ctx;

function request(id: string, query: string, body: string, auth?: string): Routed {
  const r = new Request(`http://svc.test/v0/things/${id}${query}`, { method: 'POST', body, headers: auth ? { authorization: auth } : {} }) as Routed;
  r.params = { id };
  return r;
}

const guard = (r: Routed) => {
  if (!r.headers.has('authorization')) throw new ServiceError('authentication_required', 'no credential');
  return 'caller';
};
const impl = implement(decl, guard, async ({ caller, params, body }) => Response.json({ caller, id: params.id, n: body.n }));

async function refusal(r: Routed): Promise<string> {
  try {
    await impl.serve(r, ctx);
  } catch (err) {
    return `${(err as ServiceError).code}: ${(err as ServiceError).message}`;
  }
  throw new Error('expected a refusal');
}

describe('implement', () => {
  it('hands the handler the guard\'s caller and the typed, parsed inputs', async () => {
    const answer = await impl.serve(request('t_1', '', '{"n":2}', 'Bearer x'), ctx);
    expect(await answer.json()).toEqual({ caller: 'caller', id: 't_1', n: 2 });
  });

  it('refuses in one order: the credential, then the path, the query, the body', async () => {
    expect(await refusal(request('bad', '?x=1', '{', undefined))).toBe('authentication_required: no credential');
    expect(await refusal(request('bad', '?x=1', '{', 'Bearer x'))).toMatch(/^invalid_request: id: /);
    expect(await refusal(request('t_1', '?x=1', '{', 'Bearer x'))).toBe('invalid_request: x: is not a known query parameter');
    expect(await refusal(request('t_1', '', '{', 'Bearer x'))).toBe('invalid_request: body: is not valid JSON');
  });
});
