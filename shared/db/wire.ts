/**
 * The fast path for the read on every request's path (the batched read of a session and its items,
 * shared/db/client.ts `batchGetItems`): DynamoDB's JSON protocol sent without the SDK's middleware
 * stack, which costs more CPU per call than the round trip to DynamoDB Local (docs/performance.md
 * "DynamoDB: the SDK beside the fast path" prints both, measured by test/bench/dynamodb.bench.ts).
 *
 * Only the sending is the wire's own; the protocol's parts are the SDK's libraries, taken from the
 * SDK client it sits beside: requests signed by @smithy/signature-v4 with the client's credential
 * provider and hash, retried by the client's own retry strategy (its attempts and retry tokens,
 * errors classified by @smithy/core's rules), the endpoint the client resolves (or
 * `SVCD_DYNAMODB_ENDPOINT`); items are converted by @aws-sdk/util-dynamodb (shared/db/client.ts).
 * Error answers are thrown under the names the SDK gives them, so the repository's checks read
 * them alike. Web-standard only (fetch): it runs in workerd and on Node; a Node entry may hand in a
 * lighter transport than fetch (shared/db/transport-node.ts).
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { isServerError, isThrottlingError, isTransientError } from '@smithy/core/retry';
import { SignatureV4 } from '@smithy/signature-v4';
import type { HttpRequest, RetryErrorType, RetryStrategyV2 } from '@smithy/types';

/** Sends one signed request: `body` to `url` with `headers`; answers the status and the body text. */
export type DbTransport = (url: string, init: { headers: Record<string, string>; body: string }) => Promise<{ status: number; body: string }>;

/** The transport of any runtime: fetch. */
export function fetchTransport(fetchImpl: typeof fetch = (...a) => fetch(...a)): DbTransport {
  return async (url, { headers, body }) => {
    const response = await fetchImpl(url, { method: 'POST', headers, body });
    return { status: response.status, body: await response.text() };
  };
}

/** One DynamoDB operation in the JSON protocol: input and output as the wire carries them. */
export type WireCall = (operation: string, input: Record<string, unknown>) => Promise<Record<string, any>>;

/** What a wire needs of its deployment. */
export interface WireOptions {
  region: string;
  /** `SVCD_DYNAMODB_ENDPOINT` when set; otherwise the SDK client's own resolution. */
  endpoint?: string | undefined;
  transport?: DbTransport;
  now?: () => number;
}

const TARGET_PREFIX = 'DynamoDB_20120810.';
const CONTENT_TYPE = 'application/x-amz-json-1.0';

/** A DynamoDB error answer, named as the SDK names it. */
export class DynamoError extends Error {
  readonly $metadata: { httpStatusCode: number };
  readonly CancellationReasons?: { Code?: string; Message?: string }[];

  constructor(name: string, message: string, status: number, reasons?: { Code?: string; Message?: string }[]) {
    super(message);
    this.name = name;
    this.$metadata = { httpStatusCode: status };
    if (reasons) this.CancellationReasons = reasons;
  }
}

/** The SDK client's configuration the wire borrows (resolved by the client; not all of it is in its public type). */
interface BorrowedConfig {
  credentials: ConstructorParameters<typeof SignatureV4>[0]['credentials'];
  sha256: ConstructorParameters<typeof SignatureV4>[0]['sha256'];
  retryStrategy(): Promise<RetryStrategyV2>;
  endpointProvider(p: { Region: string }): { url: URL } | Promise<{ url: URL }>;
}

/** Builds the wire over `client`'s credentials, hash and retry strategy. */
export function createWire(client: DynamoDBClient, options: WireOptions): WireCall {
  const config = client.config as unknown as BorrowedConfig;
  const transport = options.transport ?? fetchTransport();
  const now = options.now ?? (() => Date.now());
  const signer = new SignatureV4({
    credentials: config.credentials,
    sha256: config.sha256,
    region: options.region,
    service: 'dynamodb',
    uriEscapePath: true,
    applyChecksum: false,
  });
  const endpointUrl = once(() => resolveEndpoint(config, options));
  const strategy = once(() => config.retryStrategy());

  return async (operation, input) => {
    const url = await endpointUrl();
    const body = JSON.stringify(input);
    const retries = await strategy();
    let token = await retries.acquireInitialRetryToken('dynamodb');
    for (;;) {
      const signed = await signer.sign(requestOf(url, operation, body), { signingDate: new Date(now()) });
      let failure: unknown;
      try {
        const answer = await transport(url.href, { headers: sentHeaders(signed.headers), body });
        if (answer.status === 200) {
          retries.recordSuccess(token);
          return answer.body === '' ? {} : (JSON.parse(answer.body) as Record<string, any>);
        }
        failure = errorOf(answer.status, answer.body);
      } catch (err) {
        // No answer at all (a lost connection): transient, as the SDK treats it.
        failure = err;
      }
      try {
        token = await retries.refreshRetryTokenForRetry(token, { errorType: errorTypeOf(failure) });
      } catch {
        throw failure;
      }
      await new Promise((r) => setTimeout(r, token.getRetryDelay()));
    }
  };
}

/** Memoises an async value; a failure is forgotten, so the next call tries again. */
function once<T>(make: () => Promise<T>): () => Promise<T> {
  let value: Promise<T> | null = null;
  return () => {
    value ??= make().catch((err: unknown) => {
      value = null;
      throw err;
    });
    return value;
  };
}

/** The unsigned request of one operation. */
function requestOf(url: URL, operation: string, body: string): HttpRequest {
  return {
    method: 'POST',
    protocol: url.protocol,
    hostname: url.hostname,
    ...(url.port ? { port: Number(url.port) } : {}),
    path: url.pathname || '/',
    query: {},
    headers: { 'content-type': CONTENT_TYPE, host: url.host, 'x-amz-target': `${TARGET_PREFIX}${operation}` },
    body,
  };
}

/** The signed headers as sent: `host` is the transport's to write (fetch refuses it). */
function sentHeaders(headers: Record<string, string>): Record<string, string> {
  const { host: _host, ...sent } = headers;
  return sent;
}

/** How the SDK's retry strategy treats a failure: throttling and transient ones are retried. */
function errorTypeOf(failure: unknown): RetryErrorType {
  if (!(failure instanceof DynamoError)) return 'TRANSIENT';
  if (isThrottlingError(failure as never)) return 'THROTTLING';
  if (isTransientError(failure as never)) return 'TRANSIENT';
  if (isServerError(failure as never)) return 'SERVER_ERROR';
  return 'CLIENT_ERROR';
}

async function resolveEndpoint(config: BorrowedConfig, options: WireOptions): Promise<URL> {
  if (options.endpoint) return new URL(options.endpoint);
  const resolved = await config.endpointProvider({ Region: options.region });
  return new URL(resolved.url.href);
}

/** An error answer of the JSON protocol (`__type`, `message`) under the SDK's name for it. */
function errorOf(status: number, text: string): DynamoError {
  let parsed: { __type?: unknown; message?: unknown; Message?: unknown; CancellationReasons?: unknown } = {};
  try {
    parsed = JSON.parse(text) as typeof parsed;
  } catch {
    // not JSON: named by its status below
  }
  const type = typeof parsed.__type === 'string' ? parsed.__type : '';
  const name = type.slice(type.lastIndexOf('#') + 1) || (status >= 500 ? 'InternalServerError' : 'UnknownError');
  const message = typeof parsed.message === 'string' ? parsed.message : typeof parsed.Message === 'string' ? parsed.Message : `DynamoDB answered ${status}`;
  const reasons = Array.isArray(parsed.CancellationReasons) ? (parsed.CancellationReasons as { Code?: string; Message?: string }[]) : undefined;
  return new DynamoError(name, message, status, reasons);
}
