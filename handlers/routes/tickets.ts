/** Routes: upload and download tickets (the interface contract "POST storage/uploads|downloads"; declared in shared/api/storage.ts). */
import { storage } from '../../shared/api/index.ts';
import { requireOwnedProject } from '../auth.ts';
import { downloadTicket, uploadTicket } from '../domain/objects/tickets.ts';
import { json } from '../http.ts';
import { implement } from '../implement.ts';

export const implementations = [
  implement(storage.uploadTicket, requireOwnedProject, async ({ caller, body }, ctx) =>
    json(await uploadTicket(ctx.deps, caller.project, { bucket: body.bucket, key: body.key, contentType: body.content_type }), 201),
  ),

  implement(storage.downloadTicket, requireOwnedProject, async ({ caller, body }, ctx) =>
    json(await downloadTicket(ctx.deps, caller.project, { bucket: body.bucket, key: body.key, signed: body.signed, expiresIn: body.expires_in })),
  ),
];
