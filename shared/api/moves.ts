/** Declarations: moving a project to another host agent (docs/durability.md "Relocation"). */
import { projectSchema, relocateRequestSchema } from '../schemas/projects.ts';
import { project } from './projects.ts';
import { route } from './route.ts';

export const relocate = route({
  method: 'POST',
  path: '/v0/projects/:id/relocate',
  tag: 'lifecycle',
  summary: 'Move a sleeping project to another host agent',
  description:
    'Owner session only. The tenant must sleep (409 `tenant_running`). Its data directory moves through its newest verified snapshot (taken first when the data changed since), copied off the machine; its `fs` objects and function modules are copied; then the project answers from the new agent (`agent_id`), keys and `/v2` at once. `target_agent` (optional) names the agent; otherwise the least-loaded other live agent. Receipted (`project.relocate`). 503 when no other live agent takes projects or the deployment keeps no off-machine copies. docs/durability.md "Relocation".',
  access: 'session',
  params: project,
  body: { flow: 'json', schema: relocateRequestSchema },
  answers: { 200: { description: 'the project on its new agent', json: projectSchema } },
  errors: [409, 502, 503],
});

/** In the order they are matched. */
export const routes = [relocate] as const;
