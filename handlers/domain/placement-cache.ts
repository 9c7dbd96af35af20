/**
 * The hints a handlers isolate keeps between requests: where a project is placed, agent records it
 * read lately, and which account owns a project. None of them ever decides an answer on its own
 * (docs/architecture.md "Pieces"): each is compared with, or stands in for a moment instead of, a
 * read that the caller still makes when it matters.
 *
 * One LRU (lru-cache) for the three kinds, bounded by `maxEntries` and evicting the least recently
 * used entry, so a hot project's hints survive a sweep over many cold ones.
 */
import { LRUCache } from 'lru-cache';
import type { AgentRecord } from '../../shared/db/agents.ts';

/** Bound on the entries of a cache built without `maxEntries`. */
export const PLACEMENT_CACHE_MAX_ENTRIES = 10_000;

type Entry =
  | { kind: 'placement'; agentId: string }
  | { kind: 'owner'; accountId: string }
  | { kind: 'agent'; record: AgentRecord; readAt: number };

/** Hints this isolate remembers; never a substitute for a check (docs/architecture.md). */
export class PlacementCache {
  private readonly entries: LRUCache<string, Entry>;
  private readonly now: () => number;

  constructor(options: { maxEntries?: number; now?: () => number } = {}) {
    this.entries = new LRUCache({ max: Math.max(1, options.maxEntries ?? PLACEMENT_CACHE_MAX_ENTRIES) });
    this.now = options.now ?? (() => Date.now());
  }

  /** Agent id hosting `projectId`, if remembered. */
  placementOf(projectId: string): string | undefined {
    const entry = this.get(`p:${projectId}`);
    return entry?.kind === 'placement' ? entry.agentId : undefined;
  }

  /** Agent record read within `maxAgeMs`, if remembered. */
  agentRecord(agentId: string, maxAgeMs: number): AgentRecord | undefined {
    const entry = this.get(`a:${agentId}`);
    if (entry?.kind !== 'agent' || this.now() - entry.readAt > maxAgeMs) return undefined;
    return entry.record;
  }

  /** Account owning `projectId`, if remembered. */
  ownerOf(projectId: string): string | undefined {
    const entry = this.get(`o:${projectId}`);
    return entry?.kind === 'owner' ? entry.accountId : undefined;
  }

  /** Remembers that `projectId` is hosted by `agentId`. */
  rememberPlacement(projectId: string, agentId: string): void {
    this.set(`p:${projectId}`, { kind: 'placement', agentId });
  }

  /** Remembers an agent record as read now. */
  rememberAgent(record: AgentRecord): void {
    this.set(`a:${record.agent_id}`, { kind: 'agent', record, readAt: this.now() });
  }

  /** Remembers that `accountId` owns `projectId`. */
  rememberOwner(projectId: string, accountId: string): void {
    this.set(`o:${projectId}`, { kind: 'owner', accountId });
  }

  /**
   * Forgets what is remembered of a deleted project (docs/lifecycle.md "Deleting a project"), so no
   * request of this isolate starts on it before its project is read (an early blob write).
   */
  forgetProject(projectId: string): void {
    this.entries.delete(`p:${projectId}`);
    this.entries.delete(`o:${projectId}`);
  }

  /** Forgets an agent's record (it did not answer). */
  forgetAgent(agentId: string): void {
    this.entries.delete(`a:${agentId}`);
  }

  private get(key: string): Entry | undefined {
    return this.entries.get(key);
  }

  private set(key: string, entry: Entry): void {
    this.entries.set(key, entry);
  }
}
