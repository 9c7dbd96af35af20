/**
 * The shapes of a project's deletion (docs/lifecycle.md "Deleting a project"): the internal call
 * the handler makes to the project's host agent, its answer, and the query of the account's
 * receipts, which outlive a deleted project. Web-standard only: the handlers bundle imports it.
 */
import { z } from 'zod';
import { internalDeletionSchema, recordedStateSchema } from './lifecycle.ts';
import { pageQuerySchema } from './pagination.ts';
import { projectIdSchema, type ProjectState } from './projects.ts';

/** Internal body of `POST /internal/v1/projects/{id}/delete`: the state the handler read, and who asks. */
export const internalProjectDeleteSchema = z.strictObject({ ...internalDeletionSchema.shape, recorded: recordedStateSchema });

/** The agent's answer to a deletion: the state the project was left in (its engine stopped) and when it went. */
export interface ProjectDeletedAnswer {
  state: ProjectState;
  deleted_at: string;
}

/** Query of `GET /v0/receipts`: the project (live, or deleted within the retention) and a page. */
export const accountReceiptsQuerySchema = z.strictObject({ ...pageQuerySchema.shape, project: projectIdSchema });
