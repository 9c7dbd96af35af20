/**
 * `createClient`: one method per route of the service (docs/interface.md, docs/api.md and the
 * area pages; docs/sdk.md lists them). Account-level routes sit on the client, project routes on
 * `client.project(id)`, the data plane (`sql`, `batch`, `search`) on the client with a project key.
 */
import { DataPlane, type SearchOptions } from './dataplane.ts';
import { FunctionsApi } from './functions.ts';
import { seg, Transport, type CallOptions, type ClientOptions } from './http.ts';
import { listPages, type Pages } from './pages.ts';
import { subscribe, type SubscribeOptions } from './realtime.ts';
import { sseFrames } from './sse.ts';
import type { InArgs, InStatement, ResultSet } from './results.ts';
import { StorageClient } from './storage.ts';
import type {
  Capabilities,
  CreateKeyInput,
  EngineLogs,
  Me,
  RealtimeTicket,
  RenameProjectInput,
  ReplacedDir,
  ReplacedPage,
  RotatedSecret,
  CreateProjectInput,
  CreateSnapshotInput,
  Head,
  Health,
  IssuedKey,
  KeyRecord,
  KeysPage,
  PageInput,
  Project,
  ProjectsPage,
  RealtimeEvent,
  Receipt,
  ReceiptsPage,
  Restored,
  SearchHit,
  SecretMetadata,
  SecretsPage,
  Session,
  SessionInput,
  SignedUp,
  SignupInput,
  Snapshot,
  SnapshotsPage,
} from './types.ts';

/** Creates a client of the service at `baseUrl`, with a session `token`, a project `key`, or both. */
export function createClient(options: ClientOptions): SvcClient {
  return new SvcClient(options);
}

/** A client of the service. Methods throw `SvcError` for every error answer. */
export class SvcClient {
  readonly #t: Transport;
  readonly #data: DataPlane;
  /** The account's projects. */
  readonly projects: ProjectsApi;

  constructor(options: ClientOptions) {
    this.#t = new Transport(options);
    this.#data = new DataPlane(this.#t);
    this.projects = new ProjectsApi(this.#t);
  }

  /** The base URL, without a trailing slash. */
  get baseUrl(): string {
    return this.#t.baseUrl;
  }

  /** A client like this one with other credentials (say the token signup answered). */
  withCredentials(credentials: { token?: string; key?: string }): SvcClient {
    return new SvcClient({ ...this.#t.options, ...credentials });
  }

  /** The routes of one project. */
  project(id: string): ProjectClient {
    return new ProjectClient(this.#t, id);
  }

  /** `GET /v0/health`: whether the service can run tenants (answers `degraded` rather than throwing). */
  health(call?: CallOptions): Promise<Health> {
    return this.#t.json({ method: 'GET', path: '/v0/health', auth: 'none', accept: [503] }, call);
  }

  /** `POST /v0/signup`: a new account; its secret is shown in this answer only. */
  signup(input: SignupInput = {}, call?: CallOptions): Promise<SignedUp> {
    return this.#t.json({ method: 'POST', path: '/v0/signup', json: input, auth: 'none' }, call);
  }

  /** `POST /v0/sessions`: a new session from the account id and secret. */
  createSession(input: SessionInput, call?: CallOptions): Promise<Session> {
    return this.#t.json({ method: 'POST', path: '/v0/sessions', json: input, auth: 'none' }, call);
  }

  /** `GET /v0/me`: the account of the session. */
  me(call?: CallOptions): Promise<Me> {
    return this.#t.json({ method: 'GET', path: '/v0/me', auth: 'session' }, call);
  }

  /** `DELETE /v0/sessions/current`: ends the client's session (the next call with it is 401). */
  async endSession(call?: CallOptions): Promise<void> {
    const { done } = await this.#t.send({ method: 'DELETE', path: '/v0/sessions/current', auth: 'session' }, call);
    done();
  }

  /**
   * `POST /v0/account/secret`: a new account secret (shown in this answer only) and a new session;
   * every session issued before ends.
   */
  rotateSecret(currentSecret: string, call?: CallOptions): Promise<RotatedSecret> {
    return this.#t.json({ method: 'POST', path: '/v0/account/secret', json: { account_secret: currentSecret }, auth: 'session' }, call);
  }

  /** `GET /v0/receipts?project=`: a project's receipts, also after the project was deleted (within the retention). */
  receipts(projectId: string, input: PageInput = {}, call?: CallOptions): Pages<ReceiptsPage, Receipt> {
    return listPages(this.#t, '/v0/receipts', input, call, (p: ReceiptsPage) => p.receipts, { project: projectId });
  }

  /** `POST /v2/sql`: one statement, with positional or named arguments (needs a project key). */
  sql(statement: InStatement, args?: InArgs, call?: CallOptions): Promise<ResultSet> {
    return this.#data.sql(statement, args, call);
  }

  /** `POST /v2/sql` with several statements run as one transaction (needs a project key). */
  batch(statements: readonly InStatement[], call?: CallOptions): Promise<ResultSet[]> {
    return this.#data.batch(statements, call);
  }

  /** `POST /v2/search`: full-text search over an FTS5 table (needs a project key). */
  search(table: string, query: string, options?: SearchOptions): Promise<SearchHit[]> {
    return this.#data.search(table, query, options);
  }

  /** `GET /v2/capabilities` of the key's project engine. */
  capabilities(call?: CallOptions): Promise<Capabilities> {
    return this.#data.capabilities(call);
  }

  /** `DELETE /v2/tables/{name}`: drops a table of the key's project. */
  dropTable(name: string, call?: CallOptions): Promise<{ dropped: string; visible_csn: number; catalog_version: number }> {
    return this.#data.dropTable(name, call);
  }

  /** Any other `/v2` request; answers the decoded envelope. */
  v2<T = unknown>(method: string, path: string, body?: unknown, call?: CallOptions): Promise<T> {
    return this.#data.request<T>(method, path.replace(/^\/+/, ''), body, call);
  }
}

/** The account's projects (session token). */
export class ProjectsApi {
  readonly #t: Transport;

  constructor(transport: Transport) {
    this.#t = transport;
  }

  /** `POST /v0/projects`: reserves a tenant (state `stopped`; the engine does not start). */
  create(input: CreateProjectInput, call?: CallOptions): Promise<Project> {
    return this.#t.json({ method: 'POST', path: '/v0/projects', json: input, auth: 'session' }, call);
  }

  /** `GET /v0/projects`: the account's projects, page by page. */
  list(input: PageInput = {}, call?: CallOptions): Pages<ProjectsPage, Project> {
    return listPages(this.#t, '/v0/projects', input, call, (p: ProjectsPage) => p.projects);
  }

  /** `GET /v0/projects/{id}`: the project, its state reconciled with the live process. */
  get(id: string, call?: CallOptions): Promise<Project> {
    return this.#t.json({ method: 'GET', path: `/v0/projects/${seg(id)}`, auth: 'session' }, call);
  }
}

/** The routes of one project. */
export class ProjectClient {
  readonly #t: Transport;
  readonly #base: string;
  /** The project's id. */
  readonly id: string;
  /** Object storage. */
  readonly storage: StorageClient;
  /** Snapshots of the data directory. */
  readonly snapshots: SnapshotsApi;
  /** Project keys. */
  readonly keys: KeysApi;
  /** Function secrets. */
  readonly secrets: SecretsApi;
  /** Realtime publish and subscribe. */
  readonly realtime: RealtimeApi;
  /** Receipts of receipted changes. */
  readonly receipts: ReceiptsApi;
  /** Previous data directories restore moved aside. */
  readonly replaced: ReplacedApi;
  /** Functions. */
  readonly functions: FunctionsApi;

  constructor(transport: Transport, id: string) {
    this.#t = transport;
    this.id = id;
    this.#base = `/v0/projects/${seg(id)}`;
    this.storage = new StorageClient(transport, id);
    this.snapshots = new SnapshotsApi(transport, this.#base);
    this.keys = new KeysApi(transport, this.#base);
    this.secrets = new SecretsApi(transport, this.#base);
    this.realtime = new RealtimeApi(transport, id, this.#base);
    this.receipts = new ReceiptsApi(transport, this.#base);
    this.replaced = new ReplacedApi(transport, this.#base);
    this.functions = new FunctionsApi(transport, this.#base);
  }

  /** `GET /v0/projects/{id}`. */
  get(call?: CallOptions): Promise<Project> {
    return this.#t.json({ method: 'GET', path: this.#base, auth: 'session' }, call);
  }

  /** `PATCH /v0/projects/{id}`: renames the project. */
  rename(name: RenameProjectInput['name'], call?: CallOptions): Promise<Project> {
    return this.#t.json({ method: 'PATCH', path: this.#base, json: { name }, auth: 'session' }, call);
  }

  /**
   * `DELETE /v0/projects/{id}`: stops the engine and removes the project with its keys, objects,
   * snapshots, secrets, functions and data; answers the project as it was.
   */
  delete(call?: CallOptions): Promise<Project> {
    return this.#t.json({ method: 'DELETE', path: this.#base, auth: 'session' }, call);
  }

  /** `GET …/logs`: the engine's last log lines. */
  logs(options: { tail?: number } & CallOptions = {}): Promise<EngineLogs> {
    const { tail, ...call } = options;
    return this.#t.json({ method: 'GET', path: `${this.#base}/logs`, query: { tail }, auth: 'session' }, call);
  }

  /** `GET …/logs?follow=1`: the engine's last log lines, then each new one, until the signal aborts. */
  async *followLogs(options: { tail?: number; signal?: AbortSignal } = {}): AsyncGenerator<string> {
    const { response, done } = await this.#t.send(
      { method: 'GET', path: `${this.#base}/logs`, query: { tail: options.tail, follow: 1 }, headers: { accept: 'text/event-stream' }, auth: 'session', streaming: true },
      options.signal ? { signal: options.signal } : {},
    );
    try {
      for await (const frame of sseFrames(response.body!)) {
        if (frame.event === 'line' && frame.data !== undefined) yield JSON.parse(frame.data) as string;
      }
    } finally {
      done();
    }
  }

  /** `POST …/wakeup`: starts the engine (idempotent); answers the project, `running`. */
  wakeup(call?: CallOptions): Promise<Project> {
    return this.#t.json({ method: 'POST', path: `${this.#base}/wakeup`, auth: 'session' }, call);
  }

  /** `POST …/sleep`: stops the engine gracefully (idempotent); answers the project, `sleeping`. */
  sleep(call?: CallOptions): Promise<Project> {
    return this.#t.json({ method: 'POST', path: `${this.#base}/sleep`, auth: 'session' }, call);
  }

  /** `GET …/head`: what the engine says about itself (a live probe, or the offline status). */
  head(call?: CallOptions): Promise<Head> {
    return this.#t.json({ method: 'GET', path: `${this.#base}/head`, auth: 'session' }, call);
  }

  /** `POST …/restore`: replaces the (sleeping) tenant's data directory by a snapshot's state. */
  restore(snapshotId: string, call?: CallOptions): Promise<Restored> {
    return this.#t.json({ method: 'POST', path: `${this.#base}/restore`, json: { snapshot_id: snapshotId }, auth: 'session' }, call);
  }
}

/** Snapshots of one project. */
export class SnapshotsApi {
  readonly #t: Transport;
  readonly #base: string;

  constructor(transport: Transport, projectBase: string) {
    this.#t = transport;
    this.#base = `${projectBase}/snapshots`;
  }

  /** `POST …/snapshots`: a verified backup of the sleeping tenant's data directory. */
  create(input: CreateSnapshotInput = {}, call?: CallOptions): Promise<Snapshot> {
    return this.#t.json({ method: 'POST', path: this.#base, json: input, auth: 'session' }, call);
  }

  /** `GET …/snapshots`: newest first, page by page. */
  list(input: PageInput = {}, call?: CallOptions): Pages<SnapshotsPage, Snapshot> {
    return listPages(this.#t, this.#base, input, call, (p: SnapshotsPage) => p.snapshots);
  }

  /** `GET …/snapshots/{snapshot_id}`. */
  get(snapshotId: string, call?: CallOptions): Promise<Snapshot> {
    return this.#t.json({ method: 'GET', path: `${this.#base}/${seg(snapshotId)}`, auth: 'session' }, call);
  }

  /** `DELETE …/snapshots/{snapshot_id}`: removes the snapshot and its backup directory. */
  delete(snapshotId: string, call?: CallOptions): Promise<Snapshot> {
    return this.#t.json({ method: 'DELETE', path: `${this.#base}/${seg(snapshotId)}`, auth: 'session' }, call);
  }
}

/** The previous data directories restore moved aside (docs/lifecycle.md "Previous data directories"). */
export class ReplacedApi {
  readonly #t: Transport;
  readonly #base: string;

  constructor(transport: Transport, projectBase: string) {
    this.#t = transport;
    this.#base = `${projectBase}/replaced`;
  }

  /** `GET …/replaced`: newest first, with their sizes. */
  list(input: PageInput = {}, call?: CallOptions): Pages<ReplacedPage, ReplacedDir> {
    return listPages(this.#t, this.#base, input, call, (p: ReplacedPage) => p.replaced);
  }

  /** `DELETE …/replaced/{name}`: frees one; answers it as it was. */
  delete(name: string, call?: CallOptions): Promise<ReplacedDir> {
    return this.#t.json({ method: 'DELETE', path: `${this.#base}/${seg(name)}`, auth: 'session' }, call);
  }
}

/** Project keys of one project. */
export class KeysApi {
  readonly #t: Transport;
  readonly #base: string;

  constructor(transport: Transport, projectBase: string) {
    this.#t = transport;
    this.#base = `${projectBase}/keys`;
  }

  /** `POST …/keys`: a new key; its secret `key` is in this answer only. */
  create(input: CreateKeyInput = {}, call?: CallOptions): Promise<IssuedKey> {
    return this.#t.json({ method: 'POST', path: this.#base, json: input, auth: 'session' }, call);
  }

  /** `GET …/keys`: every key, revoked ones included, never a secret. */
  list(input: PageInput = {}, call?: CallOptions): Pages<KeysPage, KeyRecord> {
    return listPages(this.#t, this.#base, input, call, (p: KeysPage) => p.keys);
  }

  /** `DELETE …/keys/{key_id}`: revokes the key; the very next `/v2` request with it is 401. */
  revoke(keyId: string, call?: CallOptions): Promise<KeyRecord> {
    return this.#t.json({ method: 'DELETE', path: `${this.#base}/${seg(keyId)}`, auth: 'session' }, call);
  }
}

/** Function secrets of one project: values go in, metadata comes out. */
export class SecretsApi {
  readonly #t: Transport;
  readonly #base: string;

  constructor(transport: Transport, projectBase: string) {
    this.#t = transport;
    this.#base = `${projectBase}/functions/secrets`;
  }

  /** `PUT …/functions/secrets/{name}`: creates (version 1) or rotates the secret. */
  set(name: string, value: string, call?: CallOptions): Promise<SecretMetadata> {
    return this.#t.json({ method: 'PUT', path: `${this.#base}/${seg(name)}`, json: { value }, auth: 'session' }, call);
  }

  /** `GET …/functions/secrets`: metadata of every secret, by name. */
  list(input: PageInput = {}, call?: CallOptions): Pages<SecretsPage, SecretMetadata> {
    return listPages(this.#t, this.#base, input, call, (p: SecretsPage) => p.secrets);
  }

  /** `GET …/functions/secrets/{name}`: one secret's metadata. */
  get(name: string, call?: CallOptions): Promise<SecretMetadata> {
    return this.#t.json({ method: 'GET', path: `${this.#base}/${seg(name)}`, auth: 'session' }, call);
  }

  /** `DELETE …/functions/secrets/{name}`: answers the deleted secret's metadata. */
  delete(name: string, call?: CallOptions): Promise<SecretMetadata> {
    return this.#t.json({ method: 'DELETE', path: `${this.#base}/${seg(name)}`, auth: 'session' }, call);
  }
}

/** Realtime of one project. */
export class RealtimeApi {
  readonly #t: Transport;
  readonly #project: string;
  readonly #base: string;

  constructor(transport: Transport, projectId: string, projectBase: string) {
    this.#t = transport;
    this.#project = projectId;
    this.#base = `${projectBase}/realtime`;
  }

  /** `POST …/realtime/publish` (owner session): answers the event as delivered. */
  publish(channel: string, event: string, payload?: unknown, call?: CallOptions): Promise<RealtimeEvent> {
    return this.#t.json(
      { method: 'POST', path: `${this.#base}/publish`, json: { channel, event, ...(payload === undefined ? {} : { payload }) }, auth: 'session' },
      call,
    );
  }

  /**
   * `POST …/realtime/tickets` (project key or owner session): a single-use ticket for a browser's
   * `EventSource`, which cannot send `Authorization` (docs/realtime.md "Browsers: tickets").
   */
  ticket(channels: string | readonly string[], call?: CallOptions): Promise<RealtimeTicket> {
    return this.#t.json(
      { method: 'POST', path: `${this.#base}/tickets`, json: { channels: typeof channels === 'string' ? [channels] : [...channels] }, auth: 'either' },
      call,
    );
  }

  /**
   * `GET …/realtime/subscribe` (project key or owner session): the events of `channels` as they are
   * delivered, reconnecting with backoff; ends with a `RealtimeOverflowError` or a `SvcError`.
   */
  subscribe(channels: string | readonly string[], options?: SubscribeOptions): AsyncIterable<RealtimeEvent> {
    return subscribe(this.#t, this.#project, typeof channels === 'string' ? [channels] : channels, options);
  }
}

/** Receipts of one project. */
export class ReceiptsApi {
  readonly #t: Transport;
  readonly #base: string;

  constructor(transport: Transport, projectBase: string) {
    this.#t = transport;
    this.#base = `${projectBase}/receipts`;
  }

  /** `GET …/receipts`: newest first, page by page. */
  list(input: PageInput = {}, call?: CallOptions): Pages<ReceiptsPage, Receipt> {
    return listPages(this.#t, this.#base, input, call, (p: ReceiptsPage) => p.receipts);
  }
}
