/**
 * Refusing a request whose body is still arriving (RFC 9112 §9.6, "lingering close"): a server that
 * closes a connection with request bytes unread resets it, and the client can lose the answer with
 * it. Node's HTTP server does not linger once the body is left paused; workerd does not linger at
 * all. Used by the handlers' storage routes and by the host agent's blob routes.
 */

/** How long a refused body is read and discarded so that its answer arrives. */
export const LINGER_MS = 30_000;

/**
 * `refused`, sent while `body` (the request's unread rest) is read and discarded for at most
 * `lingerMs`: the answer's bytes go first, and it ends once the body has ended, the client has
 * gone, or the time is up. Nothing of the body is kept.
 */
export function answerWhileDraining(refused: Response, body: ReadableStream<Uint8Array> | null, lingerMs = LINGER_MS): Response {
  if (!body || body.locked || !refused.body) return refused;
  const answer = refused.body;
  const deadline = Date.now() + lingerMs;
  const lingering = new ReadableStream<Uint8Array>({
    async start(controller) {
      const out = answer.getReader();
      for (;;) {
        const { done, value } = await out.read();
        if (done) break;
        controller.enqueue(value);
      }
      const reader = body.getReader();
      try {
        while (Date.now() < deadline) if ((await reader.read()).done) break;
      } catch {
        // The client went away: nothing left to answer.
      } finally {
        reader.cancel().catch(() => {});
        controller.close();
      }
    },
  });
  return new Response(lingering, { status: refused.status, headers: refused.headers });
}
