/**
 * The wire (./wire.ts): its requests signed as the SDK signs them (@smithy/signature-v4, checked
 * against a signature computed independently with Web Crypto from the SigV4 steps), the operation
 * sent as the target, refusals thrown under the SDK's names, and the SDK client's retry strategy.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { describe, expect, it } from 'vitest';
import { createWire, DynamoError, type DbTransport } from './wire.ts';

const enc = new TextEncoder();
const hex = (b: ArrayBuffer) => [...new Uint8Array(b)].map((x) => x.toString(16).padStart(2, '0')).join('');
const hmac = async (key: BufferSource, data: string) =>
  crypto.subtle.sign('HMAC', await crypto.subtle.importKey('raw', key, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']), enc.encode(data));
const sha256 = async (text: string) => hex(await crypto.subtle.digest('SHA-256', enc.encode(text)));

/** SigV4 of a POST by the published steps (docs.aws.amazon.com/IAM/latest/UserGuide/create-signed-request.html). */
async function expectedAuthorization(url: URL, headers: Record<string, string>, body: string, secret: string, accessKeyId: string, region: string): Promise<string> {
  const all: Record<string, string> = { ...headers, host: url.host };
  const names = Object.keys(all).map((n) => n.toLowerCase()).sort();
  const lower = Object.fromEntries(Object.entries(all).map(([k, v]) => [k.toLowerCase(), v]));
  const canonical = ['POST', url.pathname || '/', '', ...names.map((n) => `${n}:${lower[n]!.trim()}`), '', names.join(';'), await sha256(body)].join('\n');
  const date = lower['x-amz-date']!;
  const scope = `${date.slice(0, 8)}/${region}/dynamodb/aws4_request`;
  const toSign = ['AWS4-HMAC-SHA256', date, scope, await sha256(canonical)].join('\n');
  let key: ArrayBuffer = await hmac(enc.encode(`AWS4${secret}`), date.slice(0, 8));
  for (const part of [region, 'dynamodb', 'aws4_request']) key = await hmac(key, part);
  return `AWS4-HMAC-SHA256 Credential=${accessKeyId}/${scope}, SignedHeaders=${names.join(';')}, Signature=${hex(await hmac(key, toSign))}`;
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
    it(`follow SigV4 for ${url}${credentials.sessionToken ? ' with a session token' : ''}`, async () => {
      const at = Date.UTC(2026, 10, 23, 15, 4, 5, 678);
      const body = JSON.stringify({ RequestItems: { t: { Keys: [{ pk: { S: 'PRJ#prj_0123456789abcdef' }, sk: { S: 'PRJ' } }], ConsistentRead: true } } });
      let sent: Record<string, string> = {};
      const transport: DbTransport = async (_url, init) => {
        sent = init.headers;
        return { status: 200, body: '{}' };
      };
      const client = new DynamoDBClient({ region, credentials });
      await createWire(client, { region, endpoint: url, transport, now: () => at })('BatchGetItem', JSON.parse(body) as Record<string, unknown>);
      const { authorization, ...rest } = sent;
      expect(rest['x-amz-date']).toBe('20261123T150405Z');
      expect(rest['host']).toBeUndefined();
      if (credentials.sessionToken) expect(rest['x-amz-security-token']).toBe(credentials.sessionToken);
      expect(authorization).toBe(await expectedAuthorization(new URL(url), rest, body, credentials.secretAccessKey, credentials.accessKeyId, region));
    });
  }
});

describe('calls', () => {
  const at = () => Date.UTC(2026, 0, 1);
  const client = new DynamoDBClient({ region: 'us-east-1', credentials: { accessKeyId: 'a', secretAccessKey: 'b' }, maxAttempts: 3 });

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

  it("retry throttling, 5xx and lost connections up to the SDK client's attempts", async () => {
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
    const wire = createWire(client, { region: 'us-east-1', endpoint: 'http://127.0.0.1:1/', transport, now: at });
    expect(await wire('GetItem', {})).toEqual({});
    let tries = 0;
    const failing: DbTransport = async () => {
      tries++;
      return { status: 500, body: 'no' };
    };
    const twice = new DynamoDBClient({ region: 'us-east-1', credentials: { accessKeyId: 'a', secretAccessKey: 'b' }, maxAttempts: 2 });
    const err = (await createWire(twice, { region: 'us-east-1', endpoint: 'http://127.0.0.1:1/', transport: failing })('GetItem', {}).catch(
      (e: unknown) => e,
    )) as DynamoError;
    expect(err.name).toBe('InternalServerError');
    expect(err.$metadata.httpStatusCode).toBe(500);
    expect(tries).toBe(2);
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
