/**
 * Handing an accepted connection from one process to another (docs/local-stack.md "One hop for
 * `/v2`"): the local front reads the first bytes of a connection, and when its first request is one
 * the host agent serves itself (`/v2`, realtime subscribe and publish), sends the socket to the
 * agent over the IPC channel it was spawned with (node:child_process `send(message, socket)`),
 * together with the bytes it has read. The agent serves the connection on its own listener from
 * then on, so these requests cost one hop, as behind production's load balancer.
 *
 * What makes this exact: the sender stops its socket's reading before the send (node would read on
 * and drop what it read once the handle is sent), and the receiver has its HTTP server parse those
 * bytes before the socket reads anything more (`serveConnection`).
 */
import type { ChildProcess } from 'node:child_process';
import { Socket, type Server } from 'node:net';

/**
 * The IPC messages of one handed connection, in this order: the bytes read already, then the
 * socket itself. Apart, because a message that carries a handle must be small: node delivers the
 * handle with the read in which its message starts, and a message long enough to span several
 * reads arrives without it (node then retries three times and drops the connection).
 */
interface HeadMessage {
  type: 'svc:head';
  id: number;
  /** The bytes already read from the connection (base64): its first request, or the start of it. */
  head: string;
}
interface SocketMessage {
  type: 'svc:connection';
  id: number;
  /** The origin that serves what the receiver does not (the front's own URL). */
  origin: string;
}

let nextId = 0;

/**
 * Sends `socket` (with `head`, what was read of it) to `child` over its IPC channel; false, and the
 * socket left as it is, when the channel is not open. A send that fails afterwards (the child died
 * meanwhile) loses the connection: it is closed.
 */
export function handOver(child: ChildProcess, socket: Socket, head: Buffer, origin: string): boolean {
  if (!child.connected) return false;
  const id = ++nextId;
  const failed = (err: Error | null) => {
    if (err) socket.destroy();
  };
  child.send({ type: 'svc:head', id, head: head.toString('base64') } satisfies HeadMessage, failed);
  child.send({ type: 'svc:connection', id, origin } satisfies SocketMessage, socket, failed);
  return true;
}

/**
 * Receives the connections handed to this process (its parent's `handOver`), calling `take` with
 * each socket, the bytes read of it and the sender's origin. Listened to as long as the channel is
 * open: the caller decides what to do with a connection it cannot serve (close it).
 */
export function receiveHandedConnections(take: (socket: Socket, head: Buffer, origin: string) => void): void {
  const heads = new Map<number, Buffer>();
  process.on('message', (message: unknown, handle: unknown) => {
    const m = message as { type?: unknown; id?: unknown; head?: unknown; origin?: unknown } | null;
    if (typeof m !== 'object' || m === null || typeof m.id !== 'number') return;
    if (m.type === 'svc:head' && typeof m.head === 'string') heads.set(m.id, Buffer.from(m.head, 'base64'));
    else if (m.type === 'svc:connection' && typeof m.origin === 'string' && handle instanceof Socket) {
      const head = heads.get(m.id) ?? Buffer.alloc(0);
      heads.delete(m.id);
      take(handle, head, m.origin);
    }
  });
}

/** The handle below a net.Socket, as far as these helpers need it. */
interface ReadingHandle {
  reading?: boolean;
  readStop(): number;
  _consumed?: boolean;
}

function handleOf(socket: Socket): ReadingHandle | undefined {
  return (socket as unknown as { _handle?: ReadingHandle | null })._handle ?? undefined;
}

/** How many bytes of a connection are read at most before its first request line is judged. */
export const PEEK_MAX_BYTES = 8 * 1024;

/** How long a connection may take to send its first request line before the front judges it as it is. */
export const PEEK_MS = 10_000;

/**
 * Reads the start of a connection accepted with `pauseOnConnect` until its first line has arrived
 * (or `PEEK_MAX_BYTES`, or `PEEK_MS` passed), then stops reading and calls `decide` with every byte
 * read so far; nothing more is read until the socket is resumed or sent. A connection that ends or
 * fails first is destroyed and `decide` is never called.
 */
export function peekFirstLine(socket: Socket, decide: (head: Buffer) => void): void {
  const chunks: Buffer[] = [];
  let size = 0;
  const finish = () => {
    clearTimeout(timer);
    socket.off('data', onData);
    socket.off('end', onGone);
    socket.off('error', onGone);
    socket.off('close', onGone);
    decide(stopReading(socket, chunks));
  };
  const onData = (chunk: Buffer) => {
    chunks.push(chunk);
    size += chunk.byteLength;
    if (chunk.indexOf(0x0a) >= 0 || size >= PEEK_MAX_BYTES) finish();
  };
  const onGone = () => {
    clearTimeout(timer);
    socket.off('data', onData);
    socket.destroy();
  };
  const timer = setTimeout(finish, PEEK_MS);
  socket.on('data', onData);
  socket.once('end', onGone);
  socket.once('error', onGone);
  socket.once('close', onGone);
  socket.resume();
}

/**
 * Stops reading `socket`: paused, what its stream buffered appended to `chunks`, and its handle's
 * reading stopped (draining the buffer restarts it, and node's stream pause alone leaves it
 * running). Answers every byte read.
 */
export function stopReading(socket: Socket, chunks: Buffer[] = []): Buffer {
  socket.pause();
  for (let more = socket.read() as Buffer | null; more !== null; more = socket.read() as Buffer | null) chunks.push(more);
  const handle = handleOf(socket);
  if (handle?.reading) {
    handle.reading = false;
    handle.readStop();
  }
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
}

/**
 * Serves `socket` on `server` (a node:http server, listening or not) as a connection it accepted
 * itself, `head` being what was read from it already. The HTTP server parses `head` first, as the
 * connection's first bytes, then reads the socket as usual: node's parser takes the socket's reads
 * directly (no stream in between), which is why `head` is handed to it before the socket reads
 * again rather than put back in front of the stream (the parser would read past it). A socket
 * whose stream holds bytes already is served through the stream path, in order.
 */
export function serveConnection(server: Server, socket: Socket, head: Buffer): void {
  if (socket.readableLength > 0) {
    // Bytes buffered in the stream: put `head` before them and let the HTTP server read the stream.
    if (head.byteLength > 0) socket.unshift(head);
    const handle = handleOf(socket);
    if (handle) handle._consumed = true;
    server.emit('connection', socket);
  } else {
    server.emit('connection', socket);
    // node:http's own listener for the socket's data: it parses what it is given, in order.
    if (head.byteLength > 0) socket.emit('data', head);
  }
  socket.resume();
}
