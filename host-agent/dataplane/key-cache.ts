/**
 * The agent's cache of project keys for `/v2` (docs/dataplane.md "The key cache (host agent)").
 *
 * - Warm: a request whose key id is cached reads nothing from DynamoDB; its secret is checked
 *   against the cached verifier (HMAC-SHA256(pepper, secret), constant-time compare).
 * - Cold: the first request for a key id reads its lookup item once (strongly consistent);
 *   concurrent cold requests for the same id share that one read.
 * - Revocation: the DELETE handler writes `revoked_at` and then calls the agent's invalidate route,
 *   which leaves a tombstone here. A tombstone always wins over a read that was in flight when it
 *   was set, so once the invalidate call has answered, no request can pass with that key.
 * - Unknown key ids are remembered too (in their own, smaller LRU so a flood of random ids cannot
 *   evict real keys): a key id is 128 random bits fixed before its key is answered, so an id
 *   unknown now never becomes a valid key later.
 * - Active entries are re-read after `refreshMs` (default 10 min), a backstop bounding how long a
 *   key revoked without a successful invalidation (a DELETE that answered 503) can stay usable. A
 *   failed re-read keeps serving the entry and retries later: DynamoDB trouble does not take `/v2`
 *   down for keys already verified.
 * - Owner: with several agents (docs/dataplane.md "Several agents") a verified key also answers the
 *   agent that owns its project (the project's placement, read once per project and kept), so the
 *   `/v2` listener knows at once whether to serve the request or forward it. A placement changes
 *   only when a project moves (docs/durability.md): the listener asks `refreshPlacement` when the
 *   placement it holds cannot serve the request, at most once a second per project. A cold key costs one read of its lookup item plus, the first time its project is
 *   seen, one read of the project.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import type { ParsedKey } from '../../shared/auth.ts';
import type { KeyLookup } from '../../shared/db/keys.ts';
import { errors } from '../../shared/errors.ts';
import { KEY_REJECTED, type VerifiedKey } from '../../shared/project-keys.ts';

/** How the cache reads a key's lookup item (shared/db/keys.ts lookupKey in the agent). */
export type KeyLoader = (keyId: string) => Promise<KeyLookup | null>;

/** How long a placement is kept before it is read again (docs/durability.md "Relocation"). */
const PLACEMENT_TTL_MS = 60_000;

/** How the cache reads a project's placement: the id of the agent that owns it, or null (no such project). */
export type PlacementLoader = (projectId: string) => Promise<string | null>;

/** A verified key: its project and, when the cache knows placements, the agent that owns the project. */
export interface CachedKey extends VerifiedKey {
  /** The owning agent's id; undefined when the cache has no placement loader (one agent: this one). */
  owner?: string;
}

/** Options of a key cache. */
export interface KeyCacheOptions {
  pepper: string;
  load: KeyLoader;
  /** Reads a project's placement; without it every key is taken as this agent's (the listener alone, in tests). */
  placement?: PlacementLoader;
  /** Most cached placements (project id -> agent id). */
  maxPlacements?: number;
  /** Most cached keys (active or revoked). */
  maxKeys?: number;
  /** Most remembered unknown key ids. */
  maxUnknown?: number;
  /** Age after which an active entry is re-read. */
  refreshMs?: number;
  /** Delay before retrying a failed re-read. */
  retryMs?: number;
  now?: () => number;
  log?: (line: string) => void;
}

type Entry =
  | { state: 'active'; project: string; owner: string | undefined; verifier: Buffer; loadedAt: number }
  | { state: 'revoked' };

/**
 * The verifier of shared/auth.ts verifierOf, computed synchronously with node:crypto: Web Crypto's
 * HMAC is a thread-pool round trip (about 100 µs measured here), node's about 5 µs on the hot path.
 * A unit test pins both to the same output.
 */
export function verifierBytes(pepper: string, secret: string): Buffer {
  return createHmac('sha256', pepper).update(secret).digest();
}

/** Counters of the cache, for tests and the benchmark. */
export interface KeyCacheStats {
  hits: number;
  loads: number;
  invalidations: number;
  /** Reads of a project's placement. */
  placementLoads: number;
}

/** The verified-key cache of one agent. */
export class KeyCache {
  private readonly keys: LRUCache<string, Entry>;
  private readonly unknown: LRUCache<string, true>;
  private readonly inflight = new Map<string, Promise<void>>();
  private readonly placements: LRUCache<string, string>;
  private readonly placing = new Map<string, Promise<string | null>>();
  /** When each project's placement was last read again on request (`refreshPlacement`). */
  private readonly refreshed = new LRUCache<string, number>({ max: 10_000 });
  private readonly pepper: string;
  private readonly loader: KeyLoader;
  private readonly placement: PlacementLoader | undefined;
  private readonly refreshMs: number;
  private readonly retryMs: number;
  private readonly now: () => number;
  private readonly log: (line: string) => void;
  readonly stats: KeyCacheStats = { hits: 0, loads: 0, invalidations: 0, placementLoads: 0 };

  constructor(options: KeyCacheOptions) {
    this.pepper = options.pepper;
    this.loader = options.load;
    this.placement = options.placement;
    // A move tells every live agent to forget the placement; the time limit covers an agent the word missed.
    this.placements = new LRUCache({ max: options.maxPlacements ?? 100_000, ttl: PLACEMENT_TTL_MS });
    this.keys = new LRUCache({ max: options.maxKeys ?? 100_000 });
    this.unknown = new LRUCache({ max: options.maxUnknown ?? 10_000 });
    this.refreshMs = options.refreshMs ?? 10 * 60_000;
    this.retryMs = options.retryMs ?? 5_000;
    this.now = options.now ?? Date.now;
    this.log = options.log ?? (() => {});
  }

  /** Verifies a presented key: its project and owning agent, or 401 (unknown, wrong secret, revoked). */
  async verify(presented: ParsedKey): Promise<CachedKey> {
    const warm = this.verifyWarm(presented);
    if (warm !== undefined) return warm;
    const { keyId } = presented;
    // Cold, or old enough to re-read (the revocation backstop; if that read fails the entry stays).
    await this.load(keyId);
    // Judge against what the cache holds now, not what the read answered: an invalidation that
    // arrived while the read was in flight has left a tombstone.
    return this.judge(presented, this.keys.get(keyId));
  }

  /**
   * The warm path of verify, synchronous (no promise per request on the `/v2` hot path): the
   * verdict from memory, or undefined when the key id must be read first.
   */
  verifyWarm(presented: ParsedKey): CachedKey | undefined {
    const entry = this.keys.get(presented.keyId);
    if (entry === undefined) {
      if (this.unknown.get(presented.keyId)) throw errors.unauthenticated(KEY_REJECTED);
      return undefined;
    }
    if (entry.state === 'active' && this.now() - entry.loadedAt > this.refreshMs) return undefined;
    this.stats.hits++;
    return this.judge(presented, entry);
  }

  private judge(presented: ParsedKey, entry: Entry | undefined): CachedKey {
    if (entry?.state !== 'active') throw errors.unauthenticated(KEY_REJECTED);
    const presentedVerifier = verifierBytes(this.pepper, presented.secret);
    if (presentedVerifier.length !== entry.verifier.length || !timingSafeEqual(presentedVerifier, entry.verifier)) {
      throw errors.unauthenticated(KEY_REJECTED);
    }
    return { keyId: presented.keyId, projectId: entry.project, owner: entry.owner };
  }

  /**
   * Whether key `keyId` is active and of `projectId`, without its secret (a realtime ticket issued
   * to a key dies with it): from memory when cached, tombstones included, else read once like a cold key.
   */
  async isActive(keyId: string, projectId: string): Promise<boolean> {
    let entry = this.keys.get(keyId);
    if (entry === undefined ? !this.unknown.get(keyId) : entry.state === 'active' && this.now() - entry.loadedAt > this.refreshMs) {
      await this.load(keyId);
      entry = this.keys.get(keyId);
    }
    return entry?.state === 'active' && entry.project === projectId;
  }

  /** Marks a key revoked (the invalidate route). Idempotent; the tombstone is never overwritten by a read. */
  invalidate(keyId: string): void {
    this.stats.invalidations++;
    this.unknown.delete(keyId);
    this.keys.set(keyId, { state: 'revoked' });
  }

  /** How many key ids the cache holds (active, revoked, unknown). */
  get size(): number {
    return this.keys.size + this.unknown.size;
  }

  /** One read per key id at a time; concurrent callers share it. */
  private load(keyId: string): Promise<void> {
    let pending = this.inflight.get(keyId);
    if (!pending) {
      pending = this.read(keyId).finally(() => this.inflight.delete(keyId));
      this.inflight.set(keyId, pending);
    }
    return pending;
  }

  /**
   * Reads the project's placement again when the one held could not serve a request (its agent has
   * no engine for it, or is gone): the project may have moved (docs/durability.md). At most once per
   * `minIntervalMs` per project, so a flood of requests for a sleeping tenant costs one read a second.
   * Answers the owner now known (the held one when not read again).
   */
  async refreshPlacement(projectId: string, minIntervalMs = 1000, now = Date.now()): Promise<string | null | undefined> {
    if (!this.placement) return undefined;
    const last = this.refreshed.get(projectId);
    if (last !== undefined && now - last < minIntervalMs) return this.placements.get(projectId);
    this.refreshed.set(projectId, now);
    this.placements.delete(projectId);
    const owner = await this.ownerOf(projectId);
    for (const entry of this.keys.values()) if (entry.state === 'active' && entry.project === projectId) entry.owner = owner ?? undefined;
    return owner;
  }

  /**
   * Forgets the project's placement (it moved away from or to this agent), and the keys of it this
   * cache verified, which carry it: the next request reads both again.
   */
  forgetPlacement(projectId: string): void {
    this.placements.delete(projectId);
    for (const [keyId, entry] of this.keys.entries()) if (entry.state === 'active' && entry.project === projectId) this.keys.delete(keyId);
  }

  /** A project's owning agent: read once per project (single flight), then from memory. */
  private async ownerOf(projectId: string): Promise<string | null | undefined> {
    if (!this.placement) return undefined;
    const cached = this.placements.get(projectId);
    if (cached !== undefined) return cached;
    let pending = this.placing.get(projectId);
    if (!pending) {
      this.stats.placementLoads++;
      pending = this.placement(projectId).finally(() => this.placing.delete(projectId));
      this.placing.set(projectId, pending);
    }
    const owner = await pending;
    // Kept for as long as the LRU allows: a project that moved is read again by `refreshPlacement`.
    if (owner !== null) this.placements.set(projectId, owner);
    return owner;
  }

  private async read(keyId: string): Promise<void> {
    this.stats.loads++;
    const before = this.keys.peek(keyId);
    let stored: KeyLookup | null;
    let owner: string | null | undefined;
    try {
      stored = await this.loader(keyId);
      if (stored && stored.key_id === keyId && stored.revoked_at === null) {
        owner = before?.state === 'active' && before.project === stored.project ? before.owner : await this.ownerOf(stored.project);
      }
    } catch (err) {
      if (before?.state === 'active') {
        // Keep serving what was verified; retry after retryMs rather than on every request.
        this.log(`dataplane: re-reading key ${keyId} failed, keeping the cached entry: ${(err as Error).message}`);
        before.loadedAt = this.now() - this.refreshMs + this.retryMs;
        return;
      }
      throw err;
    }
    if (this.keys.peek(keyId)?.state === 'revoked') return;
    // A key whose project is gone (no placement) can never be used again: as good as unknown.
    if (!stored || stored.key_id !== keyId || owner === null) {
      this.keys.delete(keyId);
      this.unknown.set(keyId, true);
    } else if (stored.revoked_at !== null) {
      this.keys.set(keyId, { state: 'revoked' });
    } else {
      this.keys.set(keyId, {
        state: 'active',
        project: stored.project,
        owner: owner ?? undefined,
        verifier: Buffer.from(stored.verifier, 'hex'),
        loadedAt: this.now(),
      });
    }
  }
}
