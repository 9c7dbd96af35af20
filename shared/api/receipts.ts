/** Declarations: receipts, newest first (docs/storage.md; docs/lifecycle.md "Deleting a project"). */
import { pageQuerySchema } from '../schemas/pagination.ts';
import { accountReceiptsQuerySchema } from '../schemas/project-delete.ts';
import { receiptListSchema } from '../schemas/receipts.ts';
import { project } from './projects.ts';
import { route } from './route.ts';

export const ofProject = route({
  method: 'GET',
  path: '/v0/projects/:id/receipts',
  tag: 'receipts',
  summary: 'List receipts, newest first',
  access: 'session',
  params: project,
  query: pageQuerySchema,
  answers: { 200: { description: 'a page of receipts', json: receiptListSchema } },
});

export const ofAccount = route({
  method: 'GET',
  path: '/v0/receipts',
  tag: 'receipts',
  summary: 'Receipts of one of your projects, also once it is deleted',
  description:
    'Newest first; `project` names a project of yours, live or deleted less than `SVCD_DELETED_RECEIPTS_RETENTION_DAYS` ago (docs/lifecycle.md "Deleting a project"); any other is 404.',
  access: 'session',
  query: accountReceiptsQuerySchema,
  answers: { 200: { description: 'a page of receipts', json: receiptListSchema } },
  errors: [404],
});

/** In the order they are matched. */
export const routes = [ofProject, ofAccount] as const;
