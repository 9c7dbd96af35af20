/** Wire shapes of the moves between agents (docs/durability.md): internal calls only. */
import { z } from 'zod';
import { ID_PATTERNS } from '../ids.ts';

const agentId = z.string().regex(ID_PATTERNS.agt, 'an agent id: agt_ + 16 hex');
const snapshotId = z.string().regex(ID_PATTERNS.snap, 'a snapshot id: snap_ + 16 hex');
const projectId = z.string().regex(ID_PATTERNS.prj, 'a project id: prj_ + 16 hex');

/** Why an agent takes a project's copy in. */
export const receiveReasons = ['relocate', 'recover', 'fork'] as const;

/**
 * `POST …/receive`: the snapshot to restore (null: the project has no data directory), whose
 * project it belongs to (another project's for a fork), and the agent whose `fs` blobs to copy.
 */
export const receiveOrderSchema = z.strictObject({
  reason: z.enum(receiveReasons),
  snapshot_id: snapshotId.nullable(),
  from_project: projectId.optional(),
  blobs_from: agentId.nullable().optional(),
});
export type ReceiveOrder = z.infer<typeof receiveOrderSchema>;

/** What the receiving agent answers: the digest of the data directory it restored, and the blobs it copied. */
export interface Received {
  root_digest: string | null;
  blobs: number;
}

/** `POST …/relocate` on the project's agent: the target (any other live agent when absent), and who asked. */
export const relocateOrderSchema = z.strictObject({
  target_agent: agentId.nullable().optional(),
  actor: z.string().min(1),
  request_id: z.string().min(1),
});
export type RelocateOrder = z.infer<typeof relocateOrderSchema>;

/** What a relocation answers. */
export interface Relocated {
  project: string;
  from: string;
  to: string;
  snapshot_id: string | null;
  state: 'sleeping' | 'stopped' | 'running';
}
