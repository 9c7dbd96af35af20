/**
 * The host agent's Prometheus metrics (docs/observability.md "Metrics"), with prom-client on a
 * registry of its own, served at `GET /metrics` on a listener of its own (`SVCD_METRICS_PORT`),
 * never on the public origin. Names follow Prometheus conventions: base units (seconds, bytes),
 * `_total` for counters, and no label whose values grow with the number of projects.
 *
 * Figures the agent already keeps (running engines, the key cache's hits and loads, the realtime
 * hub's counters) are read when scraped, so the `/v2` and fanout hot paths pay nothing for them;
 * the rest are observed where they happen (`lifecycle`, `dataplane`, `blobWritten`,
 * `observeFunctionInvocation`).
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { errors } from '../shared/errors.ts';
import { newRequestId } from '../shared/ids.ts';
import { answerError, SERVER_OPTIONS, startServed } from '../shared/http/node-http.ts';
import type { Served } from '../shared/http/node-http.ts';
import type { ListenerSource } from '../shared/http/held-listeners.ts';
import type { Log } from '../shared/log.ts';

/** Lifecycle operations whose duration is observed. */
export type LifecycleOperation = 'wakeup' | 'sleep' | 'snapshot' | 'restore';

/** How a function invocation ended (docs/observability.md "Metrics"; the `function_*` error codes). */
export type FunctionOutcome = 'ok' | 'error' | 'timeout' | 'bad_output' | 'busy' | 'runtime_missing';

/** What the agent already counts, read at scrape time. */
export interface MetricSources {
  runningTenants(): number;
  keyCache(): { hits: number; loads: number };
  realtime(): { subscribers: number; published: number; deliveries: number; overflows: number };
}

/** Buckets of operations that take from milliseconds (a warm wakeup) to minutes (a large restore). */
const LIFECYCLE_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];
/** Buckets of `/v2` requests: sub-millisecond forwarding to seconds-long queries. */
const REQUEST_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** The metrics of one agent. */
export class AgentMetrics {
  readonly registry = new Registry();
  readonly #lifecycle: Histogram<'operation' | 'outcome'>;
  readonly #requests: Counter<'status'>;
  readonly #requestSeconds: Histogram;
  readonly #bytesIn: Counter;
  readonly #bytesOut: Counter;
  readonly #blobBytes: Counter;
  readonly #invocations: Counter<'outcome'>;
  readonly #invocationSeconds: Histogram<'outcome'>;

  constructor(sources: MetricSources) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });
    new Gauge({
      name: 'svc_agent_tenants_running',
      help: 'Tenants with a running engine on this agent.',
      registers,
      collect() {
        this.set(sources.runningTenants());
      },
    });
    this.#lifecycle = new Histogram({
      name: 'svc_agent_lifecycle_duration_seconds',
      help: 'Duration of lifecycle operations (wakeup, sleep, snapshot, restore) by outcome.',
      labelNames: ['operation', 'outcome'],
      buckets: LIFECYCLE_BUCKETS,
      registers,
    });
    this.#requests = new Counter({ name: 'svc_dataplane_requests_total', help: '/v2 requests answered, by HTTP status.', labelNames: ['status'], registers });
    this.#requestSeconds = new Histogram({
      name: 'svc_dataplane_request_duration_seconds',
      help: 'Duration of /v2 requests, from the request head to the end of the answer.',
      buckets: REQUEST_BUCKETS,
      registers,
    });
    this.#bytesIn = new Counter({ name: 'svc_dataplane_received_bytes_total', help: 'Bytes received on /v2 connections (heads and bodies).', registers });
    this.#bytesOut = new Counter({ name: 'svc_dataplane_sent_bytes_total', help: 'Bytes sent on /v2 connections (heads and bodies).', registers });
    fromSource('svc_dataplane_key_cache_hits_total', 'Project keys verified from the cache.', () => sources.keyCache().hits, registers);
    fromSource('svc_dataplane_key_cache_misses_total', 'Project keys read from DynamoDB (not cached, or re-read).', () => sources.keyCache().loads, registers);
    new Gauge({
      name: 'svc_realtime_subscribers',
      help: 'Open realtime subscriptions on this agent.',
      registers,
      collect() {
        this.set(sources.realtime().subscribers);
      },
    });
    fromSource('svc_realtime_published_total', 'Realtime events published (lifecycle events included).', () => sources.realtime().published, registers);
    fromSource('svc_realtime_deliveries_total', 'Realtime events handed to subscribers.', () => sources.realtime().deliveries, registers);
    fromSource('svc_realtime_overflow_disconnects_total', 'Subscribers cut off because their queue was full.', () => sources.realtime().overflows, registers);
    this.#blobBytes = new Counter({ name: 'svc_blob_written_bytes_total', help: 'Object bytes written to this agent\'s fs blob store.', registers });
    this.#invocations = new Counter({ name: 'svc_function_invocations_total', help: 'Function invocations by outcome.', labelNames: ['outcome'], registers });
    this.#invocationSeconds = new Histogram({
      name: 'svc_function_invocation_duration_seconds',
      help: 'Duration of function invocations by outcome.',
      labelNames: ['outcome'],
      buckets: REQUEST_BUCKETS,
      registers,
    });
  }

  /** A lifecycle operation took `seconds`, and succeeded or not. */
  lifecycle(operation: LifecycleOperation, outcome: 'ok' | 'error', seconds: number): void {
    this.#lifecycle.observe({ operation, outcome }, seconds);
  }

  /** A `/v2` request was answered. */
  dataplane(status: number, seconds: number, bytesIn: number, bytesOut: number): void {
    this.#requests.inc({ status: String(status) });
    this.#requestSeconds.observe(seconds);
    if (bytesIn > 0) this.#bytesIn.inc(bytesIn);
    if (bytesOut > 0) this.#bytesOut.inc(bytesOut);
  }

  /** `bytes` were written to the fs blob store. */
  blobWritten(bytes: number): void {
    if (bytes > 0) this.#blobBytes.inc(bytes);
  }

  /** A function invocation ended (see `observeFunctionInvocation`). */
  functionInvocation(outcome: FunctionOutcome, seconds: number): void {
    this.#invocations.inc({ outcome });
    this.#invocationSeconds.observe({ outcome }, seconds);
  }

  /** The exposition text and its content type. */
  async exposition(): Promise<{ type: string; body: string }> {
    return { type: this.registry.contentType, body: await this.registry.metrics() };
  }
}

/**
 * Records one function invocation: its outcome and how long it took, in seconds. For the function
 * runtime (host-agent/functions/), which calls it once per invocation, whatever its end.
 */
export function observeFunctionInvocation(metrics: AgentMetrics, outcome: FunctionOutcome, seconds: number): void {
  metrics.functionInvocation(outcome, seconds);
}

/** A counter whose value is a running total kept elsewhere, read at scrape time. */
function fromSource(name: string, help: string, read: () => number, registers: Registry[]): void {
  new Counter({
    name,
    help,
    registers,
    collect() {
      this.reset();
      const value = read();
      if (value > 0) this.inc(value);
    },
  });
}

/**
 * Serves `GET /metrics` (and HEAD) on host:port; anything else is the 404 envelope. A listener of
 * its own, so a deployment keeps it off the public origin (docs/deploy.md "Every setting").
 */
export async function startMetricsListener(metrics: AgentMetrics, host: string, port: number, held?: ListenerSource): Promise<Served> {
  const server = createServer(SERVER_OPTIONS, (req: IncomingMessage, res: ServerResponse) => {
    const path = (req.url ?? '/').split('?', 1)[0];
    if (path !== '/metrics' || (req.method !== 'GET' && req.method !== 'HEAD')) {
      return answerError(req, res, errors.notFound(`no route for ${req.method} ${path}: this listener serves GET /metrics only`), newRequestId());
    }
    metrics.exposition().then(
      ({ type, body }) => {
        res.writeHead(200, { 'content-type': type, 'content-length': Buffer.byteLength(body), 'cache-control': 'no-store' });
        res.end(req.method === 'HEAD' ? undefined : body);
      },
      (err: unknown) => answerError(req, res, err, newRequestId()),
    );
  });
  return startServed(server, host, port, 'SVCD_METRICS_PORT', held);
}

/**
 * Runs a lifecycle operation, observing its duration and logging it as an event with its outcome
 * (docs/observability.md "Lifecycle events"); answers or throws what the operation does.
 */
export async function timedOperation<T>(
  parts: { metrics: AgentMetrics; log: Log },
  operation: LifecycleOperation,
  fields: { projectId: string; requestId: string | null },
  run: () => Promise<T>,
): Promise<T> {
  const started = performance.now();
  const done = (outcome: 'ok' | 'error', err?: unknown) => {
    const seconds = (performance.now() - started) / 1000;
    parts.metrics.lifecycle(operation, outcome, seconds);
    parts.log(`${operation} ${outcome === 'ok' ? 'done' : 'failed'}`, {
      level: outcome === 'ok' ? 'info' : 'warn',
      event: operation,
      outcome,
      project_id: fields.projectId,
      ...(fields.requestId ? { request_id: fields.requestId } : {}),
      duration_ms: Math.round(seconds * 10_000) / 10,
      ...(err === undefined ? {} : { err }),
    });
  };
  try {
    const result = await run();
    done('ok');
    return result;
  } catch (err) {
    done('error', err);
    throw err;
  }
}
