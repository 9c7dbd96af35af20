/** What the internal routes of the host agent receive: settings, metadata, identity and its services, never written after start. */
import type { FsBlobStore } from './blobs/fs-store.ts';
import type { Settings } from '../shared/config.ts';
import type { Log } from '../shared/log.ts';
import type { Db } from '../shared/db/client.ts';
import type { KeyRing } from '../shared/secrets-crypto.ts';
import type { KeyCache } from './dataplane/key-cache.ts';
import type { RealtimeHub } from './realtime/hub.ts';
import type { PinView } from './tenants/pin.ts';
import type { Tenants } from './tenants/tenants.ts';
import type { AgentMetrics } from './metrics.ts';
import type { FunctionRuntime } from './functions/runtime.ts';
import type { InternalTokens } from './internal-auth.ts';
import type { Backups } from './backups/backups.ts';

/** What the internal routes receive: the agent's parts, each built complete once at start (host-agent/agent.ts). */
export interface AgentContext {
  readonly settings: Settings;
  readonly db: Db;
  readonly agentId: string;
  /** Absolute `SVCD_ROOT`: tenants/, snapshots/, blobs/, run/ live under it. */
  readonly root: string;
  /** The latest pin check (refreshed before each engine start by the pin check itself, host-agent/tenants/pin.ts). */
  readonly pin: PinView;
  readonly log: Log;
  readonly now: () => number;
  /** The function-secrets key ring (SVCD_SECRETS_KEYS / SVCD_SECRETS_KEY), validated at start; null when unset. */
  readonly secrets: KeyRing | null;
  /** The realtime hub: publish, subscribe, and `emitSystem` for lifecycle events (host-agent/realtime/hub.ts). */
  readonly realtime: RealtimeHub;
  /** The `/v2` listener's verified project keys; the invalidate route drops revoked ones (host-agent/dataplane/key-cache.ts). */
  readonly keyCache: KeyCache;
  /** The tenants supervisor: engine processes, lifecycle, snapshots, restore (host-agent/tenants/). */
  readonly tenants: Tenants;
  /** Project functions: deploys, invocations, their workers and logs (host-agent/functions/; docs/functions.md). */
  readonly functions: FunctionRuntime;
  /** The agent's Prometheus metrics (host-agent/metrics.ts; docs/observability.md "Metrics"). */
  readonly metrics: AgentMetrics;
  /** The `fs` blob store under `<SVCD_ROOT>/blobs` (host-agent/blobs/fs-store.ts; docs/storage.md), opened once at start. */
  readonly blobs: FsBlobStore;
  /** The internal-token check of every internal route, remembering verified tokens (host-agent/internal-auth.ts). */
  readonly internalTokens: InternalTokens;
  /** Off-machine copies of snapshots: ship, fetch, remove (host-agent/backups/; docs/lifecycle.md "Off-machine copies"). */
  readonly backups: Backups;
}
