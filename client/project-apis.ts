/**
 * The smaller route groups of one project (docs/sdk.md "Shape"): snapshots, previous data
 * directories, keys, function secrets, realtime and receipts. Each method takes its route from
 * ./routes.gen.ts and its types from the route's declaration.
 */
import { withCleanup, type CallOptions, type Transport } from './http.ts';
import { listPages, type Pages } from './pages.ts';
import { subscribe, type SubscribeOptions } from './realtime.ts';
import * as R from './routes.gen.ts';
import type {
  CreateKeyInput,
  CreateSnapshotInput,
  Imported,
  IssuedKey,
  KeyRecord,
  KeysPage,
  PageInput,
  RealtimeEvent,
  RealtimeTicket,
  Receipt,
  ReceiptsPage,
  ReplacedDir,
  ReplacedPage,
  SecretMetadata,
  SecretsPage,
  Snapshot,
  SnapshotsPage,
} from './types.ts';

/** What each group of a project's routes holds: the transport, and the project as its routes' `:id`. */
export abstract class ProjectApi {
  protected readonly t: Transport;
  protected readonly project: { readonly id: string };

  constructor(transport: Transport, projectId: string) {
    this.t = transport;
    this.project = { id: projectId };
  }
}

/** Snapshots of one project. */
export class SnapshotsApi extends ProjectApi {
  /** `POST …/snapshots`: a verified backup of the sleeping tenant's data directory. */
  create(input: CreateSnapshotInput = {}, call?: CallOptions): Promise<Snapshot> {
    return this.t.call(R.lifecycle.createSnapshot, { params: this.project, json: input }, call);
  }

  /** `GET …/snapshots`: newest first, page by page. */
  list(input: PageInput = {}, call?: CallOptions): Pages<SnapshotsPage, Snapshot> {
    return listPages(this.t, R.lifecycle.listSnapshots, input, call, (p) => p.snapshots, { params: this.project });
  }

  /** `GET …/snapshots/{snapshot_id}`. */
  get(snapshotId: string, call?: CallOptions): Promise<Snapshot> {
    return this.t.call(R.lifecycle.readSnapshot, { params: { ...this.project, snapshot_id: snapshotId } }, call);
  }

  /** `DELETE …/snapshots/{snapshot_id}`: removes the snapshot and its backup directory. */
  delete(snapshotId: string, call?: CallOptions): Promise<Snapshot> {
    return this.t.call(R.lifecycle.deleteSnapshot, { params: { ...this.project, snapshot_id: snapshotId } }, call);
  }

  /** `GET …/snapshots/{snapshot_id}/archive`: the snapshot as one tar, a stream, with its size (docs/lifecycle.md "Export and import"). */
  async download(snapshotId: string, call?: CallOptions): Promise<{ body: ReadableStream<Uint8Array>; size: number | null; filename: string | null }> {
    const { response, done } = await this.t.open(R.lifecycle.snapshotArchive, { params: { ...this.project, snapshot_id: snapshotId }, streaming: true }, call);
    const length = response.headers.get('content-length');
    const filename = /filename="([^"]+)"/.exec(response.headers.get('content-disposition') ?? '')?.[1] ?? null;
    const body = response.body ? withCleanup(response.body, done) : new ReadableStream<Uint8Array>({ start: (c) => c.close() });
    if (!response.body) done();
    return { body, size: length === null ? null : Number(length), filename };
  }

  /**
   * `POST …/import`: a tar `download` answered becomes a snapshot of this project and is restored
   * (the tenant asleep). `size` lets Node send the stream with its length.
   */
  import(archive: Blob | ReadableStream<Uint8Array>, options: CallOptions & { size?: number } = {}): Promise<Imported> {
    const size = archive instanceof Blob ? archive.size : options.size;
    const headers: Record<string, string> = { 'content-type': 'application/x-tar', ...(size !== undefined ? { 'content-length': String(size) } : {}) };
    return this.t.call(R.lifecycle.importArchive, { params: this.project, body: archive, headers, streaming: true }, options);
  }
}

/** The previous data directories restore moved aside (docs/lifecycle.md "Previous data directories"). */
export class ReplacedApi extends ProjectApi {
  /** `GET …/replaced`: newest first, with their sizes. */
  list(input: PageInput = {}, call?: CallOptions): Pages<ReplacedPage, ReplacedDir> {
    return listPages(this.t, R.lifecycle.listReplaced, input, call, (p) => p.replaced, { params: this.project });
  }

  /** `DELETE …/replaced/{name}`: frees one; answers it as it was. */
  delete(name: string, call?: CallOptions): Promise<ReplacedDir> {
    return this.t.call(R.lifecycle.discardReplaced, { params: { ...this.project, name } }, call);
  }
}

/** Project keys of one project. */
export class KeysApi extends ProjectApi {
  /** `POST …/keys`: a new key; its secret `key` is in this answer only. */
  create(input: CreateKeyInput = {}, call?: CallOptions): Promise<IssuedKey> {
    return this.t.call(R.keys.issue, { params: this.project, json: input }, call);
  }

  /** `GET …/keys`: every key, revoked ones included, never a secret. */
  list(input: PageInput = {}, call?: CallOptions): Pages<KeysPage, KeyRecord> {
    return listPages(this.t, R.keys.list, input, call, (p) => p.keys, { params: this.project });
  }

  /** `DELETE …/keys/{key_id}`: revokes the key; the very next `/v2` request with it is 401. */
  revoke(keyId: string, call?: CallOptions): Promise<KeyRecord> {
    return this.t.call(R.keys.revoke, { params: { ...this.project, key_id: keyId } }, call);
  }
}

/** Function secrets of one project: values go in, metadata comes out. */
export class SecretsApi extends ProjectApi {
  /** `PUT …/functions/secrets/{name}`: creates (version 1) or rotates the secret. */
  set(name: string, value: string, call?: CallOptions): Promise<SecretMetadata> {
    return this.t.call(R.secrets.put, { params: { ...this.project, name }, json: { value } }, call);
  }

  /** `GET …/functions/secrets`: metadata of every secret, by name. */
  list(input: PageInput = {}, call?: CallOptions): Pages<SecretsPage, SecretMetadata> {
    return listPages(this.t, R.secrets.list, input, call, (p) => p.secrets, { params: this.project });
  }

  /** `GET …/functions/secrets/{name}`: one secret's metadata. */
  get(name: string, call?: CallOptions): Promise<SecretMetadata> {
    return this.t.call(R.secrets.read, { params: { ...this.project, name } }, call);
  }

  /** `DELETE …/functions/secrets/{name}`: answers the deleted secret's metadata. */
  delete(name: string, call?: CallOptions): Promise<SecretMetadata> {
    return this.t.call(R.secrets.remove, { params: { ...this.project, name } }, call);
  }
}

/** Realtime of one project. */
export class RealtimeApi extends ProjectApi {
  /** `POST …/realtime/publish` (owner session): answers the event as delivered. */
  publish(channel: string, event: string, payload?: unknown, call?: CallOptions): Promise<RealtimeEvent> {
    return this.t.call(R.realtime.publish, { params: this.project, json: { channel, event, ...(payload === undefined ? {} : { payload }) } }, call);
  }

  /**
   * `POST …/realtime/tickets` (project key or owner session): a single-use ticket for a browser's
   * `EventSource`, which cannot send `Authorization` (docs/realtime.md "Browsers: tickets").
   */
  ticket(channels: string | readonly string[], call?: CallOptions): Promise<RealtimeTicket> {
    return this.t.call(R.realtime.ticket, { params: this.project, json: { channels: typeof channels === 'string' ? [channels] : [...channels] } }, call);
  }

  /**
   * `GET …/realtime/subscribe` (project key or owner session): the events of `channels` as they are
   * delivered, reconnecting with backoff; ends with a `RealtimeOverflowError` or a `SvcError`.
   */
  subscribe(channels: string | readonly string[], options?: SubscribeOptions): AsyncIterable<RealtimeEvent> {
    return subscribe(this.t, this.project.id, typeof channels === 'string' ? [channels] : channels, options);
  }
}

/** Receipts of one project. */
export class ReceiptsApi extends ProjectApi {
  /** `GET …/receipts`: newest first, page by page. */
  list(input: PageInput = {}, call?: CallOptions): Pages<ReceiptsPage, Receipt> {
    return listPages(this.t, R.receipts.ofProject, input, call, (p) => p.receipts, { params: this.project });
  }
}
