/**
 * The host agent: the only stateful process (docs/architecture.md). Start order: identity, pin check,
 * the supervisor's repair and adoption, internal listener, registration in DynamoDB, heartbeat.
 * `stop()` is idempotent and phased.
 */
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Settings } from '../shared/config.ts';
import { createDb, type Db } from '../shared/db/client.ts';
import { getAgent, heartbeatAgent, registerAgent } from '../shared/db/agents.ts';
import { getProject } from '../shared/db/projects.ts';
import { lookupKey } from '../shared/db/keys.ts';
import { serveFetch, type Served } from '../shared/http/node-http.ts';
import type { ListenerSource } from '../shared/http/held-listeners.ts';
import type { RelayTargets } from '../shared/http/relay.ts';
import { parseKeyRing } from '../shared/secrets-crypto.ts';
import { nowIso } from '../shared/time.ts';
import type { AgentContext } from './context.ts';
import { agentIdentity } from './identity.ts';
import { createInternalApi, type InternalRoutes } from './internal-api.ts';
import { InternalTokens } from './internal-auth.ts';
import { KeyCache } from './dataplane/key-cache.ts';
import { Peers } from './dataplane/peers.ts';
import { parseCorsOrigins } from '../shared/http/cors.ts';
import { startDataplane, type Dataplane } from './dataplane/server.ts';
import { publicRealtime } from './realtime/public.ts';
import { publicInvoke } from './functions/public.ts';
import * as keyRoutes from './routes/keys.ts';
import * as functionEnvRoutes from './routes/function-env.ts';
import { RealtimeHub } from './realtime/hub.ts';
import * as realtimeRoutes from './routes/realtime.ts';
import * as blobRoutes from './routes/blobs.ts';
import * as resumableRoutes from './routes/resumable.ts';
import { createFsBlobStore } from './blobs/fs-store.ts';
import * as lifecycleRoutes from './routes/lifecycle.ts';
import * as archiveRoutes from './routes/archive.ts';
import * as moveRoutes from './routes/moves.ts';
import { sweepBeforeServing, tellMoved, watchLostAgents } from './moves/index.ts';
import * as logRoutes from './routes/logs.ts';
import * as projectDeleteRoutes from './routes/project-delete.ts';
import * as functionRoutes from './routes/functions.ts';
import { moduleBlobStore } from './functions/modules.ts';
import { FunctionRuntime } from './functions/runtime.ts';
import { sweepBlobTempPeriodically, sweepLeftovers } from './sweep.ts';
import { sweepUploadsPeriodically } from './blobs/resumable-sweep.ts';
import { AgentMetrics, observeFunctionInvocation, startMetricsListener } from './metrics.ts';
import type { Log } from '../shared/log.ts';
import { within } from './tenants/processes.ts';
import { EngineLaunch } from './tenants/engine-launch.ts';
import { EnginePin } from './tenants/pin.ts';
import { Tenants } from './tenants/tenants.ts';
import { AutoBackups } from './tenants/auto-backup.ts';
import { IdleSleeper } from './tenants/idle.ts';
import { Backups } from './backups/backups.ts';
import { openBackupStore } from './backups/store.ts';
import { engineOwner } from './backups/import-restore.ts';

/** A running agent. */
export interface Agent {
  ctx: AgentContext;
  internalUrl: string;
  /** Where the `/v2` listener answers (registered as the agent's `dataplane_url`). */
  dataplaneUrl: string;
  /** Where `GET /metrics` answers (`SVCD_METRICS_PORT`; docs/observability.md "Metrics"). */
  metricsUrl: string;
  stop(): Promise<void>;
}

/** Options for tests and embedders. */
export interface AgentOptions {
  log?: Log;
  db?: Db;
  /** The repository root, against which relative paths in settings resolve. */
  cwd?: string;
  /** Listeners the supervisor holds and passes on (the local stack, docs/local-stack.md "Ports"). */
  held?: ListenerSource;
  /**
   * Serve the local stack's one origin on the held `SVCD_PORT` (docs/local-stack.md "One origin"):
   * where it relays what the agent does not serve itself, and the public URL clients reach.
   */
  origin?: { targets: RelayTargets; url: string };
}

/** The realtime hub of the agent's projects (docs/realtime.md). */
function realtimeHub(settings: Settings, log: Log): RealtimeHub {
  return new RealtimeHub({
    maxPerProject: settings.SVCD_REALTIME_MAX_SUBSCRIBERS_PER_PROJECT,
    maxTotal: settings.SVCD_REALTIME_MAX_SUBSCRIBERS,
    queue: settings.SVCD_REALTIME_QUEUE,
    heartbeatMs: settings.SVCD_REALTIME_HEARTBEAT_MS,
    framing: 'http-chunked',
    coalesceMs: settings.SVCD_REALTIME_COALESCE_MS,
    log,
  });
}

/**
 * After a sleep, a snapshot when the data changed, shipped, the oldest automatic ones pruned through
 * the deletion the snapshot route uses (docs/lifecycle.md "Automatic sleep and backups"). `ctx` is
 * complete by the time a sleep runs.
 */
function automaticBackups(db: Db, agentId: string, log: Log, ctx: () => AgentContext): AutoBackups {
  return new AutoBackups({
    db,
    agentId,
    log,
    ship: (projectId, snapshotId) => ctx().backups.ship(projectId, snapshotId),
    shipLater: (projectId, snapshotId) => ctx().backups.shipInBackground(projectId, snapshotId),
    deleteSnapshot: async (projectId, snapshotId, deletion) => {
      await ctx().tenants.deleteSnapshot(projectId, snapshotId, deletion);
      await ctx().backups.removeQuietly(projectId, snapshotId);
    },
  });
}

/** The agent's parts, before any listener opens: identity, pin check, hub, functions, tenants. */
async function buildContext(settings: Settings, options: AgentOptions, log: Log): Promise<{ ctx: AgentContext; pin: EnginePin }> {
  const cwd = options.cwd ?? process.cwd();
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
  const realtime = realtimeHub(settings, log);
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
    fetchBackup: (projectId, snapshotId, dir) => ctx.backups.fetchInto(projectId, snapshotId, dir, { check: false }),
    afterSleep: (projectId, turn) => autoBackups.afterSleep(projectId, turn),
  });
  const autoBackups = automaticBackups(db, agentId, log, () => ctx);
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
    internalTokens: new InternalTokens(settings.SVCD_INTERNAL_SECRET),
    backups: new Backups({ store: openBackupStore(settings, { log, now }, cwd), db, agentId, layout: tenants.layout, log, now, giveToEngine: engineOwner(tenants) }),
  };
  // Loudly: an agent without a store keeps every snapshot on this machine only (docs/lifecycle.md "Off-machine copies").
  if (!ctx.backups.available) log('agent: warning: snapshots are not copied off this machine: SVCD_BLOB_BACKEND is fs and SVCD_BACKUP_DIR is unset');
  return { ctx, pin };
}

/** The internal API's listener, with the two routes that stream on node:http directly. */
async function startInternal(ctx: AgentContext, held: ListenerSource | undefined): Promise<Served> {
  const { settings, log } = ctx;
  // Internal route modules; each area (lifecycle, storage, realtime, secrets) adds its own here.
  const modules: InternalRoutes[] = [realtimeRoutes, functionEnvRoutes, keyRoutes, blobRoutes, resumableRoutes, lifecycleRoutes, archiveRoutes, moveRoutes, projectDeleteRoutes, logRoutes, functionRoutes];
  const internal = await serveFetch(createInternalApi(ctx, modules), {
    host: settings.SVCD_AGENT_HOST,
    port: settings.SVCD_AGENT_PORT,
    setting: 'SVCD_AGENT_PORT',
    onError: (err) => log(`agent: internal request failed: ${(err as Error).stack ?? err}`),
    held,
  });
  realtimeRoutes.attachSubscribeStream(internal.server, ctx);
  functionRoutes.attachInvokeStream(internal.server, ctx);
  return internal;
}

/** The `/v2` listener, and the local stack's origin when the agent is given one. */
function startPublic(ctx: AgentContext, options: AgentOptions): Promise<Dataplane> {
  const { settings, log } = ctx;
  const cors = parseCorsOrigins(settings.SVCD_CORS_ORIGINS);
  const origin = options.origin && {
    targets: options.origin.targets,
    log,
    // Realtime subscribe and publish, and invocations with a project key, are served here
    // (docs/realtime.md "Through the base URL, locally"; docs/functions.md "The path through the service").
    routes: [publicRealtime({ ctx, keys: ctx.keyCache, cors, log }), publicInvoke({ ctx, keys: ctx.keyCache, cors, log, origin: options.origin.url })],
  };
  return startDataplane({
    host: settings.SVCD_AGENT_HOST,
    port: settings.SVCD_DATAPLANE_PORT,
    maxBytes: settings.SVCD_DATAPLANE_MAX_BYTES,
    endpoints: ctx.tenants,
    keys: ctx.keyCache,
    log,
    agentId: ctx.agentId,
    peers: new Peers({ load: (id) => getAgent(ctx.db, id), staleMs: settings.SVCD_AGENT_STALE_MS, refreshMs: settings.SVCD_HEARTBEAT_MS, log, tellMoved: (id, projectId) => tellMoved(ctx, id, projectId) }),
    cors,
    held: options.held,
    origin,
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
        ...(r.code ? { code: r.code } : {}),
        ...(r.projectId ? { project_id: r.projectId } : {}),
      });
    },
  });
}

/** Every listener, each closed again when a later one fails to open. */
async function startListeners(ctx: AgentContext, options: AgentOptions): Promise<{ internal: Served; dataplane: Dataplane; metrics: Served }> {
  const internal = await startInternal(ctx, options.held);
  // The /v2 listener exists before the agent registers, so the URL it advertises is the real one
  // (also with SVCD_DATAPLANE_PORT=0). SVCD_DATAPLANE_URL overrides it behind a proxy.
  const dataplane = await startPublic(ctx, options).catch(async (err: unknown) => {
    await internal.close();
    throw err;
  });
  // Prometheus on a listener of its own, never the public origin (docs/deploy.md "Every setting").
  const metrics = await startMetricsListener(ctx.metrics, ctx.settings.SVCD_AGENT_HOST, ctx.settings.SVCD_METRICS_PORT, options.held).catch(async (err: unknown) => {
    await Promise.all([internal.close(), dataplane.close()]);
    throw err;
  });
  // An engine that exits takes its connections with it: drop its pool at once.
  ctx.tenants.onExit((projectId) => dataplane.engineExited(projectId));
  return { internal, dataplane, metrics };
}

/** Registers the agent in DynamoDB and heartbeats (the timer is answered, unreferenced). */
async function register(ctx: AgentContext, pin: EnginePin, internalUrl: string, dataplaneUrl: string): Promise<NodeJS.Timeout> {
  const { settings, log } = ctx;
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
    heartbeatAgent(ctx.db, ctx.agentId, nowIso(), ctx.pin.ok).catch((err) => log(`agent: heartbeat failed: ${(err as Error).message}`));
  }, settings.SVCD_HEARTBEAT_MS);
  heartbeat.unref();
  return heartbeat;
}

/** Starts an agent from validated settings: its parts, then its listeners, then its registration. */
export async function startAgent(settings: Settings, options: AgentOptions = {}): Promise<Agent> {
  const log = options.log ?? ((line: string) => console.error(line));
  const { ctx, pin } = await buildContext(settings, options, log);
  // The supervisor repairs, adopts and reconciles before any listener opens.
  const started = ctx.now();
  await ctx.tenants.start();
  // Copies of projects another agent hosts now are never served here (docs/durability.md).
  await sweepBeforeServing(ctx);
  // Then what crashes left behind: local leftovers before any listener opens, the rest beside traffic.
  const sweeping = sweepLeftovers(ctx, started);
  const sweepingFunctions = ctx.functions.start();
  // Off-machine copies a crash left pending are shipped beside traffic (docs/lifecycle.md "Off-machine copies").
  const resumingBackups = ctx.backups.resume().catch((err: Error) => log(`agent: resuming off-machine copies failed: ${err.message}`));
  const stopTempSweep = sweepBlobTempPeriodically(ctx);
  const stopUploadSweep = sweepUploadsPeriodically(ctx);
  const { internal, dataplane, metrics } = await startListeners(ctx, options);
  const internalUrl = settings.SVCD_AGENT_URL ?? internal.url;
  const dataplaneUrl = settings.SVCD_DATAPLANE_URL ?? dataplane.url;
  const heartbeat = await register(ctx, pin, internalUrl, dataplaneUrl);
  // Running tenants idle past their project's auto_sleep_after_s are put to sleep (docs/lifecycle.md "Automatic sleep and backups").
  const idle = new IdleSleeper({ db: ctx.db, agentId: ctx.agentId, tenants: ctx.tenants, minSeconds: settings.SVCD_AUTO_SLEEP_MIN_S, log, now: ctx.now });
  idle.start();
  const stopLostWatch = watchLostAgents(ctx);

  let stopping: Promise<void> | undefined;
  const servers: Served[] = [internal, dataplane, metrics];
  return {
    ctx,
    internalUrl,
    dataplaneUrl,
    metricsUrl: metrics.url,
    stop() {
      stopping ??= (async () => {
        clearInterval(heartbeat);
        idle.stop();
        stopLostWatch();
        stopTempSweep();
        stopUploadSweep();
        ctx.realtime.close();
        await Promise.all(servers.map((s) => s.close()));
        // A sweep still reading DynamoDB is let finish (bounded): it removes only what it judged.
        await within(sweeping, 5000);
        await within(sweepingFunctions, 5000);
        ctx.backups.close();
        await within(resumingBackups, 5000);
        // Function workers end with the agent (an invocation in flight is lost, never replayed).
        await ctx.functions.stop();
        // Then every engine, gracefully, each under the stop timeout; their states recorded `sleeping`.
        await ctx.tenants.stopAll();
      })();
      return stopping;
    },
  };
}
