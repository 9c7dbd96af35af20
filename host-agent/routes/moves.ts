/**
 * Internal routes of the moves (docs/durability.md): relocation on the project's agent, the
 * receiving side on the target, the `fs` blobs of a project as one tar, the shipping a fork from
 * another agent needs, and the operator's drain and agent-loss commands (`bin/svc-agent drain`,
 * `bin/svc-agent lost AGENT`), which answer their progress as NDJSON lines.
 *
 *   POST   /internal/v1/projects/{id}/relocate              {target_agent?, actor, request_id} → Relocated
 *   POST   /internal/v1/projects/{id}/receive               {reason, snapshot_id, from_project?, blobs_from?} → Received
 *   DELETE /internal/v1/projects/{id}/receive                                                  → {discarded}
 *   POST   /internal/v1/projects/{id}/placement-changed                                        → {forgotten}
 *   GET    /internal/v1/projects/{id}/blobs-archive                                            → tar, or 204
 *   POST   /internal/v1/projects/{id}/snapshots/{snapshot_id}/ship                             → Offsite
 *   POST   /internal/v1/drain            (DELETE: take projects again)                         → NDJSON progress
 *   POST   /internal/v1/agents/{agent_id}/lost                                                 → NDJSON progress
 */
import { existsSync } from 'node:fs';
import { Readable } from 'node:stream';
import * as tar from 'tar';
import { getSnapshot } from '../../shared/db/snapshots.ts';
import { errors } from '../../shared/errors.ts';
import { json, pathParam, readJson } from '../../shared/http/body.ts';
import { ID_PATTERNS } from '../../shared/ids.ts';
import { internalPaths, ROUTE_PARAMS } from '../../shared/internal-paths.ts';
import { receiveOrderSchema, relocateOrderSchema } from '../../shared/schemas/moves.ts';
import { projectIdSchema } from '../../shared/schemas/projects.ts';
import { snapshotIdSchema } from '../../shared/schemas/snapshots.ts';
import { z } from 'zod';
import type { AgentContext } from '../context.ts';
import type { InternalRouter } from '../internal-api.ts';
import { drainAgent, undrainAgent } from '../moves/drain.ts';
import type { Progress } from '../moves/hand-over.ts';
import { declareLost } from '../moves/lost.ts';
import { discardReceived, receiveProject } from '../moves/receive.ts';
import { relocateProject } from '../moves/relocate.ts';

type Routed = Request & { params: Record<string, string> };

const agentIdSchema = z.string().regex(ID_PATTERNS.agt, 'an agent id: agt_ + 16 hex');

/** Registers the routes. */
export function register(router: InternalRouter): void {
  const projectOf = (request: Request) => pathParam((request as Routed).params.id, 'id', projectIdSchema);

  router.post(internalPaths.relocate(ROUTE_PARAMS.id), async (request, ctx) => {
    const projectId = projectOf(request);
    const order = await readJson(request, relocateOrderSchema, ctx.settings.SVCD_JSON_MAX_BYTES);
    return json(await relocateProject(ctx, projectId, order));
  });

  router.post(internalPaths.receive(ROUTE_PARAMS.id), async (request, ctx) => {
    const projectId = projectOf(request);
    const order = await readJson(request, receiveOrderSchema, ctx.settings.SVCD_JSON_MAX_BYTES);
    return json(await receiveProject(ctx, projectId, order));
  });

  router.delete(internalPaths.receive(ROUTE_PARAMS.id), async (request, ctx) => {
    await discardReceived(ctx, projectOf(request));
    return json({ discarded: true });
  });

  router.post(internalPaths.placementChanged(ROUTE_PARAMS.id), (request, ctx) => {
    ctx.keyCache.forgetPlacement(projectOf(request));
    return json({ forgotten: true });
  });

  router.get(internalPaths.blobsArchive(ROUTE_PARAMS.id), (request, ctx) => blobsArchive(ctx, projectOf(request)));

  router.post(internalPaths.ship(ROUTE_PARAMS.id, ROUTE_PARAMS.snapshotId), async (request, ctx) => {
    const projectId = projectOf(request);
    const snapshotId = pathParam((request as Routed).params.snapshot_id, 'snapshot_id', snapshotIdSchema);
    if (!(await getSnapshot(ctx.db, projectId, snapshotId))) throw errors.notFound(`snapshot ${snapshotId} not found`);
    return json(await ctx.backups.ship(projectId, snapshotId));
  });

  router.post(internalPaths.drain(), (_request, ctx) => progressStream((report) => drainAgent(ctx, report)));
  router.delete(internalPaths.drain(), async (_request, ctx) => {
    await undrainAgent(ctx);
    return json({ agent_id: ctx.agentId, status: 'live' });
  });

  router.post(internalPaths.agentLost(ROUTE_PARAMS.agentId), (request, ctx) => {
    const agentId = pathParam((request as Routed).params.agent_id, 'agent_id', agentIdSchema);
    return progressStream((report) => declareLost(ctx, agentId, report), true);
  });
}

/** The project's `fs` blobs (`blobs/<p>/`) as one uncompressed tar; 204 when it has none here. */
function blobsArchive(ctx: AgentContext, projectId: string): Response {
  if (!existsSync(`${ctx.blobs.root}/${projectId}`)) return new Response(null, { status: 204 });
  const packed = tar.c({ cwd: ctx.blobs.root, portable: true }, [projectId]);
  // node-tar's stream is a minipass stream: adapted through its async iterator.
  return new Response(Readable.toWeb(Readable.from(packed)) as ReadableStream<Uint8Array>, { headers: { 'content-type': 'application/x-tar' } });
}

/**
 * Runs `work`, answering each progress line as one NDJSON line as it comes (a long drain keeps its
 * connection busy, so no idle timeout cuts it). With `checkFirst`, a refusal before the first line
 * is answered as the error envelope it is (an agent that is not lost is 409, not a stream).
 */
async function progressStream(work: (report: (line: Progress) => void) => Promise<Progress>, checkFirst = false): Promise<Response> {
  const encoder = new TextEncoder();
  let push!: (line: Progress | { event: 'error'; error: string }) => void;
  let end!: () => void;
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      push = (line) => controller.enqueue(encoder.encode(`${JSON.stringify(line)}\n`));
      end = () => controller.close();
    },
  });
  let first!: () => void;
  const started = new Promise<void>((resolve) => (first = resolve));
  const running = work((line) => {
    first();
    push(line);
  });
  if (checkFirst) await Promise.race([started, running]);
  running.then(
    () => end(),
    (err: Error) => {
      push({ event: 'error', error: err.message });
      end();
    },
  );
  return new Response(body, { headers: { 'content-type': 'application/x-ndjson' } });
}
