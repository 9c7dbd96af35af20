/**
 * Function secrets (contract "PUT /v0/projects/{id}/functions/secrets/{name}"; docs/api.md). The
 * value is sealed before anything is stored and never appears in an answer, an error message, a
 * receipt or a log line: every answer here is metadata. Changes are receipted.
 */
import { deleteSecret, getSecret, listSecrets, putSecret, type SecretMetadata } from '../../shared/db/secrets.ts';
import { ServiceError, errors } from '../../shared/errors.ts';
import { sealSecret } from '../../shared/secrets-crypto.ts';
import { nowIso } from '../../shared/time.ts';
import type { Deps } from '../context.ts';
import { tellSecretsChanged } from './functions.ts';
import { pageOf, type AnsweredPage, type PageQuery } from './pages.ts';

/** Who changes which secret, for the receipt. */
export interface SecretChangeInput {
  requestId: string;
  accountId: string;
  projectId: string;
  name: string;
}

/** Seals and stores a secret's value; `created` tells a new secret from a replaced one. */
export async function putProjectSecret(deps: Deps, input: SecretChangeInput & { value: string }): Promise<{ secret: SecretMetadata; created: boolean }> {
  const ring = deps.secrets;
  if (!ring) throw new ServiceError('not_implemented', 'function secrets are not configured on this deployment (SVCD_SECRETS_KEYS)');
  const sealed = await sealSecret(ring, input.projectId, input.name, input.value);
  const put = await putSecret(deps.db, changeOf(deps, input), sealed);
  // Before answering: the next invocation after this answer sees the new set (docs/functions.md "Environment").
  await tellSecretsChanged(deps, input.requestId, input.projectId);
  return put;
}

/** One page of the project's secrets (metadata only). */
export function listProjectSecrets(deps: Deps, projectId: string, query: PageQuery): Promise<AnsweredPage<SecretMetadata>> {
  return pageOf(deps, ['secrets', projectId], query, (limit, after) => listSecrets(deps.db, projectId, limit, after));
}

/** One secret's metadata; 404 when the project has none by that name. */
export async function projectSecret(deps: Deps, projectId: string, name: string): Promise<SecretMetadata> {
  const secret = await getSecret(deps.db, projectId, name);
  if (!secret) throw errors.notFound(`secret ${name} not found`);
  return secret;
}

/** Deletes a secret; answers its metadata as it was. */
export async function deleteProjectSecret(deps: Deps, input: SecretChangeInput): Promise<SecretMetadata> {
  const deleted = await deleteSecret(deps.db, changeOf(deps, input));
  await tellSecretsChanged(deps, input.requestId, input.projectId);
  return deleted;
}

function changeOf(deps: Deps, input: SecretChangeInput) {
  return { project: input.projectId, name: input.name, actor: input.accountId, requestId: input.requestId, at: nowIso(deps.now()) };
}
