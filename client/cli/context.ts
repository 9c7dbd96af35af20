/**
 * What every command is given (docs/cli.md "Credentials"): the output, the environment, the chosen
 * profile, and clients of the SDK built from them. `SVC_BASE_URL` and `SVC_TOKEN` override the
 * profile; a stored session that expired is renewed from the stored account secret, or the user is
 * told to log in again.
 */
import { ID_PATTERNS } from '../../shared/ids.ts';
import { createClient, type SvcClient } from '../client.ts';
import { SvcError } from '../errors.ts';
import { configDir, configPath, DEFAULT_PROFILE, loadConfig, updateProfile, type Profile } from './config.ts';
import { CliError, UsageError, type FailureContext } from './errors.ts';
import type { Output } from './output.ts';
import { findLink, projectByName, projectRefArg, type ProjectLink } from './project-ref.ts';

/** The service `npm start` serves, used when nothing else names one. */
export const DEFAULT_BASE_URL = 'http://127.0.0.1:8787';
/** A session this close to its expiry is renewed before use. */
const RENEW_MARGIN_MS = 60_000;
/** The label of the project keys the CLI issues for `svc sql`. */
export const CLI_KEY_LABEL = 'svc cli';

/** The standard streams the CLI reads and writes. */
export interface Io {
  stdin: NodeJS.ReadableStream & { isTTY?: boolean; setRawMode?: (mode: boolean) => unknown };
  stdout: NodeJS.WritableStream & { isTTY?: boolean };
  stderr: NodeJS.WritableStream & { isTTY?: boolean };
}

/** The context of one CLI run. */
export class Cli {
  readonly out: Output;
  readonly env: NodeJS.ProcessEnv;
  readonly io: Io;
  readonly profileName: string;
  readonly dir: string;
  /** The working directory, where a link is looked for (`svc link`). */
  readonly cwd: string;
  /** `--project`, else `SVC_PROJECT`: the project of commands given none. */
  readonly projectOption: string | undefined;
  /** What the failing command was about, filled in as commands learn it. */
  readonly failure: FailureContext = {};
  #renewed: SvcClient | undefined;

  constructor(options: { out: Output; env: NodeJS.ProcessEnv; io: Io; profile?: string | undefined; project?: string | undefined; cwd?: string }) {
    this.out = options.out;
    this.env = options.env;
    this.io = options.io;
    this.profileName = options.profile ?? options.env.SVC_PROFILE ?? DEFAULT_PROFILE;
    this.dir = configDir(options.env);
    this.cwd = options.cwd ?? process.cwd();
    this.projectOption = options.project ?? (options.env.SVC_PROJECT || undefined);
  }

  /** The directory's link (`svc link`), if any. */
  link(): { file: string; link: ProjectLink } | null {
    return findLink(this.cwd);
  }

  /**
   * The id of the project a command is about (docs/cli.md "Projects by name, and linked
   * directories"): `ref` (an id, or a name looked up with the session), else `--project` or
   * `SVC_PROJECT`, else the directory's link. Nothing given and nothing linked is a usage mistake.
   */
  async resolveProject(ref: string | undefined): Promise<string> {
    const given = ref ?? this.projectOption;
    let id: string;
    if (given !== undefined) {
      const checked = projectRefArg(given);
      id = ID_PATTERNS.prj.test(checked) ? checked : await this.withSession((c) => projectByName(c, checked));
    } else {
      const found = this.link();
      if (!found) throw new UsageError('no project given: pass PROJECT (a name or an id) or --project, or link this directory with `svc link PROJECT`');
      const base = this.baseUrl();
      if (found.link.base_url && found.link.base_url !== base) {
        throw new CliError(`${found.file} links ${found.link.project_id} on ${found.link.base_url}, not on ${base}`, 'pass PROJECT, or run `svc link PROJECT` again for this service');
      }
      id = found.link.project_id;
    }
    this.failure.project = id;
    return id;
  }

  /** Where the profiles live. */
  get configFile(): string {
    return configPath(this.dir);
  }

  /** The chosen profile, if stored. */
  profile(): Profile | undefined {
    return loadConfig(this.dir).profiles[this.profileName];
  }

  /** The base URL: `SVC_BASE_URL`, the profile's, or the local stack's. */
  baseUrl(explicit?: string): string {
    const url = explicit ?? this.env.SVC_BASE_URL ?? this.profile()?.base_url ?? DEFAULT_BASE_URL;
    this.failure.baseUrl = url;
    return url;
  }

  /** Client options every client shares. */
  #common(): { timeoutMs?: number } {
    const raw = this.env.SVC_TIMEOUT_MS;
    if (raw === undefined || raw === '') return {};
    if (!/^\d{1,9}$/.test(raw)) throw new UsageError(`SVC_TIMEOUT_MS must be a whole number of milliseconds, 0 for none (got ${JSON.stringify(raw)})`);
    return { timeoutMs: Number(raw) };
  }

  /** A client without credentials (signup, login, health). */
  anonymous(explicitBase?: string): SvcClient {
    return createClient({ baseUrl: this.baseUrl(explicitBase), ...this.#common() });
  }

  /** A client with the session: `SVC_TOKEN`, else the profile's (renewed when it expired). */
  async session(): Promise<SvcClient> {
    const baseUrl = this.baseUrl();
    if (this.env.SVC_TOKEN) return createClient({ baseUrl, token: this.env.SVC_TOKEN, ...this.#common() });
    if (this.#renewed) return this.#renewed;
    const profile = this.profile();
    if (!profile?.token) {
      throw new CliError(`not logged in (profile "${this.profileName}")`, 'run `svc signup` or `svc login`, or set SVC_TOKEN');
    }
    const expires = Date.parse(profile.expires_at ?? '');
    if (!Number.isNaN(expires) && expires - RENEW_MARGIN_MS <= Date.now()) return this.#renew(profile);
    return createClient({ baseUrl, token: profile.token, ...this.#common() });
  }

  /**
   * Runs `work` with the session client; a stored session the service refuses (401) is renewed
   * once from the account secret and `work` runs again.
   */
  async withSession<T>(work: (client: SvcClient) => Promise<T>): Promise<T> {
    const client = await this.session();
    try {
      return await work(client);
    } catch (err) {
      const stored = !this.env.SVC_TOKEN && !this.#renewed;
      if (!(err instanceof SvcError && err.status === 401 && stored)) throw err;
      const profile = this.profile();
      if (!profile) throw err;
      return work(await this.#renew(profile));
    }
  }

  async #renew(profile: Profile): Promise<SvcClient> {
    if (!profile.account_id || !profile.account_secret) {
      throw new CliError(
        `your session expired${profile.expires_at ? ` at ${profile.expires_at}` : ''} and no account secret is stored to renew it`,
        'run `svc login`',
      );
    }
    const baseUrl = this.baseUrl();
    const session = await createClient({ baseUrl, ...this.#common() }).createSession({
      account_id: profile.account_id,
      account_secret: profile.account_secret,
    });
    updateProfile(this.dir, this.profileName, (p) => (p ? { ...p, token: session.token, expires_at: session.expires_at } : null));
    this.out.note(this.out.ce.dim(`renewed the session of ${profile.account_id} (until ${session.expires_at})`));
    this.#renewed = createClient({ baseUrl, token: session.token, ...this.#common() });
    return this.#renewed;
  }

  /**
   * A data-plane client of `projectId`: `SVC_KEY`, else the key the CLI issued itself for that
   * project earlier (stored in the profile), else a new one issued now (label `svc cli`) and stored.
   * `fresh` drops a stored key first (it was refused).
   */
  async dataClient(projectId: string, { fresh = false } = {}): Promise<{ client: SvcClient; minted: boolean; fromEnv: boolean }> {
    const baseUrl = this.baseUrl();
    this.failure.usedKey = true;
    if (this.env.SVC_KEY) return { client: createClient({ baseUrl, key: this.env.SVC_KEY, ...this.#common() }), minted: false, fromEnv: true };
    const stored = fresh ? undefined : this.profile()?.keys?.[projectId];
    if (stored) return { client: createClient({ baseUrl, key: stored, ...this.#common() }), minted: false, fromEnv: false };
    if (!this.profile()) {
      // Nowhere to keep a key: issuing one per command would pile keys up.
      throw new CliError(`no project key for ${projectId}`, `set SVC_KEY (issue one with \`svc keys create ${projectId}\`), or log in so the CLI can keep one`);
    }
    const issued = await this.withSession((c) => c.project(projectId).keys.create({ label: CLI_KEY_LABEL }));
    updateProfile(this.dir, this.profileName, (p) => (p ? { ...p, keys: { ...p.keys, [projectId]: issued.key } } : null));
    this.out.note(this.out.ce.dim(`issued project key ${issued.key_id} (label "${CLI_KEY_LABEL}") for ${projectId}; stored in ${this.configFile}`));
    return { client: createClient({ baseUrl, key: issued.key, ...this.#common() }), minted: true, fromEnv: false };
  }
}
