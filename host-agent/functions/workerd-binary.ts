/**
 * Where the workerd binary of the `workerd` package is (docs/functions.md "Runtimes"): the agent's
 * default (./launch.ts, `SVCD_FUNCTION_WORKERD` chooses another) and the CLI's `functions dev`
 * (client/cli/functions/dev-runtime.ts, where the package is an optional peer dependency).
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

/** The workerd binary of the `workerd` package, or null when it is not installed. */
export function packagedWorkerd(): string | null {
  try {
    const dir = createRequire(import.meta.url).resolve('workerd/package.json').replace(/package\.json$/, '');
    const bin = join(dir, 'bin', 'workerd');
    return existsSync(bin) ? bin : null;
  } catch {
    return null;
  }
}
