/**
 * Credentials: the Authorization header parser both planes use (docs/api.md "Credentials"), session tokens (jose
 * HS256 JWTs), project-key and account-secret formats, and their verifiers (HMAC-SHA256 with a pepper,
 * compared in constant time). Web Crypto only, so it runs in workers and in Node alike.
 */
import { SignJWT, jwtVerify } from 'jose';
import { errors } from './errors.ts';
import { randomHex } from './ids.ts';
import { LRUCache } from 'lru-cache';

const encoder = new TextEncoder();

/**
 * Extracts the bearer token: exactly one `Authorization` header (fetch folds two into "a, b"),
 * scheme `Bearer` in any case, one non-empty token without spaces or commas. Anything else is 401.
 */
export function parseBearer(headers: Headers): string {
  return bearerToken(headers.get('authorization'));
}

/**
 * The token of one Authorization header value (null: the header is absent), by the rules of
 * parseBearer. For callers that already hold the value (the `/v2` listener reads node's raw headers,
 * whose values node has already trimmed and checked for invalid characters, as Headers would).
 */
export function bearerToken(value: string | null): string {
  if (value === null) throw errors.unauthenticated('the Authorization header is missing');
  const match = /^bearer ([^\s,]+)$/i.exec(value);
  if (!match) throw errors.unauthenticated('the Authorization header must be exactly one "Bearer <token>"');
  return match[1]!;
}

/** A project key split into its parts: `svc1_<key_id 32 hex>_<secret 64 hex>`. */
export interface ParsedKey {
  keyId: string;
  secret: string;
}

/** Pattern of a project key (contract "Project key"). */
export const PROJECT_KEY_PATTERN = /^svc1_([0-9a-f]{32})_([0-9a-f]{64})$/;

/** Splits a project key, or answers null when the token is not one. */
export function parseProjectKey(token: string): ParsedKey | null {
  const m = PROJECT_KEY_PATTERN.exec(token);
  return m ? { keyId: m[1]!, secret: m[2]! } : null;
}

/** Issues a fresh project key from the CSPRNG. */
export function newProjectKey(): ParsedKey & { key: string } {
  const keyId = randomHex(16);
  const secret = randomHex(32);
  return { keyId, secret, key: `svc1_${keyId}_${secret}` };
}

/** Pattern of an account secret (shown once at signup). */
export const ACCOUNT_SECRET_PATTERN = /^acs_[0-9a-f]{64}$/;

/** A fresh account secret. */
export function newAccountSecret(): string {
  return `acs_${randomHex(32)}`;
}

const hmacKeys = new Map<string, Promise<CryptoKey>>();

function hmacKey(pepper: string): Promise<CryptoKey> {
  let key = hmacKeys.get(pepper);
  if (!key) {
    key = crypto.subtle.importKey('raw', encoder.encode(pepper), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
    hmacKeys.set(pepper, key);
  }
  return key;
}

/** The stored verifier of a secret: hex HMAC-SHA256(pepper, secret). The secret itself is never stored. */
export async function verifierOf(pepper: string, secret: string): Promise<string> {
  const mac = new Uint8Array(await crypto.subtle.sign('HMAC', await hmacKey(pepper), encoder.encode(secret)));
  let out = '';
  for (const b of mac) out += b.toString(16).padStart(2, '0');
  return out;
}

/** Compares two strings in time independent of where they differ. */
export function constantTimeEqual(a: string, b: string): boolean {
  let diff = a.length ^ b.length;
  const n = Math.max(a.length, b.length);
  for (let i = 0; i < n; i++) diff |= (a.charCodeAt(i) | 0) ^ (b.charCodeAt(i) | 0);
  return diff === 0;
}

/** True when `secret` matches the stored verifier. */
export async function verifySecret(pepper: string, secret: string, verifier: string): Promise<boolean> {
  return constantTimeEqual(await verifierOf(pepper, secret), verifier);
}

const SESSION_ISSUER = 'svc-cloud';
const SESSION_AUDIENCE = 'svc-session';

/**
 * What a session token carries (docs/api.md "Sessions"): the account, the session's own id (what
 * signing out ends), and the account's session generation when it was issued (what a rotation of
 * the account secret moves on, ending every session issued before it).
 */
export interface SessionClaims {
  accountId: string;
  sessionId: string;
  generation: number;
  /** Unix seconds. */
  expiresAt: number;
}

/** Pattern of a session id (the token's `jti`). */
export const SESSION_ID_PATTERN = /^[0-9a-f]{32}$/;

/**
 * Signs a session token for an account at its current session generation; returns it with its
 * fresh session id and its expiry.
 */
export async function issueSessionToken(
  sessionSecret: string,
  accountId: string,
  ttlSeconds: number,
  now: number = Date.now(),
  generation = 0,
): Promise<{ token: string; expiresAt: Date; sessionId: string }> {
  const iat = Math.floor(now / 1000);
  const exp = iat + ttlSeconds;
  const sessionId = randomHex(16);
  const token = await new SignJWT({ gen: generation })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setSubject(accountId)
    .setIssuer(SESSION_ISSUER)
    .setAudience(SESSION_AUDIENCE)
    .setJti(sessionId)
    .setIssuedAt(iat)
    .setExpirationTime(exp)
    .sign(encoder.encode(sessionSecret));
  return { token, expiresAt: new Date(exp * 1000), sessionId };
}

/** Bound on the session tokens remembered as verified, per secret (a few MiB at most). */
export const VERIFIED_SESSION_TOKENS_MAX = 10_000;

/**
 * Session tokens whose signature this process has verified, by secret, least recently used first.
 * A signature is a property of the exact token text under one secret and never changes, so a token
 * seen again is judged by its lifetime alone; whether its session still stands is never remembered
 * (shared/sessions.ts reads it on every request).
 */
const verifiedSessions = new Map<string, LRUCache<string, SessionClaims>>();

/** The session secret as an HMAC key, imported once per process (jose imports raw bytes on every call). */
const sessionHmacKeys = new Map<string, Promise<CryptoKey>>();

function sessionKey(sessionSecret: string): Promise<CryptoKey> {
  let key = sessionHmacKeys.get(sessionSecret);
  if (!key) {
    key = crypto.subtle.importKey('raw', encoder.encode(sessionSecret), { name: 'HMAC', hash: 'SHA-256' }, false, ['verify']);
    sessionHmacKeys.set(sessionSecret, key);
  }
  return key;
}

/**
 * Verifies a session token's signature and lifetime and answers what it carries; any failure is
 * 401. This is only the half of the check a token can prove by itself: whether the session still
 * stands (not signed out, no rotation since) is judged against DynamoDB by
 * shared/sessions.ts, which every route goes through. A token verified before in this
 * process has only its lifetime checked again (`VERIFIED_SESSION_TOKENS_MAX` remembered).
 */
export async function readSessionToken(sessionSecret: string, token: string, now: number = Date.now()): Promise<SessionClaims> {
  let verified = verifiedSessions.get(sessionSecret);
  if (!verified) verifiedSessions.set(sessionSecret, (verified = new LRUCache({ max: VERIFIED_SESSION_TOKENS_MAX })));
  const known = verified.get(token);
  if (known) {
    // jose's rule: expired once the current second reaches `exp`.
    if (Math.floor(now / 1000) >= known.expiresAt) throw errors.unauthenticated('the session token is invalid or expired');
    return { ...known };
  }
  const claims = await verifySessionToken(sessionSecret, token, now);
  verified.set(token, claims);
  return { ...claims };
}

async function verifySessionToken(sessionSecret: string, token: string, now: number): Promise<SessionClaims> {
  try {
    const { payload } = await jwtVerify(token, await sessionKey(sessionSecret), {
      currentDate: new Date(now),
      algorithms: ['HS256'],
      issuer: SESSION_ISSUER,
      audience: SESSION_AUDIENCE,
      requiredClaims: ['exp', 'jti'],
    });
    const { sub, jti, gen, exp } = payload;
    if (typeof sub !== 'string' || !/^acct_[0-9a-f]{16}$/.test(sub)) throw new Error('bad subject');
    if (typeof jti !== 'string' || !SESSION_ID_PATTERN.test(jti)) throw new Error('bad session id');
    if (typeof gen !== 'number' || !Number.isSafeInteger(gen) || gen < 0) throw new Error('bad generation');
    return { accountId: sub, sessionId: jti, generation: gen, expiresAt: exp! };
  } catch {
    throw errors.unauthenticated('the session token is invalid or expired');
  }
}

const INTERNAL_AUDIENCE = 'host-agent';

/** Signs a short-lived token for one internal call to a host agent (docs/architecture.md "The internal API": `exp` ≤ 60 s). */
export async function issueInternalToken(internalSecret: string, subject = 'handlers', ttlSeconds = 30): Promise<string> {
  return new SignJWT({})
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setSubject(subject)
    .setAudience(INTERNAL_AUDIENCE)
    .setIssuedAt()
    .setExpirationTime(`${Math.min(ttlSeconds, 60)}s`)
    .sign(encoder.encode(internalSecret));
}

/** Verifies an internal token; refuses tokens living longer than 60 s. */
export async function verifyInternalToken(internalSecret: string, token: string): Promise<void> {
  try {
    const { payload } = await jwtVerify(token, encoder.encode(internalSecret), {
      algorithms: ['HS256'],
      audience: INTERNAL_AUDIENCE,
      requiredClaims: ['exp', 'iat'],
    });
    if (payload.exp! - payload.iat! > 60) throw new Error('lifetime too long');
  } catch {
    throw errors.unauthenticated('internal token invalid or expired');
  }
}
