import { Validator } from '@seriousme/openapi-schema-validator';
import { describe, expect, it } from 'vitest';
import { routeTable } from '../../handlers/index.ts';
import { AnswerChecker } from '../../test/helpers/openapi.ts';
import { ROUTES } from '../api/index.ts';
import { codesOfStatus } from '../schemas/common.ts';
import { buildOpenApiDocument, openApiPath } from './document.ts';

const doc = buildOpenApiDocument();

describe('the OpenAPI document', () => {
  it('is a valid OpenAPI 3.1 document', async () => {
    const result = await new Validator().validate(structuredClone(doc) as never);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
  });

  it('describes every route the handlers serve, and the /v2 pass-through', () => {
    const described = new Set(ROUTES.map((r) => r.key));
    const missing = routeTable()
      .map(([method, pattern]) => `${method} ${pattern}`)
      .filter((key) => !described.has(key));
    expect(missing, 'routes without a declaration in shared/api/').toEqual([]);
    const served = new Set(routeTable().map(([method, pattern]) => `${method} ${pattern}`));
    expect(ROUTES.filter((r) => r.servedBy === 'handlers' && !served.has(r.key)).map((r) => r.key), 'declarations the handlers do not serve').toEqual([]);
    for (const route of ROUTES) {
      expect(doc.paths[openApiPath(route.path)]?.[route.method.toLowerCase()]?.['x-svc-route'], route.key).toBe(route.key);
      if (route.servedBy === 'agent') expect(route.path.startsWith('/v2/')).toBe(true);
    }
  });

  it('lists every status a declaration names, each one an error code\'s or an answer of its own', () => {
    for (const route of ROUTES) {
      const op = doc.paths[openApiPath(route.path)]![route.method.toLowerCase()]!;
      for (const status of route.errors) {
        expect(codesOfStatus(status).length, `${route.key} ${status}`).toBeGreaterThan(0);
        expect(op.responses[String(status)], `${route.key} ${status}`).toEqual({ $ref: `#/components/responses/Error${status}` });
      }
    }
    // Realtime subscribe refuses a key or ticket of another project (403) and a project at its subscriber limit (409).
    const subscribe = doc.paths['/v0/projects/{id}/realtime/subscribe']!.get!;
    expect(Object.keys(subscribe.responses)).toEqual(expect.arrayContaining(['403', '409']));
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
      last_backup_at: null,
      last_backup_offsite: null,
      auto_sleep_after_s: null,
      backup: null,
      agent_id: 'agt_0123456789abcdef',
      restored_from: null,
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
