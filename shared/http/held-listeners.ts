/**
 * Listeners a supervisor holds for a child process (docs/local-stack.md "Ports"): the local stack
 * binds each fixed port of an agent once, for the stack's whole life, and gives the listening
 * socket to the agent process it starts — again to the next one when that agent is restarted — so
 * a restarted agent never binds anything and cannot find its port taken, not even by the stack's
 * own connections holding it as an ephemeral source port in TIME-WAIT.
 *
 * Node's public IPC does it: the supervisor sends the listening `net.Server` to the child
 * (`child.send(message, server)`), which accepts on it from then on; the connections the
 * supervisor's own copy accepts meanwhile go to the child as sockets (`child.send(message,
 * socket)`), or, while no child holds the listener, to the supervisor's fallback. In the child,
 * each connection is emitted to the node:http server serving that listener (`'connection'`, which
 * node documents for injecting connections).
 */
import type { ChildProcess } from 'node:child_process';
import { createServer, Server as NetServer, Socket, type AddressInfo } from 'node:net';

/** What a child sends once it listens for its listeners (before, a handle sent to it could be lost). */
const ASK = 'svc:listeners?';

/** The IPC message that carries a listening socket (with the server) or one accepted connection (with the socket). */
interface HeldMessage {
  type: 'svc:listener' | 'svc:connection';
  /** The setting the port is (`SVCD_PORT`, `SVCD_AGENT_PORT`, …). */
  name: string;
}

function heldMessage(m: unknown): HeldMessage | null {
  const h = m as Partial<HeldMessage> | null;
  return typeof h === 'object' && h !== null && (h.type === 'svc:listener' || h.type === 'svc:connection') && typeof h.name === 'string' ? (h as HeldMessage) : null;
}

// ------------------------------------------------------------------------------------ supervisor

/** A listening socket the supervisor holds for the setting `name`. */
export class HeldListener {
  readonly name: string;
  readonly server: NetServer;
  readonly port: number;
  #holder: ChildProcess | null = null;
  #fallback: (socket: Socket) => void;

  private constructor(name: string, server: NetServer, port: number, fallback: (socket: Socket) => void) {
    this.name = name;
    this.server = server;
    this.port = port;
    this.#fallback = fallback;
    server.on('connection', (socket) => this.#accepted(socket));
  }

  /**
   * Binds host:port (0: a free one) for the setting `name`; connections no child takes go to
   * `fallback` (default: closed).
   */
  static async bind(name: string, host: string, port: number, fallback: (socket: Socket) => void = (s) => s.destroy()): Promise<HeldListener> {
    const server = createServer({ pauseOnConnect: true, noDelay: true });
    await new Promise<void>((resolve, reject) => {
      const onError = (err: NodeJS.ErrnoException) =>
        reject(err.code === 'EADDRINUSE' ? new Error(`port ${port} on ${host} is already in use: set ${name} to another port`) : err);
      server.once('error', onError);
      server.listen(port, host, () => {
        server.off('error', onError);
        resolve();
      });
    });
    return new HeldListener(name, server, (server.address() as AddressInfo).port, fallback);
  }

  /** Serves connections with `fallback` while no child holds the listener. */
  setFallback(fallback: (socket: Socket) => void): void {
    this.#fallback = fallback;
  }

  /** Gives the listener to `child`, which serves its connections from now on. */
  giveTo(child: ChildProcess): void {
    this.#holder = child;
    if (child.connected) child.send({ type: 'svc:listener', name: this.name } satisfies HeldMessage, this.server);
  }

  /** Takes the listener back from `child` (it is stopping; once gone, its IPC channel is closed and the fallback serves anyway). */
  release(child: ChildProcess): void {
    if (this.#holder === child) this.#holder = null;
  }

  /** Stops listening (connections already accepted are their servers' to close). */
  close(): Promise<void> {
    this.#holder = null;
    this.server.close();
    return Promise.resolve();
  }

  #accepted(socket: Socket): void {
    const child = this.#holder;
    if (!child?.connected) return this.#fallback(socket);
    child.send({ type: 'svc:connection', name: this.name } satisfies HeldMessage, socket, (err) => {
      if (err) socket.destroy();
    });
  }
}

/** Gives `listeners` to `child` when it asks for them (once its IPC listener runs). */
export function giveWhenAsked(child: ChildProcess, listeners: HeldListener[]): void {
  const onMessage = (m: unknown) => {
    if ((m as { type?: unknown } | null)?.type !== ASK) return;
    child.off('message', onMessage);
    for (const l of listeners) l.giveTo(child);
  };
  child.on('message', onMessage);
}

// ----------------------------------------------------------------------------------------- child

/** Where a process's listeners come from when its supervisor holds them. */
export interface ListenerSource {
  /** The port the supervisor holds for `setting`, else undefined (the process binds its own). */
  heldPort(setting: string): number | undefined;
  /** Serves the held listener's connections on `server` (a node:http server, not listening itself). */
  attach(setting: string, server: NetServer): void;
}

/**
 * The listeners this process's supervisor holds (`ports`: setting → port) and sends over the IPC
 * channel. Connections that arrive before a server is attached wait for it, as in a listen backlog;
 * once `close`d, every new one is closed.
 */
export class ReceivedListeners implements ListenerSource {
  readonly #ports: ReadonlyMap<string, number>;
  readonly #servers = new Map<string, NetServer>();
  readonly #waiting = new Map<string, Socket[]>();
  readonly #handles: NetServer[] = [];
  #closed = false;

  constructor(ports: Record<string, number>) {
    this.#ports = new Map(Object.entries(ports));
    process.on('message', (message: unknown, handle: unknown) => {
      const m = heldMessage(message);
      if (!m || !this.#ports.has(m.name)) return;
      if (m.type === 'svc:listener' && handle instanceof NetServer) {
        this.#handles.push(handle);
        handle.on('connection', (socket: Socket) => this.#deliver(m.name, socket));
      } else if (m.type === 'svc:connection' && handle instanceof Socket) this.#deliver(m.name, handle);
    });
    process.send?.({ type: ASK });
  }

  heldPort(setting: string): number | undefined {
    return this.#ports.get(setting);
  }

  attach(setting: string, server: NetServer): void {
    this.#servers.set(setting, server);
    const waiting = this.#waiting.get(setting) ?? [];
    this.#waiting.delete(setting);
    for (const socket of waiting) this.#deliver(setting, socket);
  }

  /** Stops taking connections: the listeners go back to the supervisor, whose fallback serves them. */
  close(): void {
    this.#closed = true;
    for (const handle of this.#handles.splice(0)) handle.close();
    for (const sockets of this.#waiting.values()) for (const s of sockets) s.destroy();
    this.#waiting.clear();
  }

  #deliver(setting: string, socket: Socket): void {
    if (this.#closed) return void socket.destroy();
    const server = this.#servers.get(setting);
    if (!server) {
      const list = this.#waiting.get(setting) ?? [];
      list.push(socket);
      this.#waiting.set(setting, list);
      return;
    }
    // node:http's own listener sets no delay only on the connections it accepts itself.
    socket.setNoDelay(true);
    server.emit('connection', socket);
    socket.resume();
  }
}

/** Parses `--held-listeners SETTING=port,SETTING=port` (the local stack's agents). */
export function parseHeldPorts(value: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const pair of value.split(',').filter(Boolean)) {
    const m = /^(SVCD_[A-Z_]+)=(\d{1,5})$/.exec(pair);
    if (!m) throw new Error(`--held-listeners: expected SETTING=port, got ${pair}`);
    out[m[1]!] = Number(m[2]);
  }
  return out;
}
