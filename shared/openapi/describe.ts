/**
 * How a route is described for the OpenAPI document (docs/api.md "How the reference is made"):
 * every input and answer is one of the zod schemas of shared/schemas/, the same ones that validate
 * requests, so the document cannot drift from what the service checks. The registry of every
 * route's description is ./routes.ts, keyed by the route's method and its itty-router pattern.
 */
import type { z } from 'zod';

/** Who may call a route (docs/api.md "Decisions": credentials). */
export type Access =
  /** No credential (health, the document itself, signup, sessions). */
  | 'none'
  /** `Authorization: Bearer <session token>`: the owner of the project. */
  | 'session'
  /** The owner's session or a project key of that project (realtime subscribe). */
  | 'session-or-key'
  /** A project key (`/v2`). */
  | 'key';

/** Groups of the reference, in the order docs/api.md lists them. */
export const TAGS = {
  service: 'Health and the API document',
  accounts: 'Accounts and sessions',
  projects: 'Projects',
  lifecycle: 'Lifecycle, snapshots and restore',
  keys: 'Project keys',
  storage: 'Object storage',
  realtime: 'Realtime',
  secrets: 'Function secrets',
  functions: 'Functions',
  receipts: 'Receipts',
  logs: 'Engine logs',
  dataplane: 'Data plane (/v2)',
} as const;

/** A group of the reference. */
export type Tag = keyof typeof TAGS;

/** One success answer of a route. */
export interface Answer {
  description: string;
  /** A JSON body, by its answer schema. */
  json?: z.ZodType;
  /** A body that is not JSON: its media type and what it holds. */
  content?: { type: string; description: string };
  /** Headers of the answer beside `X-Request-Id` (which every answer carries), name → description. */
  headers?: Record<string, string>;
}

/** One route's description. */
export interface RouteDoc {
  tag: Tag;
  summary: string;
  /** Markdown; cite the contract or a docs/ page for the rules. */
  description?: string;
  access: Access;
  /** Path parameters by name, each by its schema (the route's `:name`; a `:name+` may hold `/`). */
  params?: Record<string, z.ZodType>;
  /** The query, as the object schema the route parses it with (handlers/http.ts `queryOf`). */
  query?: z.ZodObject;
  /** Names in `query` that may be given more than once. */
  repeatable?: readonly string[];
  /** A JSON body, by its request schema. */
  body?: z.ZodType;
  /** Whether a JSON body may be left out (an empty body counts as `{}`). */
  bodyOptional?: boolean;
  /** A body that is not JSON (object bytes). */
  rawBody?: { type: string; description: string };
  /** Request headers the route reads, name → description. */
  headers?: Record<string, { description: string; required?: boolean }>;
  /** Success answers by status. */
  answers: Record<number, Answer>;
  /**
   * Error statuses beyond those every route of its kind has: 400 and 500 always, 401 with a
   * credential, 404 on a `/v0/projects/{id}` route (./document.ts `errorStatuses`).
   */
  errors?: number[];
  /** Served by the host agents' `/v2` listeners and passed to the engine unchanged. */
  passThrough?: boolean;
}

/** The registry: `"<METHOD> <itty-router pattern>"` → its description. */
export type RouteDocs = Record<string, RouteDoc>;
