/**
 * The wire's signatures against the SDK's own signer (@smithy/signature-v4, what every SDK call
 * signs with) on the same request, time and credentials; and its attribute values against the
 * document client's conversions.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SignatureV4 } from '@smithy/signature-v4';
import { describe, expect, it } from 'vitest';
import { amzDate, createWire, DynamoError, fromItem, signedHeaders, toItem, type DbTransport } from './wire.ts';

const sdk = new DynamoDBClient({ region: 'eu-west-1', credentials: { accessKeyId: 'x', secretAccessKey: 'y' } });
const Sha256 = (sdk.config as unknown as { sha256: new (secret?: unknown) => unknown }).sha256;

async function sdkAuthorization(
  url: URL,
  headers: Record<string, string>,
  body: string,
  credentials: { accessKeyId: string; secretAccessKey: string; sessionToken?: string },
  region: string,
  at: number,
): Promise<string> {
  const signer = new SignatureV4({ credentials, region, service: 'dynamodb', sha256: Sha256 as never, uriEscapePath: true, applyChecksum: false });
  const signed = await signer.sign(
    {
      method: 'POST',
      protocol: url.protocol,
      hostname: url.hostname,
      ...(url.port ? { port: Number(url.port) } : {}),
      path: url.pathname,
      query: {},
      headers: { ...headers, host: url.host },
      body,
    } as never,
    { signingDate: new Date(at) },
  );
  return (signed as unknown as { headers: Record<string, string> }).headers.authorization!;
}

describe('signatures', () => {
  const cases = [
    { url: 'https://dynamodb.eu-west-1.amazonaws.com/', region: 'eu-west-1', credentials: { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY' } },
    {
      url: 'http://127.0.0.1:8000/',
      region: 'us-east-1',
      credentials: { accessKeyId: 'ASIAEXAMPLE', secretAccessKey: 'secret', sessionToken: 'IQoJb3JpZ2luX2VjEA token/with+odd=chars' },
    },
  ];
  for (const { url, region, credentials } of cases) {
    it(`equal the SDK's for ${url}${credentials.sessionToken ? ' with a session token' : ''}`, async () => {
      const at = Date.UTC(2026, 10, 23, 15, 4, 5, 678);
      const body = JSON.stringify({ RequestItems: { t: { Keys: [{ pk: { S: 'PRJ#prj_0123456789abcdef' }, sk: { S: 'PROJECT' } }], ConsistentRead: true } } });
      const u = new URL(url);
      const ours = await signedHeaders(u, 'BatchGetItem', body, credentials, region, at);
      const { authorization, ...sent } = ours;
      expect(sent['x-amz-date']).toBe('20261123T150405Z');
      expect(authorization).toBe(await sdkAuthorization(u, sent, body, credentials, region, at));
    });
  }

  it('change with every signed part: body, operation, time, region, key', async () => {
    const u = new URL('https://dynamodb.eu-west-1.amazonaws.com/');
    const c = { accessKeyId: 'a', secretAccessKey: 'b' };
    const at = Date.UTC(2026, 0, 1);
    const base = (await signedHeaders(u, 'GetItem', '{}', c, 'eu-west-1', at)).authorization;
    const variants = [
      signedHeaders(u, 'GetItem', '{ }', c, 'eu-west-1', at),
      signedHeaders(u, 'PutItem', '{}', c, 'eu-west-1', at),
      signedHeaders(u, 'GetItem', '{}', c, 'eu-west-1', at + 1000),
      signedHeaders(u, 'GetItem', '{}', c, 'eu-west-2', at),
      signedHeaders(u, 'GetItem', '{}', { ...c, secretAccessKey: 'c' }, 'eu-west-1', at),
    ];
    for (const v of await Promise.all(variants)) expect(v.authorization).not.toBe(base);
  });

  it('date the request in the basic ISO 8601 form', () => {
    expect(amzDate(Date.UTC(2026, 0, 2, 3, 4, 5, 999))).toBe('20260102T030405Z');
  });
});

describe('calls', () => {
  const at = () => Date.UTC(2026, 0, 1);
  const client = new DynamoDBClient({ region: 'us-east-1', credentials: { accessKeyId: 'a', secretAccessKey: 'b' } });

  it('answer the parsed body of a 200 and send the operation as the target', async () => {
    const seen: { url: string; headers: Record<string, string> }[] = [];
    const transport: DbTransport = async (url, init) => {
      seen.push({ url, headers: init.headers });
      return { status: 200, body: '{"Item":{"pk":{"S":"a"}}}' };
    };
    const wire = createWire(client, { region: 'us-east-1', endpoint: 'http://127.0.0.1:1/', transport, now: at });
    expect(await wire('GetItem', { TableName: 't' })).toEqual({ Item: { pk: { S: 'a' } } });
    expect(seen[0]!.url).toBe('http://127.0.0.1:1/');
    expect(seen[0]!.headers['x-amz-target']).toBe('DynamoDB_20120810.GetItem');
    expect(seen[0]!.headers['content-type']).toBe('application/x-amz-json-1.0');
  });

  it('throw refusals under the SDK name, with a cancelled transaction’s reasons, without retrying them', async () => {
    let calls = 0;
    const transport: DbTransport = async () => {
      calls++;
      return {
        status: 400,
        body: JSON.stringify({
          __type: 'com.amazonaws.dynamodb.v20120810#TransactionCanceledException',
          message: 'Transaction cancelled',
          CancellationReasons: [{ Code: 'None' }, { Code: 'ConditionalCheckFailed', Message: 'The conditional request failed' }],
        }),
      };
    };
    const wire = createWire(client, { region: 'us-east-1', endpoint: 'http://127.0.0.1:1/', transport, now: at });
    const err = (await wire('TransactWriteItems', {}).catch((e: unknown) => e)) as DynamoError;
    expect(err).toBeInstanceOf(DynamoError);
    expect(err.name).toBe('TransactionCanceledException');
    expect(err.CancellationReasons?.map((r) => r.Code)).toEqual(['None', 'ConditionalCheckFailed']);
    expect(calls).toBe(1);
  });

  it('retry throttling, 5xx and lost connections up to the attempts given', async () => {
    const answers: (Error | { status: number; body: string })[] = [
      new Error('socket hang up'),
      { status: 400, body: '{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException","message":"slow down"}' },
      { status: 200, body: '{}' },
    ];
    const transport: DbTransport = async () => {
      const next = answers.shift()!;
      if (next instanceof Error) throw next;
      return next;
    };
    const wire = createWire(client, { region: 'us-east-1', endpoint: 'http://127.0.0.1:1/', transport, now: at, maxAttempts: 3 });
    expect(await wire('GetItem', {})).toEqual({});
    const failing: DbTransport = async () => ({ status: 500, body: 'no' });
    const err = (await createWire(client, { region: 'us-east-1', endpoint: 'http://127.0.0.1:1/', transport: failing, maxAttempts: 2 })('GetItem', {}).catch(
      (e: unknown) => e,
    )) as DynamoError;
    expect(err.name).toBe('InternalServerError');
    expect(err.$metadata.httpStatusCode).toBe(500);
  });

  it("use the SDK's endpoint when the deployment names none", async () => {
    const seen: string[] = [];
    const transport: DbTransport = async (url) => {
      seen.push(url);
      return { status: 200, body: '{}' };
    };
    await createWire(new DynamoDBClient({ region: 'eu-west-1', credentials: { accessKeyId: 'a', secretAccessKey: 'b' } }), { region: 'eu-west-1', transport })('GetItem', {});
    expect(seen).toEqual(['https://dynamodb.eu-west-1.amazonaws.com/']);
  });
});

describe('attribute values', () => {
  it('round-trip what the repository stores, as the document client converts it', () => {
    const item = { s: 'text', n: 42, f: 1.5, big: 2n ** 60n, t: true, nil: null, list: ['a', 1, { x: 'y' }], map: { inner: { deeper: false } }, bytes: new Uint8Array([0, 1, 255]) };
    const wire = toItem({ ...item, gone: undefined });
    expect(wire.s).toEqual({ S: 'text' });
    expect(wire.n).toEqual({ N: '42' });
    expect(wire.big).toEqual({ N: '1152921504606846976' });
    expect(wire.nil).toEqual({ NULL: true });
    expect(wire.bytes).toEqual({ B: 'AAH/' });
    expect('gone' in wire).toBe(false);
    expect(fromItem(wire)).toEqual(item);
  });

  it('read sets as sets', () => {
    expect(fromItem({ ss: { SS: ['a', 'b'] }, ns: { NS: ['1', '2'] } })).toEqual({ ss: new Set(['a', 'b']), ns: new Set([1, 2]) });
  });
});
