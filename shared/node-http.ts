/**
 * Serves a fetch-style handler (`(Request) => Promise<Response>`) on node:http, streaming both
 * ways: the request body reaches the handler as a web stream, the response body is piped out with
 * backpressure, and a client that disconnects aborts the request's signal.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';

/** A running server and how to stop it. */
export interface Served {
  server: Server;
  url: string;
  port: number;
  close(): Promise<void>;
}

/** Converts a Node request into a web Request (body streamed, never buffered). */
export function toWebRequest(req: IncomingMessage, res: ServerResponse, origin: string): Request {
  const controller = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) controller.abort();
  });
  const headers = new Headers();
  for (let i = 0; i < req.rawHeaders.length; i += 2) headers.append(req.rawHeaders[i]!, req.rawHeaders[i + 1]!);
  const method = req.method ?? 'GET';
  const hasBody = method !== 'GET' && method !== 'HEAD';
  return new Request(new URL(req.url ?? '/', origin), {
    method,
    headers,
    body: hasBody ? (Readable.toWeb(req) as ReadableStream<Uint8Array>) : undefined,
    signal: controller.signal,
    ...(hasBody ? { duplex: 'half' } : {}),
  } as RequestInit);
}

/** Writes a web Response to a Node response, streaming its body. */
export async function writeWebResponse(response: Response, res: ServerResponse): Promise<void> {
  const headers: Record<string, string | string[]> = {};
  response.headers.forEach((value, name) => {
    if (name === 'set-cookie') return;
    headers[name] = value;
  });
  const cookies = response.headers.getSetCookie();
  if (cookies.length) headers['set-cookie'] = cookies;
  res.writeHead(response.status, headers);
  if (!response.body) {
    res.end();
    return;
  }
  await pipeline(Readable.fromWeb(response.body as never), res);
}

/** Starts serving `handler` on host:port (port 0 picks a free one). */
export async function serveFetch(
  handler: (request: Request) => Promise<Response>,
  { host, port, setting, onError = () => {} }: { host: string; port: number; setting?: string; onError?: (err: unknown) => void },
): Promise<Served> {
  const server = createServer((req, res) => {
    const origin = `http://${req.headers.host ?? `${host}:${port}`}`;
    let request: Request;
    try {
      request = toWebRequest(req, res, origin);
    } catch (err) {
      onError(err);
      res.writeHead(400, { 'content-type': 'application/json' }).end(
        JSON.stringify({ error: { code: 'invalid_request', message: 'malformed request' } }),
      );
      return;
    }
    handler(request)
      .then((response) => writeWebResponse(response, res))
      .catch((err) => {
        // A client that went away mid-body is not a server fault.
        if ((err as { code?: string }).code !== 'ERR_STREAM_PREMATURE_CLOSE') onError(err);
        if (!res.headersSent) res.writeHead(500).end();
        else res.destroy();
      });
  });
  server.keepAliveTimeout = 65_000;
  await listen(server, host, port, setting);
  const actual = (server.address() as AddressInfo).port;
  return {
    server,
    port: actual,
    url: `http://${host}:${actual}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** Listens, turning "address in use" into one clear line naming the port. */
export function listen(server: Server, host: string, port: number, setting?: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException) => {
      if (err.code === 'EADDRINUSE') {
        reject(new Error(`port ${port} on ${host} is already in use${setting ? `: set ${setting} to another port` : ''}`));
      } else reject(err);
    };
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolve();
    });
  });
}
