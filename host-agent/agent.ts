/**
 * The host agent: the only stateful process (docs/architecture.md). Start order: identity, pin check,
 * the supervisor's repair and adoption, internal listener, registration in DynamoDB, heartbeat.
 * `stop()` is idempotent and phased.
 */
import { mkdirSync } from 'node:fs';
import type { Socket } from 'node:net';
import { join, resolve } from 'node:path';
import type { Settings } from '../shared/config.ts';
import { createDb, type Db } from '../shared/db/client.ts';
import { getAgent, heartbeatAgent, registerAgent } from '../shared/db/agents.ts';
import { getProject } from '../shared/db/projects.ts';
import { lookupKey } from '../shared/db/keys.ts';
import { serveFetch, type Served } from '../shared/http/node-http.ts';
import { parseKeyRing } from '../shared/secrets-crypto.ts';
import { nowIso } from '../shared/time.ts';
import type { AgentContext } from './context.ts';
import { agentIdentity } from './identity.ts';
import { createInternalApi, type InternalRoutes } from './internal-api.ts';
import { KeyCache } from './dataplane/key-cache.ts';
import { Peers } from './dataplane/peers.ts';
import { parseCorsOrigins } from '../shared/http/cors.ts';
import { startDataplane } from './dataplane/server.ts';
import { FrontReturn } from './dataplane/handed.ts';
import { publicRealtime } from './realtime/public.ts';
import { publicInvoke } from './functions/public.ts';
import * as keyRoutes from './routes/keys.ts';
import * as functionEnvRoutes from './routes/function-env.ts';
import { RealtimeHub } from './realtime/hub.ts';
import * as realtimeRoutes from './routes/realtime.ts';
import * as blobRoutes from './routes/blobs.ts';
import { createFsBlobStore } from './blobs/fs-store.ts';
import * as lifecycleRoutes from './routes/lifecycle.ts';
import * as logRoutes from './routes/logs.ts';
import * as projectDeleteRoutes from './routes/project-delete.ts';
import * as functionRoutes from './routes/functions.ts';
import { moduleBlobStore } from './functions/modules.ts';
import { FunctionRuntime } from './functions/runtime.ts';
import { sweepLeftovers } from './sweep.ts';
import { AgentMetrics, observeFunctionInvocation, startMetricsListener } from './metrics.ts';
import type { Log } from '../shared/log.ts';
import { within } from './tenants/processes.ts';
import { EngineLaunch } from './tenants/engine-launch.ts';
import { EnginePin } from './tenants/pin.ts';
import { Tenants } from './tenants/tenants.ts';

/** A running agent. */
export interface Agent {
  ctx: AgentContext;
  internalUrl: string;
  /** Where the `/v2` listener answers (registered as the agent's `dataplane_url`). */
  dataplaneUrl: string;
  /** Where `GET /metrics` answers (`SVCD_METRICS_PORT`; docs/observability.md "Metrics"). */
  metricsUrl: string;
  /**
   * Serves a connection the local front accepted and handed over with what it read of it
   * (docs/local-stack.md "One hop for `/v2`"); what the agent does not serve goes back to `origin`.
   */
  adopt(socket: Socket, head: Buffer, origin: string): void;
  stop(): Promise<void>;
}

/** Options for tests and embedders. */
export interface AgentOptions {
  log?: Log;
  db?: Db;
  /** The repository root, against which relative paths in settings resolve. */
  cwd?: string;
}

/** Starts an agent from validated settings. */
export async function startAgent(settings: Settings, options: AgentOptions = {}): Promise<Agent> {
  const cwd = options.cwd ?? process.cwd();
  const log = options.log ?? ((line: string) => console.error(line));
  // Validated before anything starts: a bad key ring fails the start naming its setting.
  const secrets = parseKeyRing(settings);
  const root = resolve(cwd, settings.SVCD_ROOT);
  mkdirSync(root, { recursive: true });
  const engineBin = resolve(cwd, settings.SVCD_ENGINE_BIN);
  const agentId = agentIdentity(root, settings.SVCD_AGENT_ID);
  // Every engine process runs as the engine user in a cgroup of its own (docs/lifecycle.md "Engine
  // isolation"); the pin check runs the binary the same way, so a binary that user cannot run fails it.
  const engineLaunch = new EngineLaunch({ settings, agentId, engineBin, log });
  const pin = await EnginePin.check(engineBin, settings.SVCD_ENGINE_START_TIMEOUT_MS, log, (args) => engineLaunch.command(args, null).argv);
  const db = options.db ?? createDb(settings);
  const now = () => Date.now();
  const realtime = new RealtimeHub({
    maxPerProject: settings.SVCD_REALTIME_MAX_SUBSCRIBERS_PER_PROJECT,
    maxTotal: settings.SVCD_REALTIME_MAX_SUBSCRIBERS,
    queue: settings.SVCD_REALTIME_QUEUE,
    heartbeatMs: settings.SVCD_REALTIME_HEARTBEAT_MS,
    framing: 'http-chunked',
    coalesceMs: settings.SVCD_REALTIME_COALESCE_MS,
    log,
  });
  // Object and module bytes of the `fs` backend (docs/storage.md), one store for the agent's life.
  const blobs = createFsBlobStore(join(root, 'blobs'));
  const moduleBlobs = moduleBlobStore(settings, () => blobs);
  // Project functions (docs/functions.md); their module bytes go to the deployment's blob store.
  const functions = new FunctionRuntime({
    settings,
    db,
    agentId,
    root,
    secrets,
    blobs: () => moduleBlobs,
    log,
    now,
    onInvocation: (outcome, seconds) => observeFunctionInvocation(ctx.metrics, outcome, seconds),
  });
  const tenants = new Tenants({
    settings,
    db,
    agentId,
    root,
    engineBin,
    launch: engineLaunch,
    pin,
    log,
    now,
    emit: (projectId, event, payload) => realtime.emitSystem(projectId, event, payload),
    inFlightInvocations: (projectId) => functions.inFlight(projectId),
  });
  const ctx: AgentContext = {
    settings,
    db,
    agentId,
    root,
    pin,
    log,
    now,
    // A verified key comes with its project's owning agent (placement), so /v2 knows whether to forward.
    keyCache: new KeyCache({
      pepper: settings.SVCD_KEY_PEPPER,
      load: (keyId) => lookupKey(db, keyId),
      placement: async (projectId) => (await getProject(db, projectId))?.agent_id ?? null,
      log,
    }),
    secrets,
    realtime,
    tenants,
    functions,
    // Read at scrape time from what the parts already count (host-agent/metrics.ts).
    metrics: new AgentMetrics({
      runningTenants: () => tenants.runningProjects().length,
      keyCache: () => ctx.keyCache.stats,
      realtime: () => realtime.stats(),
    }),
    blobs,
  };
  // The supervisor repairs, adopts and reconciles before any listener opens.
  const started = now();
  await tenants.start();
  // Then what crashes left behind: local leftovers before any listener opens, the rest beside traffic.
  const sweeping = sweepLeftovers(ctx, started);
  const sweepingFunctions = functions.start();

  // Internal route modules; each area (lifecycle, storage, realtime, secrets) adds its own here.
  const modules: InternalRoutes[] = [realtimeRoutes, functionEnvRoutes, keyRoutes, blobRoutes, lifecycleRoutes, projectDeleteRoutes, logRoutes, functionRoutes];
  const internal = await serveFetch(createInternalApi(ctx, modules), {
    host: settings.SVCD_AGENT_HOST,
    port: settings.SVCD_AGENT_PORT,
    setting: 'SVCD_AGENT_PORT',
    onError: (err) => log(`agent: internal request failed: ${(err as Error).stack ?? err}`),
  });
  realtimeRoutes.attachSubscribeStream(internal.server, ctx);
  functionRoutes.attachInvokeStream(internal.server, ctx);
  const internalUrl = settings.SVCD_AGENT_URL ?? internal.url;
  // The /v2 listener exists before the agent registers, so the URL it advertises is the real one
  // (also with SVCD_DATAPLANE_PORT=0). SVCD_DATAPLANE_URL overrides it behind a proxy.
  const frontReturn = new FrontReturn(log);
  const cors = parseCorsOrigins(settings.SVCD_CORS_ORIGINS);
  const servePublicRealtime = publicRealtime({ ctx, keys: ctx.keyCache, cors, log });
  const servePublicInvoke = publicInvoke({ ctx, keys: ctx.keyCache, cors, log });
  const dataplane = await startDataplane({
    host: settings.SVCD_AGENT_HOST,
    port: settings.SVCD_DATAPLANE_PORT,
    maxBytes: settings.SVCD_DATAPLANE_MAX_BYTES,
    endpoints: ctx.tenants,
    keys: ctx.keyCache,
    log,
    agentId: ctx.agentId,
    peers: new Peers({ load: (id) => getAgent(ctx.db, id), staleMs: settings.SVCD_AGENT_STALE_MS, refreshMs: settings.SVCD_HEARTBEAT_MS, log }),
    cors,
    // A connection handed over by the local front: realtime subscribe and publish, and invocations
    // with a project key, are served here (docs/realtime.md "Through the base URL, locally";
    // docs/functions.md "The path through the service"), the rest goes back to the front.
    handed: (req, res, expectsContinue, origin) => {
      const back = () => frontReturn.send(req, res, expectsContinue, origin);
      if (!servePublicRealtime(req, res, expectsContinue, back) && !servePublicInvoke(req, res, expectsContinue, origin, back)) back();
    },
    // One line and the metrics per /v2 request (docs/observability.md).
    observe: (r) => {
      ctx.metrics.dataplane(r.status, r.seconds, r.bytesIn, r.bytesOut);
      log('request', {
        level: 'info',
        event: 'request',
        request_id: r.requestId,
        method: r.method,
        route: '/v2/:path+',
        status: r.status,
        duration_ms: Math.round(r.seconds * 10_000) / 10,
        ...(r.projectId ? { project_id: r.projectId } : {}),
      });
    },
  }).catch(async (err: unknown) => {
    await internal.close();
    throw err;
  });
  // Prometheus on a listener of its own, never the public origin (docs/deploy.md "Every setting").
  const metricsListener = await startMetricsListener(ctx.metrics, settings.SVCD_AGENT_HOST, settings.SVCD_METRICS_PORT).catch(async (err: unknown) => {
    await Promise.all([internal.close(), dataplane.close()]);
    throw err;
  });
  const dataplaneUrl = settings.SVCD_DATAPLANE_URL ?? dataplane.url;
  // An engine that exits takes its connections with it: drop its pool at once.
  ctx.tenants.onExit((projectId) => dataplane.engineExited(projectId));

  const startedAt = nowIso();
  await registerAgent(ctx.db, {
    agent_id: ctx.agentId,
    internal_url: internalUrl,
    dataplane_url: dataplaneUrl,
    capacity: settings.SVCD_AGENT_CAPACITY,
    pin_ok: pin.ok,
    engine_version: pin.engineVersion(),
    started_at: startedAt,
    heartbeat_at: startedAt,
  });

  const heartbeat = setInterval(() => {
    heartbeatAgent(ctx.db, ctx.agentId, nowIso(), ctx.pin.ok).catch((err) =>
      log(`agent: heartbeat failed: ${(err as Error).message}`),
    );
  }, settings.SVCD_HEARTBEAT_MS);
  heartbeat.unref();

  let stopping: Promise<void> | undefined;
  const servers: Served[] = [internal, dataplane, metricsListener];
  return {
    ctx,
    internalUrl,
    dataplaneUrl,
    metricsUrl: metricsListener.url,
    adopt: (socket, head, origin) => dataplane.adopt(socket, head, origin),
    stop() {
      stopping ??= (async () => {
        clearInterval(heartbeat);
        ctx.realtime.close();
        await Promise.all([...servers.map((s) => s.close()), frontReturn.close()]);
        // A sweep still reading DynamoDB is let finish (bounded): it removes only what it judged.
        await within(sweeping, 5000);
        await within(sweepingFunctions, 5000);
        // Function workers end with the agent (an invocation in flight is lost, never replayed).
        await ctx.functions.stop();
        // Then every engine, gracefully, each under the stop timeout; their states recorded `sleeping`.
        await ctx.tenants.stopAll();
      })();
      return stopping;
    },
  };
}
