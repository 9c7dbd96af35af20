import { beforeAll, describe, expect, it } from 'vitest';
import { ServiceError } from '../../shared/errors.ts';
import { newId } from '../../shared/ids.ts';
import type { Deps } from '../context.ts';
import { domainDeps } from '../../test/helpers/domain-deps.ts';
import { deleteProjectSecret, projectSecret, putProjectSecret } from './secrets.ts';

let deps: Deps;

beforeAll(async () => {
  ({ deps } = await domainDeps());
});

const change = (projectId: string, requestId = 'req_0000000000000001') => ({ requestId, accountId: 'acct_0000000000000001', projectId, name: 'API_TOKEN' });

describe('secrets', () => {
  it('tell a new secret from a replaced one and never answer the value', async () => {
    const projectId = newId('prj');
    const first = await putProjectSecret(deps, { ...change(projectId), value: 'one' });
    const second = await putProjectSecret(deps, { ...change(projectId), value: 'two' });
    expect([first.created, second.created]).toEqual([true, false]);
    expect(second.secret.version).toBe(2);
    expect(JSON.stringify([first, second, await projectSecret(deps, projectId, 'API_TOKEN')])).not.toMatch(/"(one|two)"/);
  });

  it('are refused where no key ring is configured, before anything is stored', async () => {
    const projectId = newId('prj');
    const refused = await putProjectSecret({ ...deps, secrets: null }, { ...change(projectId), value: 'x' }).catch((e: unknown) => e);
    expect((refused as ServiceError).code).toBe('not_implemented');
    expect(((await projectSecret(deps, projectId, 'API_TOKEN').catch((e: unknown) => e)) as ServiceError).code).toBe('not_found');
  });

  it('are deleted once', async () => {
    const projectId = newId('prj');
    await putProjectSecret(deps, { ...change(projectId), value: 'v' });
    expect(await deleteProjectSecret(deps, change(projectId, 'req_0000000000000002'))).toMatchObject({ name: 'API_TOKEN' });
    const again = await deleteProjectSecret(deps, change(projectId, 'req_0000000000000003')).catch((e: unknown) => e);
    expect((again as ServiceError).code).toBe('not_found');
  });
});
