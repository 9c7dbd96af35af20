/**
 * The other host agents, as the `/v2` listener needs them to forward a request for a project it
 * does not own (docs/dataplane.md "Several agents"): each peer's registration (its `dataplane_url`
 * and heartbeat) and one undici Pool per peer listener.
 *
 * Liveness is judged as handlers/domain/placement.ts agentFor judges it: a heartbeat within
 * `SVCD_AGENT_STALE_MS`. A copy of a registration can only err on the side of "stale", never
 * "live" (`heartbeat_at` only grows), so a copy that looks live is used as it is and re-read in the
 * background once it is older than `refreshMs`; a copy that looks stale is re-read before the
 * request is refused (at most once per `refreshMs` per peer, so a flood of requests for a dead
 * agent's projects costs one read per interval, not one per request).
 */
import type { Pool } from 'undici';
import type { AgentRecord } from '../../shared/db/agents.ts';
import { Upstreams } from './upstreams.ts';

/** Reads one agent's registration (shared/db/agents.ts getAgent in the agent). */
export type AgentLoader = (agentId: string) => Promise<AgentRecord | null>;

/** Options of the peer directory. */
export interface PeersOptions {
  load: AgentLoader;
  /** `SVCD_AGENT_STALE_MS`: a peer whose last heartbeat is older is not live. */
  staleMs: number;
  /** Age after which a copy is re-read (the agent's `SVCD_HEARTBEAT_MS`). */
  refreshMs: number;
  now?: () => number;
  log?: (line: string) => void;
  /** Tells agent `agentId` that its placement of `projectId` is stale (the project moved; docs/durability.md "Relocation"). */
  tellMoved?: (agentId: string, projectId: string) => Promise<void>;
}

/** A peer the listener may forward to. */
export interface Peer {
  agentId: string;
  dataplaneUrl: string;
  pool: Pool;
}

/** Why a peer cannot be forwarded to. */
export type PeerUnavailable = { reason: 'unregistered' } | { reason: 'stale'; heartbeatAt: string };

interface Entry {
  record: AgentRecord | null;
  readAt: number;
}

/** The peer directory of one agent. */
export class Peers {
  private readonly entries = new Map<string, Entry>();
  private readonly inflight = new Map<string, Promise<void>>();
  private readonly pools = new Upstreams();
  private readonly options: PeersOptions;
  private readonly now: () => number;
  private readonly log: (line: string) => void;
  /** Reads of registrations, for tests. */
  reads = 0;

  constructor(options: PeersOptions) {
    this.options = options;
    this.now = options.now ?? Date.now;
    this.log = options.log ?? (() => {});
  }

  private live(record: AgentRecord | null, now: number): boolean {
    return record !== null && now - Date.parse(record.heartbeat_at) <= this.options.staleMs;
  }

  /**
   * A request forwarded here by `agentId` for a project this agent places on `agentId` itself: one
   * of the two placements is stale (a move whose word did not reach it). After this agent read its
   * own again, it is the forwarder's: it is told to forget it, so the request can go back to it.
   */
  async tellMoved(agentId: string, projectId: string): Promise<void> {
    await this.options.tellMoved?.(agentId, projectId).catch((err: Error) => this.log(`dataplane: telling agent ${agentId} that ${projectId} moved failed: ${err.message}`));
  }

  /** The live peer `agentId`, with its pool; or why it cannot be reached. Throws only when a needed read fails. */
  async resolve(agentId: string): Promise<Peer | PeerUnavailable> {
    let entry = this.entries.get(agentId);
    const now = this.now();
    if (entry && this.live(entry.record, now)) {
      if (now - entry.readAt > this.options.refreshMs) {
        this.load(agentId).catch((err: unknown) => this.log(`dataplane: re-reading agent ${agentId} failed: ${(err as Error).message}`));
      }
    } else if (!entry || now - entry.readAt > this.options.refreshMs) {
      try {
        await this.load(agentId);
      } catch (err) {
        // Without any copy there is nothing to judge by; with a stale one, stale it is.
        if (!entry) throw err;
        this.log(`dataplane: re-reading agent ${agentId} failed: ${(err as Error).message}`);
      }
      entry = this.entries.get(agentId)!;
    }
    const record = entry.record;
    if (!record) return { reason: 'unregistered' };
    if (!this.live(record, this.now())) return { reason: 'stale', heartbeatAt: record.heartbeat_at };
    return { agentId, dataplaneUrl: record.dataplane_url, pool: this.pools.forOrigin(agentId, record.dataplane_url) };
  }

  /**
   * A forward to `agentId` failed before any answer: its next request re-reads the registration
   * (the agent may have restarted on another port), and its connections are dropped.
   */
  suspect(agentId: string): void {
    const entry = this.entries.get(agentId);
    if (entry) entry.readAt = -Infinity;
    this.pools.drop(agentId);
  }

  /** One read per peer at a time. */
  private load(agentId: string): Promise<void> {
    let pending = this.inflight.get(agentId);
    if (!pending) {
      this.reads++;
      pending = this.options
        .load(agentId)
        .then((record) => {
          this.entries.set(agentId, { record, readAt: this.now() });
        })
        .finally(() => this.inflight.delete(agentId));
      this.inflight.set(agentId, pending);
    }
    return pending;
  }

  /** How many peer pools are open. */
  get size(): number {
    return this.pools.size;
  }

  /** Destroys every pool. */
  close(): Promise<void> {
    return this.pools.close();
  }
}
