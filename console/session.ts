/**
 * What the console keeps in the browser tab (docs/console.md "Session"): the session token and
 * account id in `sessionStorage` (gone when the tab closes, never shared with another tab), and the
 * project keys the SQL editor uses. The account secret is never stored.
 */
import { createClient, type SvcClient } from '../client/index.ts';

/** The signed-in account of this tab. */
export interface ConsoleSession {
  token: string;
  accountId: string;
  expiresAt: string;
}

const SESSION = 'svc.console.session';
const SQL_KEY = 'svc.console.sql-key.';

/** The tab's session, or null (none, unreadable, or expired). */
export function loadSession(): ConsoleSession | null {
  try {
    const raw = sessionStorage.getItem(SESSION);
    if (!raw) return null;
    const s = JSON.parse(raw) as ConsoleSession;
    if (typeof s.token !== 'string' || typeof s.accountId !== 'string') return null;
    if (Date.parse(s.expiresAt) <= Date.now()) return null;
    return s;
  } catch {
    return null;
  }
}

/** Keeps the session for this tab. */
export function saveSession(session: ConsoleSession): void {
  sessionStorage.setItem(SESSION, JSON.stringify(session));
}

/** Forgets everything this tab kept (sign-out). */
export function clearSession(): void {
  sessionStorage.clear();
}

/** A client of the service that served the console: the same origin, with the session when there is one. */
export function apiClient(session: ConsoleSession | null): SvcClient {
  return createClient({ baseUrl: location.origin, ...(session ? { token: session.token } : {}) });
}

/** A data-plane client with `key` (SQL editor). */
export function keyClient(key: string): SvcClient {
  return createClient({ baseUrl: location.origin, key });
}

/** The project key the SQL editor of `projectId` uses in this tab, or null. */
export function sqlKeyOf(projectId: string): string | null {
  return sessionStorage.getItem(SQL_KEY + projectId);
}

/** Sets (or with null forgets) the SQL editor's key of `projectId`. */
export function setSqlKey(projectId: string, key: string | null): void {
  if (key === null) sessionStorage.removeItem(SQL_KEY + projectId);
  else sessionStorage.setItem(SQL_KEY + projectId, key);
}
