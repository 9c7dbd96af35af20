/**
 * The internal-token check of every internal route (docs/architecture.md "The internal API"): the
 * short-lived JWT the handlers sign (shared/auth.ts). The fetch-style routes, the raw subscribe route
 * and the raw invoke route all check it here. A verified token is remembered until it expires: the
 * handlers reuse one token for the calls of several seconds, so a warm call pays for no signature
 * check (about 0.1 ms, as much as a warm invocation's whole relay). Built once at the agent's start
 * and kept in the agent context.
 */
import { LRUCache } from 'lru-cache';
import { bearerToken, verifyInternalToken } from '../shared/auth.ts';

/** Verified tokens remembered at most (the least recently used go first). */
const VERIFIED_MAX = 1024;

/** The agent's internal-token check. */
export class InternalTokens {
  readonly #secret: string;
  readonly #now: () => number;
  /** Verified tokens, each until its expiry (ms). */
  readonly #verified = new LRUCache<string, number>({ max: VERIFIED_MAX });

  /** `now`: the clock the tokens' expiries are read against (jose verifies against the real one). */
  constructor(internalSecret: string, now: () => number = Date.now) {
    this.#secret = internalSecret;
    this.#now = now;
  }

  /**
   * Checks the `Authorization: Bearer <jwt>` of an internal request: 401 `authentication_required`
   * when it is missing, invalid or expired (the agent client reads that as the deployment's fault).
   */
  async check(authorization: string | null | undefined): Promise<void> {
    const token = bearerToken(authorization ?? null);
    const until = this.#verified.get(token);
    if (until !== undefined && this.#now() < until) return;
    await verifyInternalToken(this.#secret, token);
    const exp = expiryOf(token);
    if (exp !== null) this.#verified.set(token, exp);
  }
}

/** The `exp` of a JWT already verified, in ms, or null. */
function expiryOf(token: string): number | null {
  try {
    const payload = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8')) as { exp?: unknown };
    return typeof payload.exp === 'number' ? payload.exp * 1000 : null;
  } catch {
    return null;
  }
}
