import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { buildOpenApiDocument } from './document.ts';
import { MARKERS, renderReference, typeOf, withReference } from './markdown.ts';

describe('the API reference in docs/api.md', () => {
  it('is what the OpenAPI document renders (run `npm run docs:api` after changing a route or schema)', () => {
    const page = readFileSync(new URL('../../docs/api.md', import.meta.url), 'utf8');
    expect(page).toContain(MARKERS.start);
    expect(withReference(page, renderReference(buildOpenApiDocument())) === page, 'docs/api.md is stale: run npm run docs:api').toBe(true);
  });

  it('keeps the hand-written part and replaces only the generated one', () => {
    const page = `# Title\n\nmine\n\n${MARKERS.start}\nold\n${MARKERS.end}\n`;
    expect(withReference(page, `${MARKERS.start}\nnew\n${MARKERS.end}\n`)).toBe(`# Title\n\nmine\n\n${MARKERS.start}\nnew\n${MARKERS.end}\n`);
  });

  it('writes types in a line', () => {
    expect(typeOf({ type: 'string', pattern: '^a$' })).toBe('string (`^a$`)');
    expect(typeOf({ type: ['string', 'null'], maxLength: 64 })).toBe('string (at most 64 characters) or null');
    expect(typeOf({ $ref: '#/components/schemas/Project' })).toBe('[Project](#schema-project)');
    expect(typeOf({ type: 'array', items: { type: 'integer' } })).toBe('array of integer');
  });
});
