/**
 * `createClient`: one method per route of the service (docs/interface.md, docs/api.md and the
 * area pages; docs/sdk.md lists them). Account-level routes sit on the client, project routes on
 * `client.project(id)` (./project.ts), the data plane (`sql`, `batch`, `search`) on the client with a
 * project key. Each method takes its route's method, path and credential from the route's
 * declaration (./routes.gen.ts) and its types from the declaration's schemas (docs/sdk.md "How the
 * SDK is made").
 */
import { DataPlane, type SearchOptions } from './dataplane.ts';
import { Transport, type CallOptions, type ClientOptions } from './http.ts';
import { listPages, type Pages } from './pages.ts';
import { ProjectClient } from './project.ts';
import type { InArgs, InStatement, ResultSet } from './results.ts';
import * as R from './routes.gen.ts';
import type {
  Capabilities,
  CreateProjectInput,
  Health,
  Me,
  PageInput,
  Project,
  ProjectsPage,
  Receipt,
  ReceiptsPage,
  RotatedSecret,
  SearchHit,
  Session,
  SessionInput,
  SignedUp,
  SignupInput,
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
    return this.#t.call(R.service.health, {}, call);
  }

  /** `POST /v0/signup`: a new account; its secret is shown in this answer only. */
  signup(input: SignupInput = {}, call?: CallOptions): Promise<SignedUp> {
    return this.#t.call(R.accounts.signup, { json: input }, call);
  }

  /** `POST /v0/sessions`: a new session from the account id and secret. */
  createSession(input: SessionInput, call?: CallOptions): Promise<Session> {
    return this.#t.call(R.accounts.openSession, { json: input }, call);
  }

  /** `GET /v0/me`: the account of the session. */
  me(call?: CallOptions): Promise<Me> {
    return this.#t.call(R.accounts.me, {}, call);
  }

  /** `DELETE /v0/sessions/current`: ends the client's session (the next call with it is 401). */
  async endSession(call?: CallOptions): Promise<void> {
    const { done } = await this.#t.open(R.accounts.signOut, {}, call);
    done();
  }

  /**
   * `POST /v0/account/secret`: a new account secret (shown in this answer only) and a new session;
   * every session issued before ends.
   */
  rotateSecret(currentSecret: string, call?: CallOptions): Promise<RotatedSecret> {
    return this.#t.call(R.accounts.rotateSecret, { json: { account_secret: currentSecret } }, call);
  }

  /** `GET /v0/receipts?project=`: a project's receipts, also after the project was deleted (within the retention). */
  receipts(projectId: string, input: PageInput = {}, call?: CallOptions): Pages<ReceiptsPage, Receipt> {
    return listPages(this.#t, R.receipts.ofAccount, input, call, (p) => p.receipts, { query: { project: projectId } });
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
    return this.#t.call(R.projects.create, { json: input }, call);
  }

  /** `GET /v0/projects`: the account's projects, page by page. */
  list(input: PageInput = {}, call?: CallOptions): Pages<ProjectsPage, Project> {
    return listPages(this.#t, R.projects.list, input, call, (p) => p.projects);
  }

  /** `GET /v0/projects/{id}`: the project, its state reconciled with the live process. */
  get(id: string, call?: CallOptions): Promise<Project> {
    return this.#t.call(R.projects.read, { params: { id } }, call);
  }
}
