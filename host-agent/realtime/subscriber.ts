/**
 * One open event stream of the realtime hub (./hub.ts; docs/realtime.md "Inside the host agent"):
 * frames handed straight to its socket, corked until the hub's next flush; a bounded queue of
 * references to the shared frames while the socket is not draining; past the bound, a last
 * `event: overflow` and the end.
 */

/**
 * Where a subscriber's frames go: the socket of an SSE response in production (host-agent/routes/
 * realtime.ts), any Node writable in tests. `write` answers false once the destination buffers more
 * than it wants (Node's backpressure signal); `end` hands a last frame and ends the stream.
 */
export interface FrameSink {
  write(chunk: Uint8Array): boolean;
  readonly writableLength: number;
  readonly writableHighWaterMark: number;
  cork(): void;
  uncork(): void;
  end(last?: Uint8Array): unknown;
  destroy(): unknown;
  once(event: 'drain' | 'close', listener: () => void): unknown;
}

/** What a subscriber needs of its hub. */
export interface SubscriberHub {
  /** Frames one subscriber may have queued before it is cut off. */
  readonly queueLimit: number;
  /** How long a cut-off subscriber's socket has to take its last frame. */
  readonly overflowGraceMs: number;
  detach(sub: Subscriber, why?: 'overflow'): void;
  uncorkLater(sub: Subscriber): void;
  noteQueued(length: number): void;
  frame(id: number | null, event: string, data: string): Buffer;
}

/** One open event stream. */
export class Subscriber {
  readonly projectId: string;
  readonly channels: readonly string[];
  readonly keyId: string | null;
  private readonly hub: SubscriberHub;
  private readonly sink: FrameSink;
  // Frames the socket has not accepted yet: `slots` from `head` on (a queue without shift()).
  private slots: Buffer[] = [];
  private head = 0;
  private congested = false;
  private corked = false;
  closed = false;

  constructor(hub: SubscriberHub, sink: FrameSink, projectId: string, channels: readonly string[], keyId: string | null) {
    this.hub = hub;
    this.sink = sink;
    this.projectId = projectId;
    this.channels = channels;
    this.keyId = keyId;
    sink.once('close', () => this.hub.detach(this));
  }

  get queued(): number {
    return this.slots.length - this.head;
  }

  /**
   * Hands one frame to the socket, or queues it while the socket is not draining. The socket is
   * corked until the hub's next flush (the end of this event-loop turn, or `coalesceMs` after the
   * last flush while events keep coming), so whoever published goes on at once and the frames of a
   * burst leave in one writev per socket.
   */
  send(frame: Buffer): void {
    if (this.closed) return;
    if (!this.congested) {
      if (!this.corked) {
        this.corked = true;
        this.sink.cork();
        this.hub.uncorkLater(this);
      }
      if (!this.sink.write(frame)) {
        // The cork holds this turn's frames: let them go now, and wait only if the socket itself is full.
        this.uncork();
        if (this.sink.writableLength >= this.sink.writableHighWaterMark) this.wait();
      }
      return;
    }
    if (this.queued >= this.hub.queueLimit) {
      this.overflow();
      return;
    }
    this.slots.push(frame);
    this.hub.noteQueued(this.queued);
  }

  /** Lets the corked frames go (the hub's flush; also after the subscriber closed). */
  uncork(): void {
    if (!this.corked) return;
    this.corked = false;
    this.sink.uncork();
  }

  /** A heartbeat only goes to a subscriber whose socket is draining: a queued one has data coming. */
  heartbeat(frame: Buffer): void {
    if (!this.closed && !this.congested) this.send(frame);
  }

  private wait(): void {
    this.congested = true;
    this.sink.once('drain', this.onDrain);
  }

  private readonly onDrain = (): void => {
    if (this.closed) return;
    this.congested = false;
    this.sink.cork();
    while (this.head < this.slots.length) {
      const frame = this.slots[this.head]!;
      this.slots[this.head++] = undefined as never;
      if (!this.sink.write(frame)) {
        this.wait();
        break;
      }
    }
    this.sink.uncork();
    if (this.head === this.slots.length) {
      this.slots = [];
      this.head = 0;
    } else if (this.head > 1024 && this.head * 2 > this.slots.length) {
      this.slots = this.slots.slice(this.head);
      this.head = 0;
    }
  };

  /** Cuts the subscriber off: the queue is dropped, `event: overflow` is the last frame it will get. */
  private overflow(): void {
    const dropped = this.queued + 1;
    this.release();
    this.hub.detach(this, 'overflow');
    this.sink.end(this.hub.frame(null, 'overflow', JSON.stringify({ reason: 'subscriber queue full', queue: this.hub.queueLimit, dropped })));
    // A reader that never reads again never lets `end` finish: the socket goes after a grace period.
    const timer = setTimeout(() => this.sink.destroy(), this.hub.overflowGraceMs);
    timer.unref();
    this.sink.once('close', () => clearTimeout(timer));
  }

  /** Ends the stream cleanly (agent shutdown, revoked key). */
  end(): void {
    if (this.closed) return;
    this.release();
    this.hub.detach(this);
    this.sink.end();
  }

  private release(): void {
    this.closed = true;
    this.slots = [];
    this.head = 0;
  }
}
