/**
 * Which blob store serves a project's bytes: `s3` from settings, `fs` on the project's host agent
 * (docs/storage.md "The `s3` backend"), and the deletion of blobs nothing references any more.
 */
import { BlobAgentUnreachableError, agentBlobStore } from '../../../shared/blobs/agent.ts';
import type { BlobBackend, BlobStore } from '../../../shared/blobs/store.ts';
import type { ProjectRecord } from '../../../shared/db/projects.ts';
import { ServiceError, errors } from '../../../shared/errors.ts';
import type { Deps } from '../../context.ts';
import { agentFor, rememberedAgent } from '../placement.ts';

/** The store holding a row's bytes: `s3` from settings, `fs` on the project's host agent. */
export async function storeFor(deps: Deps, requestId: string, project: ProjectRecord, backend: BlobBackend): Promise<BlobStore> {
  if (backend === 's3') return deps.s3Blobs();
  // A record of the agent read in the last seconds will do (handlers/domain/placement.ts): the byte
  // routes then make one DynamoDB round trip less.
  const agent = await storageAgent(deps, project, true);
  const first = forgetting(deps, agentBlobStore(deps.agents, agent, requestId));
  // When the agent could not be reached, read its record again before answering: if it now
  // registers another address, try that once. Not for a PUT: its body may be partly sent already.
  const again = async <T>(call: (store: BlobStore) => Promise<T>): Promise<T> => {
    try {
      return await call(first);
    } catch (err) {
      if (!(err instanceof BlobAgentUnreachableError)) throw err;
      const fresh = await storageAgent(deps, project, false);
      if (fresh.internal_url === agent.internal_url) {
        // Still registered where it did not answer: remember nothing of it (the re-read did).
        deps.placement.forgetAgent(agent.agent_id);
        throw err;
      }
      return call(forgetting(deps, agentBlobStore(deps.agents, fresh, requestId)));
    }
  };
  return {
    backend: 'fs',
    put: (projectId, name, input) => first.put(projectId, name, input),
    get: (projectId, name, range, signal) => again((store) => store.get(projectId, name, range, signal)),
    delete: (projectId, name) => again((store) => store.delete(projectId, name)),
  };
}

/**
 * `store`, forgetting what this isolate remembers of its agent when the agent cannot be reached
 * (docs/architecture.md: the placement cache is the domain's; the adapter only reports).
 */
function forgetting(deps: Deps, store: BlobStore): BlobStore {
  const guard = async <T>(call: Promise<T>): Promise<T> => {
    try {
      return await call;
    } catch (err) {
      if (err instanceof BlobAgentUnreachableError) deps.placement.forgetAgent(err.agentId);
      throw err;
    }
  };
  return {
    backend: store.backend,
    put: (projectId, name, input) => guard(store.put(projectId, name, input)),
    get: (projectId, name, range, signal) => guard(store.get(projectId, name, range, signal)),
    delete: (projectId, name) => guard(store.delete(projectId, name)),
  };
}

/**
 * The store a PUT for `projectId` can write to before the project is read: `s3` always, `fs` when
 * this isolate remembers the project's live agent (handlers/domain/placement.ts), else null.
 */
export function earlyStore(
  deps: Deps,
  requestId: string,
  projectId: string,
  backend: BlobBackend,
): { store: BlobStore; agentId: string | null } | null {
  if (backend === 's3') return { store: deps.s3Blobs(), agentId: null };
  const agent = rememberedAgent(deps, projectId);
  if (!agent) return null;
  return { store: forgetting(deps, agentBlobStore(deps.agents, agent, requestId)), agentId: agent.agent_id };
}

/** The project's live agent as the `fs` store: its absence is the storage upstream's (contract error list). */
async function storageAgent(deps: Deps, project: ProjectRecord, reuse: boolean) {
  try {
    return await agentFor(deps, project, undefined, { reuse });
  } catch (err) {
    if (err instanceof ServiceError && err.code === 'orchestrator_unavailable') throw errors.upstream(err.message);
    throw err;
  }
}

/**
 * Deletes a blob that nothing references any more; a failure leaves it unreferenced, and is logged
 * with what becomes of it: it is swept at the project's agent's next start (an S3 one when the
 * deployment's backend is `s3`)
 * (docs/storage.md "Nothing lost").
 */
export async function discardBlob(
  deps: Deps,
  requestId: string,
  project: ProjectRecord,
  backend: BlobBackend,
  name: string,
  store?: BlobStore,
): Promise<void> {
  try {
    await (store ?? (await storeFor(deps, requestId, project, backend))).delete(project.id, name);
  } catch (err) {
    const fate = 'it will be swept at the next agent start';
    deps.log(`storage: request ${requestId}: ${backend} blob ${project.id}/${name}: blob removal failed; ${fate} (${(err as Error).message})`);
  }
}
