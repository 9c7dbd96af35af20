import { describe, expect, it } from 'vitest';
import { HANDLER_ROUTES, isLongLived, matchRoute, patternParams, refusesTrailingSlash, ROUTES, storage } from './index.ts';

describe('the route declarations', () => {
  it('name each route once, with its pattern\'s parameters in order', () => {
    expect(new Set(ROUTES.map((r) => r.key)).size).toBe(ROUTES.length);
    for (const r of ROUTES) expect(Object.keys(r.params ?? {}), r.key).toEqual(patternParams(r.path));
  });

  it('list every error status once, sorted, apart from the route\'s own answers', () => {
    for (const r of ROUTES) {
      expect([...r.errors].sort((a, b) => a - b), r.key).toEqual(r.errors);
      for (const status of r.errors) expect(Object.keys(r.answers), r.key).not.toContain(String(status));
      expect(r.errors, r.key).toEqual(expect.arrayContaining([400, 500]));
    }
  });

  it('leave only the /v2 pass-through to the agents', () => {
    expect(ROUTES.filter((r) => !HANDLER_ROUTES.includes(r)).every((r) => r.path === '/v2/:path+')).toBe(true);
  });
});

describe('matchRoute', () => {
  it('matches as the handlers\' router does: first declared first, parameters undecoded', () => {
    expect(matchRoute('GET', '/v0/projects/prj_1/functions/secrets')?.route.key).toBe('GET /v0/projects/:id/functions/secrets');
    expect(matchRoute('GET', '/v0/projects/prj_1/functions/fn')?.route.key).toBe('GET /v0/projects/:id/functions/:name');
    expect(matchRoute('PUT', '/v0/projects/p/storage/objects/b/a%2Fb/c')).toEqual({ route: storage.putObject, params: { id: 'p', bucket: 'b', key: 'a%2Fb/c' } });
    expect(matchRoute('POST', '/v2/sql')?.route.servedBy).toBe('agent');
    expect(matchRoute('GET', '/v0/nowhere')).toBeUndefined();
    expect(matchRoute('PATCH', '/v0/health')).toBeUndefined();
  });

  it('says which routes outlive an ordinary request', () => {
    const longLived = (method: string, path: string) => isLongLived(matchRoute(method, path)!.route);
    expect(longLived('GET', '/v0/projects/p/realtime/subscribe')).toBe(true);
    expect(longLived('PUT', '/v0/projects/p/storage/objects/b/k')).toBe(true);
    expect(longLived('POST', '/v0/projects/p/functions/f/invoke/x')).toBe(true);
    expect(longLived('POST', '/v2/sql')).toBe(true);
    expect(longLived('HEAD', '/v0/projects/p/storage/objects/b/k')).toBe(false);
    expect(longLived('POST', '/v0/projects/p/realtime/publish')).toBe(false);
  });
});

describe('refusesTrailingSlash', () => {
  it('refuses a slash no route takes, and keeps an object key\'s and an invocation\'s', () => {
    expect(refusesTrailingSlash('/v0/projects/p/keys/')).toBe(true);
    expect(refusesTrailingSlash('/v0/projects/p/storage/objects/b/')).toBe(true);
    expect(refusesTrailingSlash('/v0/nowhere/')).toBe(true);
    expect(refusesTrailingSlash('/v0/projects/p/storage/objects/b/folder/')).toBe(false);
    expect(refusesTrailingSlash('/v0/projects/p/functions/f/invoke/')).toBe(false);
    expect(refusesTrailingSlash('/v0/projects/p/keys')).toBe(false);
    expect(refusesTrailingSlash('/console/')).toBe(false);
  });
});
