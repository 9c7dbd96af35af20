import { Validator } from '@seriousme/openapi-schema-validator';
import { describe, expect, it } from 'vitest';
import { routeTable } from '../../handlers/index.ts';
import { AnswerChecker } from '../../test/helpers/openapi.ts';
import { buildOpenApiDocument, openApiPath } from './document.ts';
import { ROUTE_DOCS } from './routes.ts';

const doc = buildOpenApiDocument();

describe('the OpenAPI document', () => {
  it('is a valid OpenAPI 3.1 document', async () => {
    const result = await new Validator().validate(structuredClone(doc) as never);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
  });

  it('describes every route of the route table', () => {
    const missing = routeTable()
      .map(([method, pattern]) => `${method} ${pattern}`)
      .filter((key) => !(key in ROUTE_DOCS));
    expect(missing, 'routes without a description in shared/openapi/routes.ts').toEqual([]);
  });

  it('describes no route the handlers do not serve (the /v2 pass-through aside)', () => {
    const served = new Set(routeTable().map(([method, pattern]) => `${method} ${pattern}`));
    const extra = Object.entries(ROUTE_DOCS)
      .filter(([key, d]) => !d.passThrough && !served.has(key))
      .map(([key]) => key);
    expect(extra, 'descriptions in shared/openapi/routes.ts without a route').toEqual([]);
    for (const [key, d] of Object.entries(ROUTE_DOCS)) {
      const [method, pattern] = key.split(' ') as [string, string];
      expect(doc.paths[openApiPath(pattern)]?.[method.toLowerCase()]?.['x-svc-route'], key).toBe(key);
      if (d.passThrough) expect(pattern.startsWith('/v2/')).toBe(true);
    }
  });

  it('names the two credentials as security schemes and uses them per route', () => {
    expect(Object.keys(doc.components.securitySchemes).sort()).toEqual(['projectKey', 'session']);
    expect(doc.paths['/v0/health']!.get!.security).toEqual([]);
    expect(doc.paths['/v0/projects/{id}/keys']!.post!.security).toEqual([{ session: [] }]);
    expect(doc.paths['/v2/{path}']!.post!.security).toEqual([{ projectKey: [] }]);
  });

  it('gives every authenticated route the 401 envelope with its challenge, and project routes the 404', () => {
    const op = doc.paths['/v0/projects/{id}/keys']!.get!;
    expect(op.responses['401']).toEqual({ $ref: '#/components/responses/Error401' });
    expect(op.responses['404']).toEqual({ $ref: '#/components/responses/Error404' });
    expect(JSON.stringify(doc.components.responses.Error401)).toContain('WWW-Authenticate');
  });

  it('checks answers: a drifted field fails, the real shape passes', () => {
    const checker = new AnswerChecker(doc);
    const project = {
      id: 'prj_0123456789abcdef',
      name: 'a',
      state: 'stopped',
      created_at: '2026-05-01T12:00:00.000Z',
      updated_at: '2026-05-01T12:00:00.000Z',
      native: { pin: '3.0.0', data_plane: '/v2' },
    };
    expect(checker.problems('GET', '/v0/projects/prj_0123456789abcdef', 200, project)).toEqual([]);
    expect(checker.problems('GET', '/v0/projects/prj_0123456789abcdef', 200, { ...project, extra: 1 })).not.toEqual([]);
    expect(checker.problems('GET', '/v0/projects/prj_0123456789abcdef', 200, { ...project, created_at: 'yesterday' })).not.toEqual([]);
    expect(checker.problems('GET', '/v0/projects/prj_0123456789abcdef', 404, { error: { code: 'not_found', message: 'x' } })).toEqual([]);
    expect(checker.problems('GET', '/v0/projects/prj_0123456789abcdef', 404, { error: { code: 'conflict', message: 'x' } })).not.toEqual([]);
    expect(checker.problems('GET', '/v0/projects/prj_0123456789abcdef/storage/objects/b1b/a/b/c', 416, { error: { code: 'invalid_request', message: 'x' } })).toEqual([]);
    expect(checker.problems('GET', '/v0/nowhere', 404, {})).toEqual(['GET /v0/nowhere is not in the OpenAPI document']);
  });
});
