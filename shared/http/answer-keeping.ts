/**
 * A client connection that keeps reading after a write the peer reset (docs/dataplane.md "Refused
 * bodies"). A server that answers before reading a whole body and then closes (workerd always
 * does; an engine's 413) resets the connection we are still writing to, but its answer has arrived
 * first and the kernel still holds it for reading. A plain node socket destroys itself on the write
 * error, and marks its readable side errored, so that answer is never read.
 *
 * Here undici gets a stream of our own (`KeptConnection`, a node:stream Duplex) over the real
 * socket: a write the peer reset (EPIPE, ECONNRESET) is left pending, so nothing more is written;
 * the real socket's one destroy for that error is deferred through the public `destroy` every
 * stream has, and its bytes are taken with `onread` (which delivers whatever the kernel holds as
 * long as the socket is not destroyed), so the answer reaches undici, which finishes the request
 * with it — or fails it when the read side ends without one. The socket goes once its read side
 * has reported, or after `HELD_MS` at the latest.
 */
import { Socket } from 'node:net';
import { Duplex } from 'node:stream';
import { errors } from 'undici';

/** Write errors that mean the peer reset the connection: what it sent before is still readable. */
const PEER_GONE = new Set(['EPIPE', 'ECONNRESET']);

/** How long a connection whose write failed is kept for its read side to report, at most. */
const HELD_MS = 30_000;

/** The size of the buffer each connection reads into (node's own default read size). */
const READ_BYTES = 64 * 1024;

/** True for the error of a write the peer reset. */
function peerGone(err: Error | null | undefined): err is NodeJS.ErrnoException {
  const e = err as NodeJS.ErrnoException | null | undefined;
  return e?.syscall === 'write' && PEER_GONE.has(e.code ?? '');
}

/** The real socket: its destroy for a write the peer reset waits for the read side (or `HELD_MS`). */
class HeldSocket extends Socket {
  #held = false;

  override destroy(err?: Error): this {
    if (this.#held || !peerGone(err)) return super.destroy(err);
    this.#held = true;
    const timer = setTimeout(() => super.destroy(err), HELD_MS);
    timer.unref();
    this.once('close', () => clearTimeout(timer));
    return this;
  }
}

/** What undici reads and writes: the bytes of `socket`, with a reset write left pending. */
class KeptConnection extends Duplex {
  readonly socket: HeldSocket;

  constructor(socket: HeldSocket) {
    super({
      allowHalfOpen: false,
      read: () => void socket.resume(),
      write: (chunk: Buffer, _encoding, cb) => {
        // Left pending when the peer reset the connection: the writer waits for a drain that never comes.
        socket.write(chunk, (err) => (peerGone(err) ? undefined : cb(err)));
      },
      final: (cb) => void socket.end(cb),
      destroy: (err, cb) => {
        socket.destroy();
        cb(err);
      },
    });
    this.socket = socket;
  }

  setNoDelay(noDelay?: boolean): this {
    this.socket.setNoDelay(noDelay);
    return this;
  }
  setKeepAlive(enable?: boolean, delay?: number): this {
    this.socket.setKeepAlive(enable, delay);
    return this;
  }
  ref(): this {
    this.socket.ref();
    return this;
  }
  unref(): this {
    this.socket.unref();
    return this;
  }
  get remoteAddress() {
    return this.socket.remoteAddress;
  }
  get remotePort() {
    return this.socket.remotePort;
  }
  get remoteFamily() {
    return this.socket.remoteFamily;
  }
  get localAddress() {
    return this.socket.localAddress;
  }
  get localPort() {
    return this.socket.localPort;
  }
  get bytesRead() {
    return this.socket.bytesRead;
  }
  get bytesWritten() {
    return this.socket.bytesWritten;
  }
}

/**
 * Connects to `target` (undici's connector contract: `callback(null, connection)` once connected,
 * `callback(err, null)` when not, a connect timeout after `timeoutMs`) and answers the connection.
 */
export function answerKeepingConnection(
  target: { host: string; port: number } | { path: string },
  timeoutMs: number,
  callback: (err: Error | null, socket: Duplex | null) => void,
): Duplex {
  let connection: KeptConnection | null = null;
  const buffer = Buffer.allocUnsafe(READ_BYTES);
  const socket = new HeldSocket({
    onread: {
      buffer,
      // The bytes are copied out of the shared buffer; a full stream pauses the socket.
      callback: (n: number) => connection!.push(Buffer.from(buffer.subarray(0, n))),
    },
  });
  connection = new KeptConnection(socket);
  socket.on('end', () => connection!.push(null));
  // Until it is handed over, a failure is the callback's to report: nobody listens on the connection yet.
  let handed = false;
  socket.on('error', (err) => connection!.destroy(handed ? err : undefined));
  socket.on('close', () => connection!.destroy());
  const timer = setTimeout(() => socket.destroy(new errors.ConnectTimeoutError()), timeoutMs);
  const onError = (err: Error) => {
    clearTimeout(timer);
    callback(err, null);
  };
  socket.once('error', onError);
  socket.once('connect', () => {
    clearTimeout(timer);
    socket.off('error', onError);
    socket.setNoDelay(true);
    socket.setKeepAlive(true, 60_000);
    handed = true;
    callback(null, connection);
  });
  socket.connect('path' in target ? { path: target.path } : { host: target.host, port: target.port });
  return connection;
}
