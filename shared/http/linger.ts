/**
 * Refusing a request whose body is still arriving (RFC 9112 §9.6, "lingering close"): a server that
 * closes a connection with request bytes unread resets it, and the client can lose the answer with
 * it. workerd does not linger at all, so a handler that refuses early keeps reading the body itself
 * while its answer goes out. Used by the handlers' storage routes and by the host agent's blob
 * routes; the node:http listeners also linger at the connection level (shared/http/node-http.ts).
 */

/** How long a refused body is read and discarded so that its answer arrives. */
export const LINGER_MS = 30_000;

/** workerd's stream of a declared length (absent on Node). */
type FixedLengthStreamCtor = new (length: number) => { readable: ReadableStream<Uint8Array>; writable: WritableStream<Uint8Array> };

/**
 * `refused`, sent while `body` (the request's unread rest) is read and discarded for at most
 * `lingerMs`: the answer's bytes go first, and the connection is released once the body has
 * ended, the client has gone, or the time is up. Nothing of the body is kept.
 *
 * When `refused` declares its length (`Content-Length`, as every error answer does), the answer
 * keeps it: the client sees a complete answer at once and may stop sending (curl does), instead
 * of waiting for an answer that only ends once the body it stopped sending has been read. On
 * workerd, which ignores the header on a streamed body, a FixedLengthStream declares it.
 */
export function answerWhileDraining(refused: Response, body: ReadableStream<Uint8Array> | null, lingerMs = LINGER_MS): Response {
  if (!body || body.locked || !refused.body) return refused;
  const answer = refused.body;
  const declared = refused.headers.get('content-length');
  const length = declared !== null && /^\d{1,15}$/.test(declared) ? Number(declared) : null;
  const drain = async () => {
    const reader = body.getReader();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeUp = new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), lingerMs)));
    try {
      // The deadline holds while a read waits too: a client that stops sending is not waited for.
      for (;;) {
        const step = await Promise.race([reader.read(), timeUp]);
        if (step === null || step.done) break;
      }
    } catch {
      // The client went away: nothing left to answer.
    } finally {
      clearTimeout(timer);
      reader.cancel().catch(() => {});
    }
  };
  const Fixed = (globalThis as { FixedLengthStream?: FixedLengthStreamCtor }).FixedLengthStream;
  if (length !== null && Fixed) {
    const { readable, writable } = new Fixed(length);
    const writer = writable.getWriter();
    void (async () => {
      const out = answer.getReader();
      for (;;) {
        const { done, value } = await out.read();
        if (done) break;
        await writer.write(value);
      }
      await drain();
      await writer.close();
    })().catch(() => writer.abort().catch(() => {}));
    return new Response(readable, { status: refused.status, headers: refused.headers });
  }
  const lingering = new ReadableStream<Uint8Array>({
    async start(controller) {
      const out = answer.getReader();
      for (;;) {
        const { done, value } = await out.read();
        if (done) break;
        controller.enqueue(value);
      }
      await drain();
      controller.close();
    },
  });
  return new Response(lingering, { status: refused.status, headers: refused.headers });
}
