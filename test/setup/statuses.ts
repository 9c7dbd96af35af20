/**
 * Global setup: every status the suites observe must be in the OpenAPI document (docs/api.md "How
 * the reference is made"). Gives the run a directory where each test process records the (route,
 * status) pairs it observes (test/helpers/observed.ts), and when the run ends fails it with every
 * pair the document does not list.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { buildOpenApiDocument } from '../../shared/openapi/document.ts';
import { readObserved, undocumented } from '../helpers/observed.ts';

export default function setup(project: TestProject): () => void {
  // test-output/ is ignored by git: a fresh clone has none until a run makes it.
  const parent = join(import.meta.dirname, '../../test-output');
  mkdirSync(parent, { recursive: true });
  const dir = mkdtempSync(join(parent, 'statuses-'));
  project.provide('statusesDir', dir);
  return () => {
    const observed = readObserved(dir);
    rmSync(dir, { recursive: true, force: true });
    const missing = undocumented(observed, buildOpenApiDocument());
    if (missing.length > 0) {
      // Fails the run without throwing: a throwing teardown would skip the other setups' teardowns.
      process.exitCode = 1;
      console.error(`\nFAIL statuses the suites observed that the OpenAPI document does not list (declare them in shared/api/):\n  ${missing.join('\n  ')}\n`);
      return;
    }
    console.log(`statuses: ${observed.length} (route, status) pairs observed, each in the OpenAPI document`);
  };
}
