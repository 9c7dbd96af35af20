import { describe, expect, it } from 'vitest';
import { HANDLER_ROUTES } from '../shared/api/index.ts';
import { IMPLEMENTATIONS, routeTable } from './index.ts';

describe('the handlers and the route declarations', () => {
  it('implement every declaration the handlers serve, and nothing else', () => {
    const declared = HANDLER_ROUTES.map((r) => r.key).sort();
    const implemented = IMPLEMENTATIONS.map((i) => i.route.key).sort();
    expect(implemented, 'each declaration of shared/api/ needs one implementation in handlers/routes/').toEqual(declared);
  });

  it('register them in the declarations\' order, the order they are matched in', () => {
    expect(routeTable().map(([method, path]) => `${method} ${path}`)).toEqual(HANDLER_ROUTES.map((r) => r.key));
  });
});
