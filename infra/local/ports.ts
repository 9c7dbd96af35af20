/**
 * The local stack's ports (docs/local-stack.md "Ports"). The supervisor binds every listener of the
 * stack that must keep its port — the origin (`SVCD_PORT`) and each agent's internal, `/v2` and
 * metrics listeners — once, for the stack's whole life, and gives them to the agent processes it
 * starts (shared/http/held-listeners.ts). A restarted agent therefore never binds a port: nothing
 * can make it unbindable, not even the stack's own client connections holding it as an ephemeral
 * source port in TIME-WAIT. While no agent holds them, the agent's listeners answer 503
 * `orchestrator_unavailable` (the origin has the fallback front instead, infra/local/front-proxy.ts).
 */
import { createServer, type Server } from 'node:http';
import type { Socket } from 'node:net';
import { ServiceError } from '../../shared/errors.ts';
import { HeldListener } from '../../shared/http/held-listeners.ts';
import { answerClientErrors, answerError, SERVER_OPTIONS } from '../../shared/http/node-http.ts';
import { newRequestId } from '../../shared/ids.ts';
import type { Settings } from '../../shared/config.ts';
import { portIsFree } from './dynamodb.ts';

/** The settings of an agent's own listeners, with their offset from `SVCD_PORT` for the first agent. */
export const AGENT_PORTS = [
  ['SVCD_AGENT_PORT', 1],
  ['SVCD_DATAPLANE_PORT', 2],
  ['SVCD_METRICS_PORT', 4],
] as const;

export type AgentPortSetting = (typeof AGENT_PORTS)[number][0];

/** One agent's listeners, by setting. */
export type AgentListeners = Record<AgentPortSetting, HeldListener>;

/** Answers every request 503: the agent whose listener this is is not running (yet, or again). */
function unavailable(): Server {
  const server = createServer(SERVER_OPTIONS, (req, res) => {
    res.shouldKeepAlive = false;
    answerError(req, res, new ServiceError('orchestrator_unavailable', 'the host agent is not running (it is starting or restarting)'), newRequestId());
  });
  answerClientErrors(server);
  return server;
}

/** Serves a connection no agent takes with `server`. */
function serveWith(server: Server): (socket: Socket) => void {
  return (socket) => {
    server.emit('connection', socket);
    socket.resume();
  };
}

/**
 * Binds the stack's ports: `SVCD_PORT`; for the first agent its settings as given, else the port at
 * its offset from `SVCD_PORT` when free, else a free one (all free with `SVCD_PORT=0`); for the
 * others free ones. A port set explicitly that is taken fails the start naming its setting.
 */
export async function holdStackPorts(
  settings: Settings,
  explicit: Partial<Record<AgentPortSetting, string>>,
  agents: number,
): Promise<{ origin: HeldListener; agents: AgentListeners[]; close(): Promise<void> }> {
  const fallback = unavailable();
  const all: HeldListener[] = [];
  const hold = async (name: string, host: string, port: number) => {
    const held = await HeldListener.bind(name, host, port, serveWith(fallback));
    all.push(held);
    return held;
  };
  const close = async () => {
    await Promise.all(all.map((l) => l.close()));
    fallback.close();
    fallback.closeAllConnections();
  };
  try {
    const origin = await hold('SVCD_PORT', settings.SVCD_HOST, settings.SVCD_PORT);
    const base = settings.SVCD_PORT === 0 ? 0 : origin.port;
    const list: AgentListeners[] = [];
    for (let i = 0; i < agents; i++) {
      const one = {} as AgentListeners;
      for (const [setting, offset] of AGENT_PORTS) {
        const host = settings.SVCD_AGENT_HOST;
        let port = 0;
        if (i === 0 && explicit[setting] !== undefined) port = settings[setting];
        else if (i === 0 && base !== 0 && base + offset <= 65535 && (await portIsFree(host, base + offset))) port = base + offset;
        one[setting] = await hold(setting, host, port);
      }
      list.push(one);
    }
    return { origin, agents: list, close };
  } catch (err) {
    await close();
    throw err;
  }
}
