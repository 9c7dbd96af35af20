/**
 * Worker entry (miniflare locally, any Workers-compatible runtime): `env` carries the `SVCD_*`
 * settings as bindings. Deps are built on the first request of an isolate and reused.
 */
import { ConfigError } from '../shared/config.ts';
import { ServiceError, errorResponse } from '../shared/errors.ts';
import { newRequestId } from '../shared/ids.ts';
import { buildDeps } from './deps.ts';
import { createApp, type App, type ExecutionContext } from './index.ts';

let app: App | undefined;
let appEnv: unknown;

export default {
  async fetch(request: Request, env: Record<string, unknown>, exec: ExecutionContext): Promise<Response> {
    if (!app || appEnv !== env) {
      try {
        app = createApp(buildDeps(env));
        appEnv = env;
      } catch (err) {
        if (err instanceof ConfigError) {
          console.error(err.message);
          return errorResponse(new ServiceError('internal', 'service misconfigured'), newRequestId());
        }
        throw err;
      }
    }
    // The execution context lets work outlive the answer (an old blob's delete after a replace).
    return app.fetch(request, exec);
  },
};
