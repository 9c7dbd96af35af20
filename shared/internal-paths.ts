/**
 * The paths of the host agent's internal API (docs/architecture.md "The internal API"), named once
 * for both sides: the handlers call `internalPaths.x(values)` and the agent registers
 * `internalPaths.x(...)` with its route parameters (`:id`, `:name`, …, as `ROUTE_PARAMS` names them),
 * so a path cannot drift between the caller and the route that serves it. Web-standard only: the
 * handlers' bundle imports it.
 */

/** The prefix of every internal path. */
export const INTERNAL_PREFIX = '/internal/v1';

/** The lifecycle operations the handlers ask a project's agent for (`POST …/projects/{id}/{op}`). */
export type LifecycleOp = 'wakeup' | 'sleep' | 'reconcile' | 'head' | 'snapshots' | 'restore' | 'delete';

const project = (id: string) => `${INTERNAL_PREFIX}/projects/${id}`;

/** Every internal path, one function each. */
export const internalPaths = {
  /** `GET`: the agent's health (its id and pin check). */
  health: () => `${INTERNAL_PREFIX}/health`,
  /** `POST`: a revoked key is dropped from the agent's caches and its streams end. */
  keyInvalidate: (keyId: string) => `${INTERNAL_PREFIX}/keys/${keyId}/invalidate`,
  /** `PUT`, `GET`, `DELETE`: one `fs` blob. */
  blob: (projectId: string, name: string) => `${INTERNAL_PREFIX}/blobs/${projectId}/${name}`,
  /** `PATCH` (append), `DELETE`: the `fs` file of a resumable upload (docs/storage.md "Resumable uploads"). */
  upload: (projectId: string, uploadId: string) => `${INTERNAL_PREFIX}/uploads/${projectId}/${uploadId}`,
  /** `POST`: the resumable upload becomes its blob. */
  uploadFinish: (projectId: string, uploadId: string) => `${INTERNAL_PREFIX}/uploads/${projectId}/${uploadId}/finish`,
  /** `POST`: a lifecycle operation of the project (docs/lifecycle.md). */
  lifecycle: (projectId: string, op: LifecycleOp) => `${project(projectId)}/${op}`,
  /** `DELETE`: one snapshot of the project. */
  snapshot: (projectId: string, snapshotId: string) => `${project(projectId)}/snapshots/${snapshotId}`,
  /** `GET`: one snapshot as a tar archive (docs/lifecycle.md "Export and import"). */
  snapshotArchive: (projectId: string, snapshotId: string) => `${project(projectId)}/snapshots/${snapshotId}/archive`,
  /** `POST`: an archive imported and restored (`?state=&updated_at=&actor=`, body the tar). */
  importArchive: (projectId: string) => `${project(projectId)}/import`,
  /** `GET`: the project's previous data directories. */
  replaced: (projectId: string) => `${project(projectId)}/replaced`,
  /** `DELETE`: one previous data directory (its name already encoded for a path). */
  replacedDir: (projectId: string, name: string) => `${project(projectId)}/replaced/${name}`,
  /** `GET`: the project's engine log (`?tail=`, `&follow=1`). */
  projectLogs: (projectId: string) => `${project(projectId)}/logs`,
  /** `POST`: a function's environment (the console's preview). */
  functionEnv: (projectId: string) => `${project(projectId)}/function-env`,
  /** `PUT` (deploy), `DELETE`: one function. */
  function: (projectId: string, name: string) => `${project(projectId)}/functions/${name}`,
  /** `GET`: a function's log (`?tail=`). */
  functionLogs: (projectId: string, name: string) => `${project(projectId)}/functions/${name}/logs`,
  /** Any method: an invocation; what follows `/invoke` (a path and a query) is the function's. */
  functionInvoke: (projectId: string, name: string) => `${project(projectId)}/functions/${name}/invoke`,
  /** `POST`: a secret of the project changed. */
  functionSecretsChanged: (projectId: string) => `${project(projectId)}/function-secrets/changed`,
  /** `POST`: publish an event. */
  realtimePublish: (projectId: string) => `${project(projectId)}/realtime/publish`,
  /** `POST`: move the project to another agent (on its agent; docs/durability.md "Relocation"). */
  relocate: (projectId: string) => `${project(projectId)}/relocate`,
  /** `POST` (take a project's copy in), `DELETE` (drop a copy never committed): on the receiving agent. */
  receive: (projectId: string) => `${project(projectId)}/receive`,
  /** `GET`: the project's `fs` blobs as one tar (for the agent receiving it). */
  blobsArchive: (projectId: string) => `${project(projectId)}/blobs-archive`,
  /** `POST`: the project moved: forget its placement (on every live agent). */
  placementChanged: (projectId: string) => `${project(projectId)}/placement-changed`,
  /** `POST`: make sure the snapshot's off-machine copy is complete (a fork from another agent). */
  ship: (projectId: string, snapshotId: string) => `${project(projectId)}/snapshots/${snapshotId}/ship`,
  /** `POST`: move every project of this agent away (an NDJSON stream of progress). */
  drain: () => `${INTERNAL_PREFIX}/drain`,
  /** `POST`: declare another agent lost and bring its projects back elsewhere (an NDJSON stream). */
  agentLost: (agentId: string) => `${INTERNAL_PREFIX}/agents/${agentId}/lost`,
  /** `GET`: subscribe (`?channel=…[&key_id=…]`), an event stream. */
  realtimeSubscribe: (projectId: string) => `${project(projectId)}/realtime/subscribe`,
} as const;

/** The route parameters the agent's router registers the paths with. */
export const ROUTE_PARAMS = {
  id: ':id',
  keyId: ':key_id',
  project: ':project',
  name: ':name',
  upload: ':upload',
  snapshotId: ':snapshot_id',
  agentId: ':agent_id',
} as const;

/**
 * A matcher of a path with parameters for the agent's raw (node:http) routes: `internalPaths.x`
 * with each parameter as one path segment, captured in order. `open` lets the path go on (a `/` or a
 * `?` after it), else it must end there.
 */
export function internalPathPattern(path: string, open = false): RegExp {
  const escaped = path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/:[a-z_]+/g, '([^/?]+)');
  return new RegExp(`^${escaped}${open ? '(?=[/?]|$)' : '$'}`);
}
