/**
 * The workerd configuration of a project's function runtime (docs/functions.md "Isolation"), in
 * Cap'n Proto text (workerd's `workerd.capnp` schema). One service runs: the supervisor
 * (./supervisor.js), listening on the runtime's unix socket, with three bindings — the Worker Loader
 * that gives each function version an isolate of its own, the agent's control socket (`AGENT`: the
 * versions' modules and environments) and the agent's egress filter (`EGRESS`, HTTP proxy style: the
 * only way out for the isolates' `fetch`). Nothing else is reachable: there is no disk service, no
 * network service, and the supervisor's own `fetch` goes to the control socket.
 */

/** The compatibility date functions run with (workerd's behaviour as of that day), and their flags. */
export const FUNCTION_COMPATIBILITY_DATE = '2025-09-01';
export const FUNCTION_COMPATIBILITY_FLAGS: readonly string[] = ['nodejs_compat'];

/** What a runtime's configuration says. */
export interface RuntimeConfig {
  /** Paths as the runtime sees them. */
  listen: string;
  control: string;
  egress: string;
  /** The heap limit of each isolate, in MiB (a function's `memory_mb`). */
  heapMb: number;
}

/** A Cap'n Proto text literal. */
function text(value: string): string {
  if (/["\\\n\r\0]/.test(value)) throw new Error(`unexpected character in a configuration value: ${JSON.stringify(value)}`);
  return `"${value}"`;
}

/** The configuration text; `supervisor.js` is embedded from the configuration's own directory. */
export function runtimeConfig(config: RuntimeConfig): string {
  return `using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    ( name = "supervisor",
      worker = (
        modules = [ (name = "supervisor.js", esModule = embed "supervisor.js") ],
        compatibilityDate = ${text(FUNCTION_COMPATIBILITY_DATE)},
        bindings = [
          (name = "LOADER", workerLoader = ()),
          (name = "AGENT", service = "agent"),
          (name = "EGRESS", service = "egress"),
        ],
        globalOutbound = "agent",
      ),
    ),
    (name = "agent", external = (address = ${text(`unix:${config.control}`)}, http = ())),
    (name = "egress", external = (address = ${text(`unix:${config.egress}`)}, http = (style = proxy))),
  ],
  sockets = [ (name = "in", address = ${text(`unix:${config.listen}`)}, http = (), service = "supervisor") ],
  v8Flags = [ ${text(`--max-old-space-size=${Math.floor(config.heapMb)}`)} ],
);
`;
}
