/**
 * DynamoDB's JSON protocol spoken directly, for the requests on every request's path (the batched
 * read of a session and its items, docs/performance.md "Control plane"): the SDK's middleware
 * stack costs about 1 ms of CPU per call on top of the request itself, more than the round trip to
 * DynamoDB Local. Same credentials (the SDK client's own provider, refreshed by it), same endpoint
 * (the SDK's resolution, or `SVCD_DYNAMODB_ENDPOINT`), requests signed with AWS Signature Version 4
 * (checked equal to the SDK's signer in wire.test.ts), errors thrown with the SDK's names
 * (`ConditionalCheckFailedException`, `TransactionCanceledException` with `CancellationReasons`) so
 * the repository's checks read them alike, and the SDK's retry rule (3 attempts for throttling,
 * 5xx and lost connections). Web-standard only (fetch, Web Crypto): it runs in workerd and on Node;
 * a Node entry may hand in a lighter transport than fetch (shared/db/transport-node.ts).
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';

/** Sends one signed request: `body` to `url` with `headers`; answers the status and the body text. */
export type DbTransport = (url: string, init: { headers: Record<string, string>; body: string }) => Promise<{ status: number; body: string }>;

/** The transport of any runtime: fetch. */
export function fetchTransport(fetchImpl: typeof fetch = (...a) => fetch(...a)): DbTransport {
  return async (url, { headers, body }) => {
    const response = await fetchImpl(url, { method: 'POST', headers, body });
    return { status: response.status, body: await response.text() };
  };
}

/** A DynamoDB attribute value in the JSON protocol. */
export type AttributeValue = Record<string, unknown>;

/** One DynamoDB operation in the JSON protocol: input and output as the wire carries them. */
export type WireCall = (operation: string, input: Record<string, unknown>) => Promise<Record<string, any>>;

/** What a wire needs of its deployment. */
export interface WireOptions {
  region: string;
  /** `SVCD_DYNAMODB_ENDPOINT` when set; otherwise the SDK client's own resolution. */
  endpoint?: string | undefined;
  transport?: DbTransport;
  /** Attempts per call, as the SDK client's `maxAttempts`. */
  maxAttempts?: number;
  now?: () => number;
}

const TARGET_PREFIX = 'DynamoDB_20120810.';
const CONTENT_TYPE = 'application/x-amz-json-1.0';
const SERVICE = 'dynamodb';
/** The SDK's retryable error names (throttling and transient), beside any 5xx and lost connection. */
const RETRYABLE = new Set([
  'ProvisionedThroughputExceededException',
  'ThrottlingException',
  'RequestLimitExceeded',
  'RequestThrottledException',
  'TransactionInProgressException',
  'InternalServerError',
  'ServiceUnavailable',
]);

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

/** Builds the wire over `client`'s credentials. */
export function createWire(client: DynamoDBClient, options: WireOptions): WireCall {
  const transport = options.transport ?? fetchTransport();
  const maxAttempts = Math.max(1, options.maxAttempts ?? 3);
  const now = options.now ?? (() => Date.now());
  let endpoint: Promise<URL> | null = null;
  const endpointUrl = (): Promise<URL> => {
    endpoint ??= resolveEndpoint(client, options).catch((err: unknown) => {
      endpoint = null;
      throw err;
    });
    return endpoint;
  };

  return async (operation, input) => {
    const url = await endpointUrl();
    const body = JSON.stringify(input);
    for (let attempt = 1; ; attempt++) {
      const credentials = await client.config.credentials();
      const headers = await signedHeaders(url, operation, body, credentials, options.region, now());
      let answer: { status: number; body: string };
      try {
        answer = await transport(url.href, { headers, body });
      } catch (err) {
        if (attempt < maxAttempts) {
          await pause(attempt);
          continue;
        }
        throw err;
      }
      if (answer.status === 200) return answer.body === '' ? {} : (JSON.parse(answer.body) as Record<string, any>);
      const error = errorOf(answer.status, answer.body);
      if (attempt < maxAttempts && (answer.status >= 500 || RETRYABLE.has(error.name))) {
        await pause(attempt);
        continue;
      }
      throw error;
    }
  };
}

/** The SDK's backoff: a random pause up to 100 ms × 2^(attempt-1). */
function pause(attempt: number): Promise<void> {
  return new Promise((r) => setTimeout(r, Math.random() * 100 * 2 ** (attempt - 1)));
}

async function resolveEndpoint(client: DynamoDBClient, options: WireOptions): Promise<URL> {
  if (options.endpoint) return new URL(options.endpoint);
  const resolved = await (client.config as unknown as { endpointProvider(p: { Region: string }): { url: URL } | Promise<{ url: URL }> }).endpointProvider({
    Region: options.region,
  });
  return new URL(resolved.url.href);
}

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

// ---------------------------------------------------------------------------------------------
// Signature Version 4 (docs.aws.amazon.com/IAM/latest/UserGuide/create-signed-request.html)
// ---------------------------------------------------------------------------------------------

const encoder = new TextEncoder();

/** Signing keys by secret, date and region: derived once a day. */
const signingKeys = new Map<string, Promise<CryptoKey>>();

async function hmac(key: CryptoKey, data: string): Promise<ArrayBuffer> {
  return crypto.subtle.sign('HMAC', key, encoder.encode(data));
}

function hmacKey(raw: BufferSource): Promise<CryptoKey> {
  return crypto.subtle.importKey('raw', raw, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
}

function signingKey(secret: string, date: string, region: string): Promise<CryptoKey> {
  const id = `${date}\u0000${region}\u0000${secret}`;
  let key = signingKeys.get(id);
  if (!key) {
    key = (async () => {
      let k = await hmac(await hmacKey(encoder.encode(`AWS4${secret}`)), date);
      for (const part of [region, SERVICE, 'aws4_request']) k = await hmac(await hmacKey(k), part);
      return hmacKey(k);
    })();
    // A day's keys only: the previous day's go when a new one is derived.
    for (const old of signingKeys.keys()) if (!old.startsWith(`${date}\u0000`)) signingKeys.delete(old);
    signingKeys.set(id, key);
    key.catch(() => signingKeys.delete(id));
  }
  return key;
}

function hex(bytes: ArrayBuffer): string {
  let out = '';
  for (const b of new Uint8Array(bytes)) out += b.toString(16).padStart(2, '0');
  return out;
}

async function sha256Hex(text: string): Promise<string> {
  return hex(await crypto.subtle.digest('SHA-256', encoder.encode(text)));
}

/** `20260101T000000Z` of a time. */
export function amzDate(at: number): string {
  return new Date(at).toISOString().replace(/[-:]/g, '').replace(/\.\d{3}/, '');
}

/**
 * The headers of one signed request: the JSON protocol's own and `authorization`. Signed: content
 * type, host, date, target and, for temporary credentials, the session token.
 */
export async function signedHeaders(
  url: URL,
  operation: string,
  body: string,
  credentials: { accessKeyId: string; secretAccessKey: string; sessionToken?: string | undefined },
  region: string,
  at: number,
): Promise<Record<string, string>> {
  const date = amzDate(at);
  const day = date.slice(0, 8);
  const headers: Record<string, string> = {
    'content-type': CONTENT_TYPE,
    host: url.host,
    'x-amz-date': date,
    ...(credentials.sessionToken ? { 'x-amz-security-token': credentials.sessionToken } : {}),
    'x-amz-target': `${TARGET_PREFIX}${operation}`,
  };
  // Already lower-case and in code-point order: the canonical order of SigV4.
  const names = Object.keys(headers).sort();
  const canonical = [
    'POST',
    url.pathname || '/',
    '',
    ...names.map((n) => `${n}:${headers[n]!.trim()}`),
    '',
    names.join(';'),
    await sha256Hex(body),
  ].join('\n');
  const scope = `${day}/${region}/${SERVICE}/aws4_request`;
  const toSign = ['AWS4-HMAC-SHA256', date, scope, await sha256Hex(canonical)].join('\n');
  const signature = hex(await hmac(await signingKey(credentials.secretAccessKey, day, region), toSign));
  const { host: _host, ...sent } = headers;
  return {
    ...sent,
    authorization: `AWS4-HMAC-SHA256 Credential=${credentials.accessKeyId}/${scope}, SignedHeaders=${names.join(';')}, Signature=${signature}`,
  };
}

// ---------------------------------------------------------------------------------------------
// Attribute values, as the document client converts them (@aws-sdk/util-dynamodb defaults)
// ---------------------------------------------------------------------------------------------

/** A plain value as an attribute value: strings, numbers, booleans, null, arrays, plain objects, Uint8Array. */
export function toAttribute(value: unknown): AttributeValue {
  if (value === null) return { NULL: true };
  switch (typeof value) {
    case 'string':
      return { S: value };
    case 'number':
      if (!Number.isFinite(value)) throw new Error(`number ${value} cannot be stored`);
      return { N: String(value) };
    case 'bigint':
      return { N: value.toString() };
    case 'boolean':
      return { BOOL: value };
    case 'object': {
      if (value instanceof Uint8Array) return { B: base64Of(value) };
      if (Array.isArray(value)) return { L: value.filter((v) => v !== undefined).map(toAttribute) };
      if (value instanceof Set) throw new Error('sets are not written through the wire');
      return { M: toItem(value as Record<string, unknown>) };
    }
    default:
      throw new Error(`a ${typeof value} cannot be stored`);
  }
}

/** An object's defined fields as attribute values (undefined ones removed, as the document client does). */
export function toItem(values: Record<string, unknown>): Record<string, AttributeValue> {
  const out: Record<string, AttributeValue> = {};
  for (const [k, v] of Object.entries(values)) if (v !== undefined) out[k] = toAttribute(v);
  return out;
}

/** An attribute value as a plain value. */
export function fromAttribute(value: AttributeValue): unknown {
  for (const [type, v] of Object.entries(value)) {
    if (v === undefined) continue;
    switch (type) {
      case 'NULL':
        return null;
      case 'BOOL':
        return Boolean(v);
      case 'S':
        return v as string;
      case 'N':
        return numberOf(v as string);
      case 'B':
        return bytesOf(v as string);
      case 'L':
        return (v as AttributeValue[]).map(fromAttribute);
      case 'M':
        return fromItem(v as Record<string, AttributeValue>);
      case 'SS':
        return new Set(v as string[]);
      case 'NS':
        return new Set((v as string[]).map(numberOf));
      case 'BS':
        return new Set((v as string[]).map(bytesOf));
      default:
        throw new Error(`unsupported attribute type ${type}`);
    }
  }
  throw new Error('an attribute value without a value');
}

/** An item's attribute values as plain values. */
export function fromItem(item: Record<string, AttributeValue>): Record<string, any> {
  const out: Record<string, any> = {};
  for (const [k, v] of Object.entries(item)) out[k] = fromAttribute(v);
  return out;
}

/** As @aws-sdk/util-dynamodb: a number, or a BigInt beyond the safe integers. */
function numberOf(text: string): number | bigint {
  const n = Number(text);
  if ((n > Number.MAX_SAFE_INTEGER || n < Number.MIN_SAFE_INTEGER) && Number.isFinite(n)) return BigInt(text);
  return n;
}

function base64Of(bytes: Uint8Array): string {
  let s = '';
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s);
}

function bytesOf(text: string): Uint8Array {
  const s = atob(text);
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}
