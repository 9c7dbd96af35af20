import { beforeAll, describe, expect, it } from 'vitest';
import { readSessionToken, type SessionClaims } from '../../shared/auth.ts';
import { ServiceError } from '../../shared/errors.ts';
import type { Deps } from '../context.ts';
import { domainDeps } from '../../test/helpers/domain-deps.ts';
import { openSession, rotateSecret, signOut, signUp } from './accounts.ts';
import { createProject } from './projects.ts';
import { confirmSession, ownedProjectOf } from './sessions.ts';

let deps: Deps;
let requests: string[];

beforeAll(async () => {
  ({ deps } = await domainDeps());
  // Every DynamoDB request the domain sends, by command name: what a session check costs.
  requests = [];
  const wire = deps.db.wire;
  deps.db.wire = (operation, input) => {
    requests.push(operation);
    return wire(operation, input);
  };
  const send = deps.db.doc.send.bind(deps.db.doc);
  deps.db.doc.send = ((command: { constructor: { name: string } }, ...rest: unknown[]) => {
    requests.push(command.constructor.name);
    return (send as (...args: unknown[]) => unknown)(command, ...rest);
  }) as typeof deps.db.doc.send;
});

async function claimsOf(token: string): Promise<SessionClaims> {
  return readSessionToken(deps.settings.SVCD_SESSION_SECRET, token);
}

async function refusal(p: Promise<unknown>): Promise<string> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ServiceError);
  return (err as ServiceError).code;
}

describe('a session check', () => {
  it('costs one DynamoDB request, the caller\'s project included', async () => {
    const { token, account_id } = await signUp(deps, {});
    const { id } = await createProject(deps, { owner: account_id, name: 'p' });
    const claims = await claimsOf(token);
    requests.length = 0;
    await confirmSession(deps, claims);
    expect(requests).toEqual(['BatchGetItem']);
    requests.length = 0;
    expect((await ownedProjectOf(deps, claims, id)).owner).toBe(account_id);
    expect(requests).toEqual(['BatchGetItem']);
  });

  it('refuses a signed-out session, and only that one', async () => {
    const up = await signUp(deps, {});
    const other = await openSession(deps, { accountId: up.account_id, accountSecret: up.account_secret });
    const session = await confirmSession(deps, await claimsOf(up.token));
    await signOut(deps, session);
    expect(await refusal(confirmSession(deps, await claimsOf(up.token)))).toBe('authentication_required');
    await expect(confirmSession(deps, await claimsOf(other.token))).resolves.toBeDefined();
  });

  it('refuses every session of a generation before the account\'s', async () => {
    const up = await signUp(deps, {});
    const session = await confirmSession(deps, await claimsOf(up.token));
    const rotated = await rotateSecret(deps, { session, currentSecret: up.account_secret });
    expect(await refusal(confirmSession(deps, await claimsOf(up.token)))).toBe('authentication_required');
    expect((await confirmSession(deps, await claimsOf(rotated.token))).account.session_generation).toBe(1);
  });

  it('refuses a well-signed session of an account that does not exist', async () => {
    const up = await signUp(deps, {});
    const claims = { ...(await claimsOf(up.token)), accountId: 'acct_00000000000000ff' };
    expect(await refusal(confirmSession(deps, claims))).toBe('authentication_required');
  });

  it('judges the session before the project: an ended session learns nothing of ownership', async () => {
    const owner = await signUp(deps, {});
    const stranger = await signUp(deps, {});
    const { id } = await createProject(deps, { owner: owner.account_id, name: 'p' });
    expect(await refusal(ownedProjectOf(deps, await claimsOf(stranger.token), id))).toBe('not_found');
    expect(await refusal(ownedProjectOf(deps, await claimsOf(stranger.token), 'prj_00000000000000ff'))).toBe('not_found');
    await signOut(deps, await confirmSession(deps, await claimsOf(stranger.token)));
    expect(await refusal(ownedProjectOf(deps, await claimsOf(stranger.token), id))).toBe('authentication_required');
  });
});
