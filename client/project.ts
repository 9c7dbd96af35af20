/**
 * The routes of one project (`client.project(id)`; docs/sdk.md "Shape"): the project itself, its
 * lifecycle and logs here, its snapshots, keys, secrets, realtime, receipts and previous data
 * directories in ./project-apis.ts, storage and functions in their own modules.
 */
import { FunctionsApi } from './functions.ts';
import type { CallOptions, Transport } from './http.ts';
import { KeysApi, RealtimeApi, ReceiptsApi, ReplacedApi, SecretsApi, SnapshotsApi } from './project-apis.ts';
import * as R from './routes.gen.ts';
import { sseFrames } from './sse.ts';
import { StorageClient } from './storage.ts';
import type { EngineLogs, Head, Project, RenameProjectInput, Restored } from './types.ts';

/** The routes of one project. */
export class ProjectClient {
  readonly #t: Transport;
  readonly #params: { id: string };
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
    this.#params = { id };
    this.storage = new StorageClient(transport, id);
    this.snapshots = new SnapshotsApi(transport, id);
    this.keys = new KeysApi(transport, id);
    this.secrets = new SecretsApi(transport, id);
    this.realtime = new RealtimeApi(transport, id);
    this.receipts = new ReceiptsApi(transport, id);
    this.replaced = new ReplacedApi(transport, id);
    this.functions = new FunctionsApi(transport, id);
  }

  /** `GET /v0/projects/{id}`. */
  get(call?: CallOptions): Promise<Project> {
    return this.#t.call(R.projects.read, { params: this.#params }, call);
  }

  /** `PATCH /v0/projects/{id}`: renames the project. */
  rename(name: NonNullable<RenameProjectInput['name']>, call?: CallOptions): Promise<Project> {
    return this.#t.call(R.projects.rename, { params: this.#params, json: { name } }, call);
  }

  /**
   * `PATCH /v0/projects/{id}`: any of `name`, `auto_sleep_after_s` and `backup` (null turns a setting
   * off; docs/lifecycle.md "Automatic sleep and backups"); answers the project as now recorded.
   */
  update(changes: RenameProjectInput, call?: CallOptions): Promise<Project> {
    return this.#t.call(R.projects.rename, { params: this.#params, json: changes }, call);
  }

  /**
   * `DELETE /v0/projects/{id}`: stops the engine and removes the project with its keys, objects,
   * snapshots, secrets, functions and data; answers the project as it was.
   */
  delete(call?: CallOptions): Promise<Project> {
    return this.#t.call(R.projects.remove, { params: this.#params }, call);
  }

  /** `GET …/logs`: the engine's last log lines. */
  logs(options: { tail?: number } & CallOptions = {}): Promise<EngineLogs> {
    const { tail, ...call } = options;
    return this.#t.call(R.logs.engineLogs, { params: this.#params, query: { tail } }, call);
  }

  /** `GET …/logs?follow=1`: the engine's last log lines, then each new one, until the signal aborts. */
  async *followLogs(options: { tail?: number; signal?: AbortSignal } = {}): AsyncGenerator<string> {
    const { response, done } = await this.#t.open(
      R.logs.engineLogs,
      { params: this.#params, query: { tail: options.tail, follow: 1 }, headers: { accept: 'text/event-stream' }, streaming: true },
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

  /**
   * `POST …/relocate`: moves the sleeping project to another host agent (`targetAgent`, or the
   * least-loaded other one); answers the project on its new agent (docs/durability.md "Relocation").
   */
  relocate(targetAgent?: string, call?: CallOptions): Promise<Project> {
    return this.#t.call(R.moves.relocate, { params: this.#params, json: targetAgent === undefined ? {} : { target_agent: targetAgent } }, call);
  }

  /** `POST …/wakeup`: starts the engine (idempotent); answers the project, `running`. */
  wakeup(call?: CallOptions): Promise<Project> {
    return this.#t.call(R.lifecycle.wakeup, { params: this.#params }, call);
  }

  /** `POST …/sleep`: stops the engine gracefully (idempotent); answers the project, `sleeping`. */
  sleep(call?: CallOptions): Promise<Project> {
    return this.#t.call(R.lifecycle.sleep, { params: this.#params }, call);
  }

  /** `GET …/head`: what the engine says about itself (a live probe, or the offline status). */
  head(call?: CallOptions): Promise<Head> {
    return this.#t.call(R.lifecycle.head, { params: this.#params }, call);
  }

  /** `POST …/restore`: replaces the (sleeping) tenant's data directory by a snapshot's state. */
  restore(snapshotId: string, call?: CallOptions): Promise<Restored> {
    return this.#t.call(R.lifecycle.restore, { params: this.#params, json: { snapshot_id: snapshotId } }, call);
  }
}
