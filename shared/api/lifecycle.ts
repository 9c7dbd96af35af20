/**
 * Declarations: the tenant lifecycle (contract "States and transitions"), snapshots, restore and the
 * previous data directories restore keeps (docs/lifecycle.md).
 */
import { headAnswerSchema } from '../schemas/lifecycle.ts';
import { pageQuerySchema } from '../schemas/pagination.ts';
import { projectSchema } from '../schemas/projects.ts';
import {
  createSnapshotRequestSchema,
  importAnswerSchema,
  replacedDirSchema,
  replacedListSchema,
  replacedNameSchema,
  restoreAnswerSchema,
  restoreRequestSchema,
  snapshotIdSchema,
  snapshotListSchema,
  snapshotSchema,
} from '../schemas/snapshots.ts';
import { project } from './projects.ts';
import { route } from './route.ts';

const snapshot = { ...project, snapshot_id: snapshotIdSchema };

export const wakeup = route({
  method: 'POST',
  path: '/v0/projects/:id/wakeup',
  tag: 'lifecycle',
  summary: 'Start the project\'s engine',
  description: 'Idempotent; initializes the data directory on first start (docs/lifecycle.md).',
  access: 'session',
  params: project,
  answers: { 200: { description: 'the project, `running`', json: projectSchema } },
  errors: [502, 503],
});

export const sleep = route({
  method: 'POST',
  path: '/v0/projects/:id/sleep',
  tag: 'lifecycle',
  summary: 'Stop the project\'s engine',
  description: 'Graceful stop; the data directory is kept. Idempotent.',
  access: 'session',
  params: project,
  answers: { 200: { description: 'the project, `sleeping`', json: projectSchema } },
  errors: [502, 503],
});

export const head = route({
  method: 'GET',
  path: '/v0/projects/:id/head',
  tag: 'lifecycle',
  summary: 'What the engine says about itself',
  description: 'A live probe of a running engine, or the offline status of a sleeping one; a tenant never started is 409 `tenant_not_running`.',
  access: 'session',
  params: project,
  answers: { 200: { description: 'the probe result', json: headAnswerSchema } },
  errors: [409, 502, 503],
});

export const createSnapshot = route({
  method: 'POST',
  path: '/v0/projects/:id/snapshots',
  tag: 'lifecycle',
  summary: 'Snapshot the sleeping tenant',
  description: 'A verified backup of the data directory; 409 `tenant_running` while the engine runs, 409 `tenant_not_running` before its first start.',
  access: 'session',
  params: project,
  body: { flow: 'json', schema: createSnapshotRequestSchema, optional: true },
  answers: { 201: { description: 'the snapshot', json: snapshotSchema } },
  errors: [409, 502, 503],
});

export const listSnapshots = route({
  method: 'GET',
  path: '/v0/projects/:id/snapshots',
  tag: 'lifecycle',
  summary: 'List snapshots, newest first',
  access: 'session',
  params: project,
  query: pageQuerySchema,
  answers: { 200: { description: 'a page of snapshots', json: snapshotListSchema } },
});

export const readSnapshot = route({
  method: 'GET',
  path: '/v0/projects/:id/snapshots/:snapshot_id',
  tag: 'lifecycle',
  summary: 'Read a snapshot',
  access: 'session',
  params: snapshot,
  answers: { 200: { description: 'the snapshot', json: snapshotSchema } },
});

export const deleteSnapshot = route({
  method: 'DELETE',
  path: '/v0/projects/:id/snapshots/:snapshot_id',
  tag: 'lifecycle',
  summary: 'Delete a snapshot and its backup directory',
  description:
    'Receipted (`snapshot.delete`). 409 `conflict` while a restore of it is asked for or running, or while it is being taken; ' +
    'a deleted snapshot is 404 everywhere, restore included (docs/lifecycle.md "Deleting a snapshot").',
  access: 'session',
  params: snapshot,
  answers: { 200: { description: 'the snapshot as it was', json: snapshotSchema } },
  errors: [409, 503],
});

export const restore = route({
  method: 'POST',
  path: '/v0/projects/:id/restore',
  tag: 'lifecycle',
  summary: 'Restore a snapshot into the sleeping tenant',
  description: 'The previous data directory is moved aside under `replaced/` and kept; the tenant stays asleep. 409 `tenant_running` while the engine runs; 404 for an unknown snapshot.',
  access: 'session',
  params: project,
  body: { flow: 'json', schema: restoreRequestSchema },
  answers: { 200: { description: 'restored', json: restoreAnswerSchema } },
  errors: [409, 502, 503],
});

export const listReplaced = route({
  method: 'GET',
  path: '/v0/projects/:id/replaced',
  tag: 'lifecycle',
  summary: 'List the previous data directories restore kept, newest first',
  description: 'Each with when it was moved aside, the snapshot that replaced it and its size (docs/lifecycle.md "Previous data directories").',
  access: 'session',
  params: project,
  query: pageQuerySchema,
  answers: { 200: { description: 'a page of previous directories', json: replacedListSchema } },
  errors: [503],
});

export const discardReplaced = route({
  method: 'DELETE',
  path: '/v0/projects/:id/replaced/:name',
  tag: 'lifecycle',
  summary: 'Free a previous data directory',
  description: 'Receipted (`replaced.delete`). `{name}` is one answered by the list; anything that could leave `replaced/` is 400, an unknown name 404.',
  access: 'session',
  params: { ...project, name: replacedNameSchema },
  answers: { 200: { description: 'the directory as it was; its `bytes` are what was freed', json: replacedDirSchema } },
  errors: [503],
});

export const snapshotArchive = route({
  method: 'GET',
  path: '/v0/projects/:id/snapshots/:snapshot_id/archive',
  tag: 'lifecycle',
  summary: 'Download a snapshot as one file',
  description:
    'A tar of the snapshot\'s backup directory (`<snapshot_id>/manifest.json`, `meta.json`, `data.sqlite`), streamed, whatever the tenant\'s state; ' +
    'from the off-machine copy when the agent no longer holds the directory. `POST …/import` takes it back (docs/lifecycle.md "Export and import").',
  access: 'session',
  params: snapshot,
  answers: {
    200: {
      description: 'the archive',
      content: { type: 'application/x-tar', description: 'a ustar archive the engine\'s `verify` accepts once unpacked' },
      headers: { 'Content-Length': 'the archive\'s length in bytes', 'Content-Disposition': '`attachment; filename="<project>-<snapshot_id>.tar"`' },
    },
  },
  answerFlow: 'bytes',
  errors: [502, 503],
});

export const importArchive = route({
  method: 'POST',
  path: '/v0/projects/:id/import',
  tag: 'lifecycle',
  summary: 'Import a snapshot archive and restore it',
  description:
    'The body is a file `GET …/snapshots/{snapshot_id}/archive` answered (of any project). It becomes a snapshot of this project (label `import`), verified by the engine, ' +
    'then is restored as `POST …/restore` would: 409 `tenant_running` while the engine runs, the previous data directory kept under `replaced/`. ' +
    '400 for a body that is not such an archive, 409 `conflict` for one that fails verification, 413 past `SVCD_IMPORT_MAX_BYTES` (docs/lifecycle.md "Export and import").',
  access: 'session',
  params: project,
  body: { flow: 'bytes', media: { type: 'application/x-tar', description: 'the archive, as downloaded' } },
  answers: { 200: { description: 'restored; `snapshot` is the snapshot the archive became', json: importAnswerSchema } },
  errors: [409, 413, 502, 503],
});

/** In the order they are matched. */
export const routes = [wakeup, sleep, head, createSnapshot, listSnapshots, readSnapshot, deleteSnapshot, restore, listReplaced, discardReplaced, snapshotArchive, importArchive] as const;
