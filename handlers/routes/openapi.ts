/** Route: `GET /v0/openapi.json`, the API as an OpenAPI 3.1 document, unauthenticated (docs/api.md "How the reference is made"). */
import { openApiJson } from '../../shared/openapi/document.ts';
import type { Routes } from '../context.ts';
import { noInput } from '../http.ts';

/** Registers the document's route. */
export function register(router: Routes): void {
  router.get('/v0/openapi.json', async (request) => {
    await noInput(request);
    return new Response(openApiJson(), {
      status: 200,
      headers: { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'public, max-age=300' },
    });
  });
}
