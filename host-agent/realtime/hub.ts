/**
 * The realtime hub of one host agent (docs/realtime.md "Inside the host agent"): an in-memory fanout that assigns
 * each event its `id` (one sequence per process, starting at 1) and its `ts`, and writes it to the
 * current subscribers of that project's channel. Nothing is durable: a restart drops every subscriber
 * and resets the sequence (contract "Events" 2).
 *
 * Fanout cost is what matters here: an event is serialised once into one Buffer that every subscriber
 * of the channel shares, and written straight to each subscriber's socket. A subscriber whose socket
 * stops draining gets a bounded queue of references to those shared Buffers; past the bound it is cut
 * off with a final `event: overflow` and forgotten, so it can neither slow the others nor grow memory.
 */
import { errors } from '../../shared/errors.ts';
import { payloadJson, type RealtimeEvent, type SystemEvent } from '../../shared/realtime/events.ts';
import { SYSTEM_CHANNEL } from '../../shared/schemas/realtime.ts';
import { nowIso } from '../../shared/time.ts';
import { commentFrame, eventFrame, type Framing } from './sse.ts';
import { Subscriber, type FrameSink } from './subscriber.ts';

export type { FrameSink } from './subscriber.ts';

/** Limits and timings of a hub. */
export interface HubOptions {
  /** SVCD_REALTIME_MAX_SUBSCRIBERS_PER_PROJECT */
  maxPerProject: number;
  /** SVCD_REALTIME_MAX_SUBSCRIBERS: across every project of this agent. */
  maxTotal: number;
  /** SVCD_REALTIME_QUEUE: frames a subscriber may have waiting beyond what its socket accepted. */
  queue: number;
  /** SVCD_REALTIME_HEARTBEAT_MS: interval of the `: heartbeat` comment (0 disables). */
  heartbeatMs: number;
  /** How long an overflowed subscriber's socket may take to flush its final frame before it is destroyed. */
  overflowGraceMs?: number;
  /**
   * Least time between two writes to one socket while events keep coming (docs/realtime.md
   * "Fanout"): frames that arrive sooner wait, corked, and leave together. 0: at the end of the
   * event-loop turn they were published in.
   */
  coalesceMs?: number;
  /** `http-chunked` when sinks are sockets of chunked HTTP/1.1 responses (the agent); `raw` by default. */
  framing?: Framing;
  now?: () => number;
  log?: (line: string) => void;
}

/** Counters for tests, the benchmark and health output. */
export interface HubStats {
  subscribers: number;
  projects: number;
  /** Frames waiting in subscriber queues right now. */
  queued: number;
  /** The longest any subscriber queue has been since start. */
  maxQueued: number;
  /** Subscribers cut off with `overflow` since start. */
  overflows: number;
  /** The last event id assigned (0 before the first event). */
  lastId: number;
  /** Events published and frames handed to sockets since start. */
  published: number;
  deliveries: number;
}

/** One published event and its wire forms. */
export interface Published {
  event: RealtimeEvent;
  /** The event as delivered, as JSON: the publish answer and the `data:` line share it. */
  json: string;
  /** How many subscribers it was handed to. */
  receivers: number;
}

/** Sockets uncorked per event-loop turn by a flush (see `RealtimeHub.uncorkFrom`). */
const FLUSH_SLICE = 100;

/** Per-project subscriber sets, one per channel. */
interface ProjectSubscribers {
  count: number;
  channels: Map<string, Set<Subscriber>>;
}

/** The hub. One per agent process, created in startAgent and kept in AgentContext.realtime. */
export class RealtimeHub {
  readonly queueLimit: number;
  readonly overflowGraceMs: number;
  private readonly options: HubOptions;
  private readonly now: () => number;
  private readonly log: (line: string) => void;
  private readonly projects = new Map<string, ProjectSubscribers>();
  private readonly all = new Set<Subscriber>();
  private readonly heartbeat: NodeJS.Timeout | null;
  private readonly heartbeatFrame: Buffer;
  private readonly framing: Framing;
  private readonly coalesceMs: number;
  private corked: Subscriber[] = [];
  private flushScheduled = false;
  private lastFlush = -Infinity;
  private seq = 0;
  private counters = { maxQueued: 0, overflows: 0, published: 0, deliveries: 0 };

  constructor(options: HubOptions) {
    this.options = options;
    this.queueLimit = options.queue;
    this.overflowGraceMs = options.overflowGraceMs ?? 30_000;
    this.now = options.now ?? Date.now;
    this.log = options.log ?? (() => {});
    this.framing = options.framing ?? 'raw';
    this.coalesceMs = options.coalesceMs ?? 0;
    this.heartbeatFrame = commentFrame('heartbeat', this.framing);
    this.heartbeat = options.heartbeatMs > 0 ? setInterval(() => this.beat(), options.heartbeatMs) : null;
    this.heartbeat?.unref();
  }

  /**
   * Assigns the next id and `ts` to an event and fans it out to the project's subscribers of
   * `channel`. The caller has validated channel and event names; the payload limit is enforced here.
   */
  publish(projectId: string, channel: string, event: string, payload: unknown): Published {
    const payloadText = payloadJson(payload);
    const id = ++this.seq;
    const ts = nowIso(this.now());
    const json = `{"id":${id},"channel":${JSON.stringify(channel)},"event":${JSON.stringify(event)},"payload":${payloadText},"ts":"${ts}"}`;
    const delivered: RealtimeEvent = { id, channel, event, payload: payload === undefined ? null : payload, ts };
    this.counters.published++;
    const set = this.projects.get(projectId)?.channels.get(channel);
    if (!set || set.size === 0) return { event: delivered, json, receivers: 0 };
    const frame = this.frame(id, event, json);
    const receivers = set.size;
    for (const sub of set) sub.send(frame);
    this.counters.deliveries += receivers;
    return { event: delivered, json, receivers };
  }

  /**
   * Emits a lifecycle event on the project's `system` channel (`project.running`, `project.sleeping`,
   * `snapshot.created`, `project.restored`). Never throws: a lifecycle operation must not fail because
   * nobody could be told about it.
   */
  emitSystem(projectId: string, event: SystemEvent, payload: unknown): RealtimeEvent | null {
    try {
      return this.publish(projectId, SYSTEM_CHANNEL, event, payload).event;
    } catch (err) {
      this.log(`realtime: system event ${event} for ${projectId} not emitted: ${(err as Error).message}`);
      return null;
    }
  }

  /** Refuses a new subscriber beyond the per-project or per-agent limit (docs/realtime.md). */
  admit(projectId: string): void {
    const inProject = this.projects.get(projectId)?.count ?? 0;
    if (inProject >= this.options.maxPerProject) {
      throw errors.conflict(
        `project ${projectId} already has ${inProject} realtime subscribers, the most allowed; close one and retry`,
      );
    }
    if (this.all.size >= this.options.maxTotal) {
      throw errors.orchestrator(`this host has reached its limit of ${this.options.maxTotal} realtime subscribers; retry later`);
    }
  }

  /**
   * Registers an open stream for `channels` of a project. The caller has already written the
   * response head; the subscriber is detached when the sink closes. `keyId` names the project key
   * that authenticated it, so revoking that key can end it.
   */
  subscribe(projectId: string, channels: readonly string[], sink: FrameSink, keyId: string | null = null): Subscriber {
    this.admit(projectId);
    const sub = new Subscriber(this, sink, projectId, channels, keyId);
    let project = this.projects.get(projectId);
    if (!project) {
      project = { count: 0, channels: new Map() };
      this.projects.set(projectId, project);
    }
    project.count++;
    for (const channel of channels) {
      let set = project.channels.get(channel);
      if (!set) project.channels.set(channel, (set = new Set()));
      set.add(sub);
    }
    this.all.add(sub);
    return sub;
  }

  /** Removes a subscriber from every set (idempotent). */
  detach(sub: Subscriber, why?: 'overflow'): void {
    if (!this.all.delete(sub)) return;
    sub.closed = true;
    if (why === 'overflow') this.counters.overflows++;
    const project = this.projects.get(sub.projectId);
    if (!project) return;
    project.count--;
    for (const channel of sub.channels) {
      const set = project.channels.get(channel);
      if (!set) continue;
      set.delete(sub);
      if (set.size === 0) project.channels.delete(channel);
    }
    if (project.count === 0) this.projects.delete(sub.projectId);
  }

  /** Ends every stream authenticated by a project key (called when the key is revoked). */
  closeKey(keyId: string): number {
    let n = 0;
    for (const sub of [...this.all]) {
      if (sub.keyId === keyId) {
        sub.end();
        n++;
      }
    }
    return n;
  }

  /** Ends every stream of a project, whoever opened it (called when the project is deleted). */
  closeProject(projectId: string): number {
    let n = 0;
    for (const sub of [...this.all]) {
      if (sub.projectId === projectId) {
        sub.end();
        n++;
      }
    }
    return n;
  }

  /** An event frame in this hub's framing. */
  frame(id: number | null, event: string, data: string): Buffer {
    return eventFrame(id, event, data, this.framing);
  }

  /** A comment frame in this hub's framing (the opening line of a stream). */
  comment(text: string): Buffer {
    return commentFrame(text, this.framing);
  }

  /**
   * Uncorks `sub` at the next flush: at the end of this turn, or `coalesceMs` after the last flush
   * when that is later (events that keep coming leave in batches, one write per socket each).
   */
  uncorkLater(sub: Subscriber): void {
    this.corked.push(sub);
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    const wait = this.lastFlush + this.coalesceMs - performance.now();
    if (wait > 0) setTimeout(this.flush, wait);
    else setImmediate(this.flush);
  }

  private readonly flush = (): void => {
    const corked = this.corked;
    this.corked = [];
    this.flushScheduled = false;
    this.lastFlush = performance.now();
    this.uncorkFrom(corked, 0);
  };

  /**
   * Uncorks `corked` from `from` on, `FLUSH_SLICE` sockets per turn: between slices the event loop
   * reads what arrived (a publish, its DynamoDB answer), so a flush to a thousand sockets never holds
   * a publish back for all of its writes. A socket not reached yet stays corked: frames sent to it
   * meanwhile join the ones waiting, in order.
   */
  private uncorkFrom(corked: Subscriber[], from: number): void {
    const end = Math.min(corked.length, from + FLUSH_SLICE);
    for (let i = from; i < end; i++) corked[i]!.uncork();
    if (end < corked.length) setImmediate(() => this.uncorkFrom(corked, end));
  }

  /** Records the length a queue reached. */
  noteQueued(length: number): void {
    if (length > this.counters.maxQueued) this.counters.maxQueued = length;
  }

  /** Current counters. */
  stats(): HubStats {
    let queued = 0;
    for (const sub of this.all) queued += sub.queued;
    return { subscribers: this.all.size, projects: this.projects.size, queued, lastId: this.seq, ...this.counters };
  }

  private beat(): void {
    for (const sub of this.all) sub.heartbeat(this.heartbeatFrame);
  }

  /** Stops the heartbeat and ends every stream (agent shutdown). */
  close(): void {
    if (this.heartbeat) clearInterval(this.heartbeat);
    for (const sub of [...this.all]) sub.end();
  }
}
