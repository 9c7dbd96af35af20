/**
 * Accounts and credentials (docs/cli.md "Credentials"): `signup`, `login`, `logout`, `whoami`,
 * `health`. Signup and login store a profile; the account secret is read from stdin or a prompt,
 * never from an argument.
 */
import type { Command } from 'commander';
import { SvcError } from '../../errors.ts';
import { updateProfile, type Profile } from '../config.ts';
import type { Cli } from '../context.ts';
import { CliError, UsageError } from '../errors.ts';
import { readLine, readSecret } from '../input.ts';
import type { Registry } from '../program.ts';

/** Registers the account commands. */
export function register(program: Command, r: Registry): void {
  signup(program, r);
  login(program, r);
  logout(program, r);
  whoami(program, r);
  health(program, r);
}

/** `svc signup`: a new account, its session stored in the profile. */
function signup(program: Command, r: Registry): void {
  program
    .command('signup')
    .description('create an account and store its session in a profile (the account secret is shown once)')
    .option('--name <name>', 'a name for the account')
    .option('--invite-code <code>', 'the invite code, on a deployment that needs one')
    .option('--base-url <url>', 'the service (default: $SVC_BASE_URL, the profile\'s, or http://127.0.0.1:8787)')
    .action(
      r.action(async (cli, options: { name?: string; inviteCode?: string; baseUrl?: string }) => {
        const client = cli.anonymous(options.baseUrl);
        const signed = await client.signup({
          ...(options.name !== undefined ? { name: options.name } : {}),
          ...(options.inviteCode !== undefined ? { invite_code: options.inviteCode } : {}),
        });
        const profile: Profile = {
          base_url: client.baseUrl,
          account_id: signed.account_id,
          account_secret: signed.account_secret,
          token: signed.token,
          expires_at: signed.expires_at,
        };
        updateProfile(cli.dir, cli.profileName, () => profile);
        cli.out.result({ ...signed, profile: cli.profileName, config: cli.configFile }, () => {
          const c = cli.out.c;
          cli.out.line(`${c.green('Signed up')} as ${c.bold(signed.account_id)} on ${client.baseUrl}`);
          cli.out.line(`account secret (shown once; stored in ${cli.configFile}): ${signed.account_secret}`);
          cli.out.line(`session valid until ${signed.expires_at} (profile "${cli.profileName}")`);
          cli.out.line(`next: ${c.bold('svc projects create "my app"')}`);
        });
      }),
    );
}

/** `svc login`: a session from an account id and its secret, stored in the profile. */
function login(program: Command, r: Registry): void {
  program
    .command('login')
    .description('open a session from an account id and its secret (read from stdin or a prompt) and store it')
    .option('--account-id <id>', 'the account id (default: the profile\'s, or a prompt)')
    .option('--base-url <url>', 'the service (default: $SVC_BASE_URL, the profile\'s, or http://127.0.0.1:8787)')
    .option('--force', 'open a new session even when the stored one is still valid')
    .action(
      r.action(async (cli, options: { accountId?: string; baseUrl?: string; force?: boolean }) => {
        const stored = cli.profile();
        const current = options.force ? null : await validSession(cli, stored, options);
        if (current) {
          cli.out.result({ account_id: current.account_id, expires_at: stored!.expires_at ?? null, profile: cli.profileName, config: cli.configFile, reused: true }, () => {
            cli.out.line(`Already logged in as ${cli.out.c.bold(current.account_id)} on ${stored!.base_url} until ${stored!.expires_at ?? '?'} (no new session opened; --force opens one)`);
          });
          return;
        }
        if (!options.accountId && !stored?.account_id && !cli.io.stdin.isTTY) {
          throw new UsageError('pass --account-id when the secret comes on stdin');
        }
        const accountId = options.accountId ?? stored?.account_id ?? (await readLine(cli.io, 'account id: ')).trim();
        if (!accountId) throw new UsageError('an account id is needed: --account-id acct_…');
        const secret = await readSecret(cli.io, 'account secret: ');
        if (!secret) throw new UsageError('the account secret is empty (pipe it on stdin, or type it at the prompt)');
        const client = cli.anonymous(options.baseUrl ?? stored?.base_url);
        const session = await client.createSession({ account_id: accountId, account_secret: secret });
        updateProfile(cli.dir, cli.profileName, (p) => ({
          ...(p ?? {}),
          base_url: client.baseUrl,
          account_id: accountId,
          account_secret: secret,
          token: session.token,
          expires_at: session.expires_at,
          // Keys belong to the account's projects: another account's are of no use here.
          ...(p?.account_id && p.account_id !== accountId ? { keys: {} } : {}),
        }));
        cli.out.result({ account_id: accountId, expires_at: session.expires_at, profile: cli.profileName, config: cli.configFile }, () => {
          cli.out.line(`${cli.out.c.green('Logged in')} as ${cli.out.c.bold(accountId)} on ${client.baseUrl} until ${session.expires_at}`);
        });
      }),
    );
}

/** `svc logout`: ends the session and forgets the profile. */
function logout(program: Command, r: Registry): void {
  program
    .command('logout')
    .description('revoke the project keys the CLI issued, end the session on the service and forget the profile')
    .action(
      r.action(async (cli) => {
        const had = cli.profile();
        // The project keys the CLI issued itself are revoked first (they outlive any session), then
        // the session ends on the service, so neither is worth anything if it was copied. A key or
        // session that already ended, or a service that cannot be reached, does not stop the logout;
        // a key that could not be revoked is named.
        const revoked = had && !cli.env.SVC_TOKEN ? await revokeCliKeys(cli, had) : { revoked: [], failed: [] };
        if (had?.token && !cli.env.SVC_TOKEN) {
          await cli.anonymous().withCredentials({ token: had.token }).endSession().catch(() => {});
        }
        updateProfile(cli.dir, cli.profileName, () => null);
        cli.out.result({ profile: cli.profileName, removed: !!had, revoked_keys: revoked.revoked, unrevoked_keys: revoked.failed }, () => {
          for (const k of revoked.revoked) cli.out.note(cli.out.ce.dim(`revoked project key ${k.key_id} of ${k.project} (issued by the CLI)`));
          for (const k of revoked.failed) cli.out.note(cli.out.ce.yellow(`could not revoke project key ${k.key_id} of ${k.project} (${k.reason}): revoke it with \`svc keys revoke ${k.project} ${k.key_id}\``));
          cli.out.line(had ? `Logged out: profile "${cli.profileName}" removed from ${cli.configFile}` : `No profile "${cli.profileName}" to remove`);
        });
      }),
    );
}

/** The stored session when it is for the same account and service and the service still takes it; else null. */
async function validSession(cli: Cli, stored: Profile | undefined, options: { accountId?: string; baseUrl?: string }): Promise<{ account_id: string } | null> {
  if (!stored?.token || !stored.account_id || cli.env.SVC_TOKEN) return null;
  if (options.accountId && options.accountId !== stored.account_id) return null;
  if (cli.baseUrl(options.baseUrl ?? stored.base_url) !== stored.base_url) return null;
  const expires = Date.parse(stored.expires_at ?? '');
  if (Number.isNaN(expires) || expires - 60_000 <= Date.now()) return null;
  try {
    return await cli.anonymous(stored.base_url).withCredentials({ token: stored.token }).me();
  } catch (err) {
    if (err instanceof SvcError && err.status === 401) return null;
    throw err;
  }
}

/** Revokes the project keys the CLI issued for itself (`keys` of the profile; a key carries its id: `svc1_<key_id>_…`). */
async function revokeCliKeys(cli: Cli, profile: Profile): Promise<{ revoked: { project: string; key_id: string }[]; failed: { project: string; key_id: string; reason: string }[] }> {
  const revoked: { project: string; key_id: string }[] = [];
  const failed: { project: string; key_id: string; reason: string }[] = [];
  for (const [project, key] of Object.entries(profile.keys ?? {})) {
    const keyId = /^svc1_([0-9a-f]{32})_/.exec(key)?.[1];
    if (!keyId) continue;
    try {
      await cli.withSession((c) => c.project(project).keys.revoke(keyId));
      revoked.push({ project, key_id: keyId });
    } catch (err) {
      // Gone already (the project was deleted): nothing left to revoke.
      if (err instanceof SvcError && err.status === 404) continue;
      failed.push({ project, key_id: keyId, reason: err instanceof SvcError ? err.code : err instanceof Error ? err.message : String(err) });
    }
  }
  return { revoked, failed };
}

/** `svc whoami`: the account of the session and the profile in use. */
function whoami(program: Command, r: Registry): void {
  program
    .command('whoami')
    .description('the account of the session (GET /v0/me) and the profile in use')
    .action(
      r.action(async (cli) => {
        const p = cli.profile();
        if (!p && !cli.env.SVC_TOKEN) throw new CliError(`no profile "${cli.profileName}"`, 'run `svc signup` or `svc login`');
        const me = await cli.withSession((c) => c.me());
        const info = {
          profile: cli.profileName,
          base_url: cli.baseUrl(),
          account_id: me.account_id,
          name: me.name,
          project_count: me.project_count,
          session_expires_at: cli.env.SVC_TOKEN ? null : (cli.profile()?.expires_at ?? null),
          token_from: cli.env.SVC_TOKEN ? 'SVC_TOKEN' : 'profile',
          config: cli.configFile,
        };
        cli.out.result(info, () => cli.out.fields(info));
      }),
    );
}

/** `svc health`: whether the service can run tenants; exits 1 when degraded. */
function health(program: Command, r: Registry): void {
  program
    .command('health')
    .description('whether the service can run tenants (GET /v0/health); exits 1 when degraded')
    .action(
      r.action(async (cli) => {
        const health = await cli.anonymous().health();
        cli.out.result(health, () => {
          const c = cli.out.c;
          const agents = health.agents ? `agents live ${health.agents.live} of ${health.agents.total}` : 'agents unknown';
          cli.out.line(`${health.status === 'ok' ? c.green('ok') : c.red('degraded')}  ${agents}  (${health.time})`);
          if (health.status !== 'ok') cli.out.line(`${health.error.code}: ${health.error.message}`);
        });
        return health.status === 'ok' ? 0 : 1;
      }),
    );
}
