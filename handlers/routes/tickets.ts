/** Routes: upload and download tickets (the interface contract "POST storage/uploads|downloads"). */
import { downloadTicketRequestSchema, uploadTicketRequestSchema } from '../../shared/schemas/storage.ts';
import { requireOwnedProject } from '../auth.ts';
import type { Routes } from '../context.ts';
import { downloadTicket, uploadTicket } from '../domain/objects/tickets.ts';
import { json, readJson } from '../http.ts';

/** Registers the ticket routes. */
export function register(router: Routes): void {
  router.post('/v0/projects/:id/storage/uploads', async (request, ctx) => {
    const { project } = await requireOwnedProject(request, ctx);
    const body = await readJson(request, uploadTicketRequestSchema, ctx.deps.settings.SVCD_JSON_MAX_BYTES);
    return json(await uploadTicket(ctx.deps, project, { bucket: body.bucket, key: body.key, contentType: body.content_type }), 201);
  });

  router.post('/v0/projects/:id/storage/downloads', async (request, ctx) => {
    const { project } = await requireOwnedProject(request, ctx);
    const body = await readJson(request, downloadTicketRequestSchema, ctx.deps.settings.SVCD_JSON_MAX_BYTES);
    return json(await downloadTicket(ctx.deps, project, { bucket: body.bucket, key: body.key, signed: body.signed, expiresIn: body.expires_in }));
  });
}
