/**
 * `npm run docs:api`: writes the API reference into docs/api.md from the OpenAPI document, between
 * the markers of ./markdown.ts; the hand-written decisions above them stay as they are.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { buildOpenApiDocument } from './document.ts';
import { renderReference, withReference } from './markdown.ts';

const page = fileURLToPath(new URL('../../docs/api.md', import.meta.url));
const before = readFileSync(page, 'utf8');
const after = withReference(before, renderReference(buildOpenApiDocument()));
if (after === before) console.log('docs/api.md is up to date');
else {
  writeFileSync(page, after);
  console.log('wrote docs/api.md');
}
