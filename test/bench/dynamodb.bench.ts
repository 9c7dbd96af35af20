/**
 * The batched read on every request's path (shared/db/client.ts `batchGetItems`, docs/performance.md
 * "DynamoDB: the SDK beside the fast path"): the same BatchGetItem of three items (a session, a
 * project, an agent record) sent three ways in one run, against one DynamoDB Local:
 *   - sdk: the AWS SDK's DynamoDBClient, `BatchGetItemCommand`, items unmarshalled by
 *     @aws-sdk/util-dynamodb (what every other DynamoDB call of the service goes through);
 *   - doc: the SDK's document client, `BatchGetCommand` (the repository modules' client);
 *   - fast path: `batchGetItems` as the Node entry builds it (shared/db/wire.ts over undici's
 *     `request`, shared/db/transport-node.ts).
 * Figures per way: p50 and p99 of one call at a time, and the client's CPU per call (process.cpuUsage
 * over the batch: what a handler process pays beside the round trip). The ways alternate in every
 * round, so drift on the shared machine hits all of them.
 *
 *   node_modules/.bin/node test/bench/dynamodb.bench.ts [rounds=5] [calls per round=200]
 */
import { readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { BatchGetItemCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { BatchGetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import { startDynamoLocal } from '../../infra/local/dynamodb.ts';
import { batchGetItems, createDb, ensureTable } from '../../shared/db/client.ts';
import { keys } from '../../shared/db/table.ts';
import { nodeTransport } from '../../shared/db/transport-node.ts';

const ROUNDS = Number(process.argv[2] ?? 5);
const CALLS = Number(process.argv[3] ?? 200);
const REGION = 'us-east-1';
const TABLE = 'bench';

type Way = () => Promise<unknown>;

function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

async function main(): Promise<void> {
  const dynamo = await startDynamoLocal();
  try {
    const settings = {
      SVCD_DYNAMODB_ENDPOINT: dynamo.endpoint,
      SVCD_DYNAMODB_REGION: REGION,
      SVCD_TABLE: TABLE,
      SVCD_AWS_ACCESS_KEY_ID: 'bench',
      SVCD_AWS_SECRET_ACCESS_KEY: 'bench',
    };
    const db = createDb(settings, { transport: nodeTransport() });
    await ensureTable(db);
    const wanted = [keys.sessionEnd('acct_bench', 'ses_bench'), keys.project('prj_bench'), keys.agent('agt_bench')];
    await db.doc.send(new PutCommand({ TableName: TABLE, Item: { ...keys.project('prj_bench'), id: 'prj_bench', name: 'bench', state: 'running', size: 3 } }));
    await db.doc.send(new PutCommand({ TableName: TABLE, Item: { ...keys.agent('agt_bench'), id: 'agt_bench', url: 'http://127.0.0.1:1', heartbeat_at: new Date().toISOString() } }));

    const client = new DynamoDBClient({ region: REGION, endpoint: dynamo.endpoint, credentials: { accessKeyId: 'bench', secretAccessKey: 'bench' }, maxAttempts: 3 });
    const ways: Record<string, Way> = {
      sdk: async () => {
        const out = await client.send(new BatchGetItemCommand({ RequestItems: { [TABLE]: { Keys: wanted.map((k) => marshall(k)), ConsistentRead: true } } }));
        return (out.Responses?.[TABLE] ?? []).map((i) => unmarshall(i));
      },
      doc: async () => (await db.doc.send(new BatchGetCommand({ RequestItems: { [TABLE]: { Keys: wanted, ConsistentRead: true } } }))).Responses,
      'fast path': () => batchGetItems(db, wanted),
    };
    const times: Record<string, number[]> = {};
    const cpu: Record<string, number> = {};
    for (const name of Object.keys(ways)) {
      times[name] = [];
      cpu[name] = 0;
      for (let i = 0; i < 50; i++) await ways[name]!(); // warm: connections, JIT, signing keys
    }
    for (let round = 0; round < ROUNDS; round++) {
      for (const [name, way] of Object.entries(ways)) {
        const before = process.cpuUsage();
        for (let i = 0; i < CALLS; i++) {
          const t0 = performance.now();
          await way();
          times[name]!.push(performance.now() - t0);
        }
        const used = process.cpuUsage(before);
        cpu[name]! += used.user + used.system;
      }
    }
    console.log(`\nBatchGetItem of 3 items, DynamoDB Local in memory, ${ROUNDS} rounds × ${CALLS} calls per way, one at a time`);
    for (const name of Object.keys(ways)) {
      const sorted = times[name]!.sort((a, b) => a - b);
      const perCall = cpu[name]! / sorted.length;
      console.log(`   ${name.padEnd(10)} p50 ${quantile(sorted, 0.5).toFixed(3)} ms   p99 ${quantile(sorted, 0.99).toFixed(3)} ms   client CPU per call ${perCall.toFixed(0)} µs`);
    }
    const [load1] = readFileSync('/proc/loadavg', 'utf8').split(' ') as [string];
    console.log(`machine: ${cpus().length} cores, load average ${load1}`);
    client.destroy();
    db.doc.destroy();
  } finally {
    await dynamo.stop();
  }
}

await main();
process.exit(0);
