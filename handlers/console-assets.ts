/**
 * The web console's built files (docs/console.md), served by handlers/routes/console.ts. This source
 * holds none: `build.mjs` builds console/ and puts its files in place of this module in every
 * handlers bundle (worker, Node server, function gateway), so each entry serves the console from
 * memory with nothing to read from disk. Run from source (the in-process suites), there is no console.
 */

/** One built file of the console. */
export interface ConsoleAsset {
  /** Its path under `/console/` (`''` for the page itself). */
  name: string;
  /** Its media type. */
  type: string;
  /** Its content (every file of the console is text). */
  body: string;
  /** A strong validator of `body` (its SHA-256, quoted). */
  etag: string;
  /** True for files whose name carries their content hash: cached for a year, never revalidated. */
  immutable: boolean;
}

/** The built files, or null when the handlers run from source (no build). */
export const CONSOLE_ASSETS: readonly ConsoleAsset[] | null = null;
