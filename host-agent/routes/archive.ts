/**
 * Internal routes of snapshot archives (docs/lifecycle.md "Export and import"):
 *
 *   GET  /internal/v1/projects/{id}/snapshots/{snapshot_id}/archive   → the tar, with its length
 *   POST /internal/v1/projects/{id}/import?state=&updated_at=&actor=  body = the tar → restore answer + snapshot
 *
 * The export streams this machine's backup directory, or the snapshot's off-machine copy when this
 * machine has none. The import's query carries the recorded state the handler read (the restore's
 * conditional state write, docs/lifecycle.md "Internal API") and who asked (for a receipt).
 */
import { existsSync } from 'node:fs';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { z } from 'zod';
import { getSnapshot } from '../../shared/db/snapshots.ts';
import { errorResponse, errors } from '../../shared/errors.ts';
import { newRequestId } from '../../shared/ids.ts';
import { internalPaths, ROUTE_PARAMS } from '../../shared/internal-paths.ts';
import { json, pathParam } from '../../shared/http/body.ts';
import { answerWhileDraining } from '../../shared/http/linger.ts';
import { nodeWrittenResponse } from '../../shared/http/node-http.ts';
import { projectIdSchema, projectStateSchema } from '../../shared/schemas/projects.ts';
import { snapshotIdSchema } from '../../shared/schemas/snapshots.ts';
import { parseOr400 } from '../../shared/validation.ts';
import { archiveLength, archiveStream, localFiles, storeFiles } from '../backups/archive.ts';
import { nodeBody } from '../backups/import.ts';
import { importArchive, refuseRunning } from '../backups/import-restore.ts';
import type { InternalRouter } from '../internal-api.ts';
import { restoreAnswer } from './answers.ts';

type Routed = Request & { params: Record<string, string> };

/** The import's query: the recorded state the handler read, and who asked. */
const importQuerySchema = z.strictObject({ state: projectStateSchema, updated_at: z.string().min(1), actor: z.string().min(1) });

/** Registers the archive routes. */
export function register(router: InternalRouter): void {
  const projectOf = (request: Request) => pathParam((request as Routed).params.id, 'id', projectIdSchema);

  router.get(internalPaths.snapshotArchive(ROUTE_PARAMS.id, ROUTE_PARAMS.snapshotId), async (request, ctx) => {
    const projectId = projectOf(request);
    const snapshotId = pathParam((request as Routed).params.snapshot_id, 'snapshot_id', snapshotIdSchema);
    const snapshot = await getSnapshot(ctx.db, projectId, snapshotId);
    if (!snapshot) throw errors.notFound(`snapshot ${snapshotId} not found`);
    const local = ctx.tenants.layout.backupDir(projectId, snapshotId);
    const files = existsSync(local) ? await localFiles(local) : ctx.backups.store ? await storeFiles(ctx.backups.store, projectId, snapshotId) : null;
    if (!files) throw errors.notFound(`snapshot ${snapshotId} has no backup directory on this host and no complete off-machine copy`);
    const headers = {
      'content-type': 'application/x-tar',
      'content-length': String(archiveLength(files)),
      'content-disposition': `attachment; filename="${projectId}-${snapshotId}.tar"`,
    };
    const archive = () => archiveStream(snapshotId, files, new Date(snapshot.created_at));
    // Written by the listener straight onto its response (a web stream in between costs most of
    // the throughput); the web stream is there for any other reader, made only when pulled.
    let web: ReadableStreamDefaultReader<Uint8Array> | undefined;
    const fallback = new ReadableStream<Uint8Array>(
      {
        async pull(controller) {
          const { done, value } = await (web ??= (Readable.toWeb(archive()) as ReadableStream<Uint8Array>).getReader()).read();
          if (done) controller.close();
          else controller.enqueue(value);
        },
        cancel: (reason) => web?.cancel(reason),
      },
      { highWaterMark: 0 },
    );
    return nodeWrittenResponse(200, headers, (res) => pipeline(archive(), res, { end: false }), fallback);
  });

  router.post(internalPaths.importArchive(ROUTE_PARAMS.id), async (request, ctx) => {
    try {
      const projectId = projectOf(request);
      const query = parseOr400(importQuerySchema, Object.fromEntries(new URL(request.url).searchParams), 'query');
      refuseRunning(ctx, projectId);
      const who = { actor: query.actor, requestId: request.headers.get('x-request-id') ?? newRequestId() };
      const { restored, snapshot } = await importArchive(ctx, projectId, { state: query.state, updated_at: query.updated_at }, nodeBody(request.body), who);
      return json({ ...restoreAnswer(restored), snapshot });
    } catch (err) {
      // Refused before the body ended: the rest is read and discarded while the answer goes out
      // (as the blob routes do), and the connection closed after it.
      const response = errorResponse(err, request.headers.get('x-request-id') ?? newRequestId(), ctx.log);
      response.headers.set('connection', 'close');
      return answerWhileDraining(response, request.body);
    }
  });
}
