/** Declarations: projects (contract "POST /v0/projects", "GET /v0/projects/{id}"; docs/lifecycle.md "Deleting a project"). */
import { pageQuerySchema } from '../schemas/pagination.ts';
import { createProjectRequestSchema, projectIdSchema, projectListSchema, projectSchema, renameProjectRequestSchema } from '../schemas/projects.ts';
import { route } from './route.ts';

/** The path parameter of every route under `/v0/projects/:id`. */
export const project = { id: projectIdSchema };

export const create = route({
  method: 'POST',
  path: '/v0/projects',
  tag: 'projects',
  summary: 'Create a project',
  description:
    'Reserves a tenant on the least-loaded live host agent; the engine is not started (state `stopped`). With `from_snapshot` (a fork, docs/durability.md "Fork"), the new project\'s data is that snapshot of a project the caller owns (404 for any other), and it is created `sleeping`; `from_project` names the snapshot\'s project when the caller knows it.',
  access: 'session',
  body: { flow: 'json', schema: createProjectRequestSchema },
  answers: { 201: { description: 'the project', json: projectSchema } },
  errors: [404, 409, 502, 503],
});

export const list = route({
  method: 'GET',
  path: '/v0/projects',
  tag: 'projects',
  summary: 'List your projects',
  access: 'session',
  query: pageQuerySchema,
  answers: { 200: { description: 'a page of projects', json: projectListSchema } },
});

export const read = route({
  method: 'GET',
  path: '/v0/projects/:id',
  tag: 'projects',
  summary: 'Read a project',
  description: 'The recorded state reconciled with the live process (a correction is written back).',
  access: 'session',
  params: project,
  answers: { 200: { description: 'the project', json: projectSchema } },
  errors: [503],
});

export const rename = route({
  method: 'PATCH',
  path: '/v0/projects/:id',
  tag: 'projects',
  summary: 'Rename a project, or set its automatic sleep and backups',
  description:
    'Any of `name` (the rule of creation; kept exactly as given), `auto_sleep_after_s` (seconds without `/v2` traffic after which the agent sleeps the running tenant, at least `SVCD_AUTO_SLEEP_MIN_S` (60 by default), at most 30 days; null: off) and `backup` (`{"on_sleep": true, "keep": 7}`: a snapshot labelled `auto` at each sleep that follows writes, copied off the machine, the newest `keep` automatic ones kept; null: off). Answered as GET answers (the state reconciled by the project\'s agent, so 503 when that agent is not live, and nothing is changed). docs/lifecycle.md "Automatic sleep and backups".',
  access: 'session',
  params: project,
  body: { flow: 'json', schema: renameProjectRequestSchema },
  answers: { 200: { description: 'the project', json: projectSchema } },
  errors: [503],
});

export const remove = route({
  method: 'DELETE',
  path: '/v0/projects/:id',
  tag: 'projects',
  summary: 'Delete a project and everything it holds',
  description: 'Owner session only: its engine, data directory, snapshots, keys, buckets and objects; receipted. At once every project route answers 404 and `/v2` with its keys 401 (docs/lifecycle.md).',
  access: 'session',
  params: project,
  answers: { 200: { description: 'the project as it was', json: projectSchema } },
  errors: [409, 502, 503],
});

/** In the order they are matched. */
export const routes = [create, list, read, rename, remove] as const;
