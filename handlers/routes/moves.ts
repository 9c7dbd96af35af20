/**
 * Routes: moving a project to another host agent (declared in shared/api/moves.ts; rules in
 * handlers/domain/moves.ts; docs/durability.md "Relocation"). A fork is `POST /v0/projects` with
 * `from_snapshot` (handlers/routes/projects.ts).
 */
import { moves } from '../../shared/api/index.ts';
import { requireProjectForAgent } from '../auth.ts';
import { relocate } from '../domain/moves.ts';
import { json } from '../http.ts';
import { implement } from '../implement.ts';

export const implementations = [
  implement(moves.relocate, requireProjectForAgent, async ({ caller, body }, ctx) =>
    json(await relocate(ctx.deps, { ...caller, requestId: ctx.requestId, targetAgent: body.target_agent })),
  ),
];
