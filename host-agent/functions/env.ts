/**
 * The environment of a function invocation (docs/secrets.md "Injection"; docs/functions.md
 * "Environment"): the project's secrets decrypted, by name, then `PROJECT_ID`, `FUNCTION_NAME`,
 * `CLOUD_ORIGIN`, set last so no secret can ever shadow them. Nothing of the agent's own environment.
 *
 * `SecretSets` keeps each project's decrypted set in memory so a warm invocation reads nothing from
 * DynamoDB: a secret put or delete tells the project's agent (`invalidate`, through the internal route
 * of host-agent/routes/functions.ts) before it answers, so the next invocation reads the new set. A
 * set older than REFRESH_MS is read again in any case, bounding how long a lost notice can matter.
 */
import { createHash } from 'node:crypto';
import type { Db } from '../../shared/db/client.ts';
import { loadSealedSecrets, RESERVED_ENV_NAMES } from '../../shared/db/secrets.ts';
import { openSecret, type KeyRing } from '../../shared/secrets-crypto.ts';

/** What an invocation is for. */
export interface InvocationTarget {
  projectId: string;
  functionName: string;
  cloudOrigin: string;
}

/** A project's secrets as an invocation gets them. */
export interface SecretSet {
  /** `[name, value]`, by name. */
  readonly secrets: readonly (readonly [string, string])[];
  /** Identifies this set (names, versions, creation times; never values): workers are pooled by it. */
  readonly fingerprint: string;
}

/** What reading secrets needs. */
export interface SecretDeps {
  db: Db;
  /** The key ring (null: the agent has none). */
  secrets: KeyRing | null;
  agentId: string;
}

/**
 * Reads and decrypts a project's secrets (strongly consistent). Throws when one cannot be decrypted
 * (its key id left the ring, or it was altered): an invocation never runs with a secret silently missing.
 */
export async function readSecretSet(deps: SecretDeps, projectId: string): Promise<SecretSet> {
  const sealed = await loadSealedSecrets(deps.db, projectId);
  if (sealed.length > 0 && !deps.secrets) {
    throw new Error(`host agent ${deps.agentId} has no SVCD_SECRETS_KEYS: cannot decrypt the secrets of project ${projectId}`);
  }
  const secrets: [string, string][] = [];
  const stamp = createHash('sha256');
  for (const s of sealed) {
    secrets.push([s.name, await openSecret(deps.secrets!, projectId, s.name, s.sealed)]);
    stamp.update(`${s.name}\0${s.version}\0${s.created_at}\0`);
  }
  return { secrets, fingerprint: stamp.digest('hex').slice(0, 16) };
}

/** The environment of one invocation: `set` in name order, then the three service variables, last. */
export function invocationEnv(set: SecretSet, target: InvocationTarget): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of set.secrets) env[name] = value;
  const fixed: Record<(typeof RESERVED_ENV_NAMES)[number], string> = {
    PROJECT_ID: target.projectId,
    FUNCTION_NAME: target.functionName,
    CLOUD_ORIGIN: target.cloudOrigin,
  };
  // Removed first, so they are both authoritative and last in order.
  for (const name of RESERVED_ENV_NAMES) {
    delete env[name];
    env[name] = fixed[name];
  }
  return env;
}

/** Age after which a project's set is read again even without a notice. */
export const REFRESH_MS = 60_000;

interface Cached {
  set: Promise<SecretSet>;
  readAt: number;
}

/**
 * Each project's decrypted secrets, in memory, dropped when a secret changes. A read in flight when
 * a notice arrives is answered to the invocations that were waiting for it (they began before the
 * change was answered) but is not kept: the notice removed its entry.
 */
export class SecretSets {
  readonly #deps: SecretDeps;
  readonly #now: () => number;
  readonly #cached = new Map<string, Cached>();

  constructor(deps: SecretDeps, now: () => number) {
    this.#deps = deps;
    this.#now = now;
  }

  /** The project's current set. */
  get(projectId: string): Promise<SecretSet> {
    const cached = this.#cached.get(projectId);
    if (cached && this.#now() - cached.readAt <= REFRESH_MS) return cached.set;
    const entry: Cached = { set: readSecretSet(this.#deps, projectId), readAt: this.#now() };
    this.#cached.set(projectId, entry);
    entry.set.catch(() => {
      if (this.#cached.get(projectId) === entry) this.#cached.delete(projectId);
    });
    return entry.set;
  }

  /** A secret of the project changed (or the project is gone): the next invocation reads the set again. */
  invalidate(projectId: string): void {
    this.#cached.delete(projectId);
  }
}
