/** Route: `GET /v0/openapi.json`, the API as an OpenAPI 3.1 document, unauthenticated (docs/api.md "How the reference is made"). */
import { service } from '../../shared/api/index.ts';
import { openApiJson } from '../../shared/openapi/document.ts';
import { implement } from '../implement.ts';

export const implementations = [
  implement(
    service.openApi,
    () =>
      new Response(openApiJson(), {
        status: 200,
        headers: { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'public, max-age=300' },
      }),
  ),
];
