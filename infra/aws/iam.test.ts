import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { actionsOf, localOnlyCallers, modulesFrom, operationsFrom, operationsIn, REPO } from './iam-usage.ts';
import { generateTemplate } from './template.ts';

/** The entries that run on AWS (docs/deploy.md): the function, the Node workers, the host agents. */
const FUNCTION_ENTRY = 'handlers/gateway.ts';
const NODE_WORKER_ENTRY = 'handlers/node-server.ts';
const AGENT_ENTRY = 'host-agent/main.ts';

/** Every action a role's inline policies allow, sorted. */
function roleActions(role: string): string[] {
  const policies = (generateTemplate() as any).Resources[role].Properties.Policies as any[];
  const actions = policies.flatMap((p) => p.PolicyDocument.Statement.flatMap((s: any) => [s.Action].flat()));
  return [...new Set<string>(actions)].sort();
}

/** What `granted` lacks of `needed` and what it grants beyond it. */
function difference(needed: string[], granted: string[]): { missing: string[]; unused: string[] } {
  return { missing: needed.filter((a) => !granted.includes(a)), unused: granted.filter((a) => !needed.includes(a)) };
}

describe('the permissions the code needs (docs/deploy.md "Permissions")', () => {
  it('the function role grants every DynamoDB and S3 action the function code sends, and nothing more', () => {
    const needed = actionsOf(operationsFrom(FUNCTION_ENTRY));
    expect(difference(needed, roleActions('FunctionRole'))).toEqual({ missing: [], unused: [] });
  });

  it('table actions are on the table (queries also on its index), object actions on its objects, listing on the bucket', () => {
    const statements = (generateTemplate() as any).Resources.FunctionRole.Properties.Policies[0].PolicyDocument.Statement as any[];
    const where = (action: string) => statements.filter((s) => s.Action.includes(action)).map((s) => JSON.stringify(s.Resource));
    for (const action of roleActions('FunctionRole')) {
      const expected = action.startsWith('dynamodb:')
        ? [JSON.stringify({ 'Fn::GetAtt': ['Table', 'Arn'] }), ...(action === 'dynamodb:Query' ? [JSON.stringify({ 'Fn::Sub': '${Table.Arn}/index/*' })] : [])]
        : action === 's3:ListBucket'
          ? [JSON.stringify({ 'Fn::GetAtt': ['BlobBucket', 'Arn'] })]
          : [JSON.stringify({ 'Fn::Sub': '${BlobBucket.Arn}/*' })];
      expect(where(action), action).toEqual(expected);
    }
  });

  it('no action is granted on the whole service or the whole account', () => {
    const t = generateTemplate() as any;
    for (const resource of Object.values(t.Resources) as any[]) {
      for (const policy of resource.Properties?.Policies ?? []) {
        for (const s of policy.PolicyDocument.Statement) {
          for (const a of [s.Action].flat()) expect(a, `${policy.PolicyName}`).not.toMatch(/\*/);
          expect(JSON.stringify(s.Resource)).not.toBe('"*"');
        }
      }
    }
  });

  it('sees the items inside transactions, batch writes, the hand-sent batch read and multipart uploads', () => {
    const ops = (file: string) => operationsIn(file).map((o) => o.operation);
    expect(ops('shared/db/buckets.ts')).toContain('ConditionCheck');
    expect(ops('shared/db/functions.ts')).toEqual(expect.arrayContaining(['TransactWrite', 'ConditionCheck', 'Put', 'Delete', 'BatchWrite']));
    expect(ops('shared/db/client.ts')).toContain('BatchGetItem');
    expect(ops('shared/blobs/s3.ts')).toContain('Upload');
    const actions = actionsOf(operationsFrom(FUNCTION_ENTRY));
    expect(actions).toContain('dynamodb:ConditionCheckItem');
    expect(actions).not.toContain('dynamodb:TransactWriteItems');
  });

  it('maps a transaction to the actions of its items, and fails on an operation it cannot map', () => {
    const source = `
      import { TransactWriteCommand, ScanCommand } from '@aws-sdk/lib-dynamodb';
      export async function move(db) {
        await db.doc.send(new TransactWriteCommand({ TransactItems: [
          { ConditionCheck: { TableName: db.table, Key: {}, ConditionExpression: 'x' } },
          { Delete: { TableName: db.table, Key: {} } },
        ] }));
        await db.doc.send(new ScanCommand({ TableName: db.table }));
      }`;
    expect(actionsOf(operationsIn('fixture.ts', source))).toEqual(['dynamodb:ConditionCheckItem', 'dynamodb:DeleteItem', 'dynamodb:Scan']);
    const unknown = `export const f = (c) => c.send(new RestoreTableFromBackupCommand({}));`;
    expect(() => actionsOf(operationsIn('fixture.ts', unknown))).toThrow(/no IAM action known for RestoreTableFromBackup/);
  });

  it('the functions only the local stack calls (creating the table) are reached by no deployed entry', () => {
    for (const entry of [FUNCTION_ENTRY, NODE_WORKER_ENTRY, AGENT_ENTRY]) expect(localOnlyCallers(entry), entry).toEqual([]);
    expect(modulesFrom(FUNCTION_ENTRY)).toContain('shared/db/client.ts');
  });

  it('the Node workers need what the function needs', () => {
    expect(actionsOf(operationsFrom(NODE_WORKER_ENTRY))).toEqual(actionsOf(operationsFrom(FUNCTION_ENTRY)));
  });

  it('docs/deploy.md "Permissions" lists exactly what the function and the agents need', () => {
    const doc = readFileSync(join(REPO, 'docs/deploy.md'), 'utf8');
    const section = doc.slice(doc.indexOf('## Permissions'), doc.indexOf('\n## ', doc.indexOf('## Permissions')));
    const row = (who: string) => section.split('\n').find((l) => l.startsWith(`| ${who}`)) ?? '';
    const listed = (who: string) => [...new Set([...row(who).matchAll(/`((?:dynamodb|s3):\w+)`/g)].map((m) => m[1]!))].sort();
    expect(listed('the handlers function')).toEqual(roleActions('FunctionRole'));
    expect(listed('the host agents')).toEqual(actionsOf(operationsFrom(AGENT_ENTRY)));
  });

  it('the agents\' role, once the template has one, grants what the agent code sends and nothing more', () => {
    const role = Object.entries((generateTemplate() as any).Resources).find(([name, r]: [string, any]) => r.Type === 'AWS::IAM::Role' && /agent/i.test(name));
    if (!role) return; // Not in the template yet: docs/deploy.md "Permissions" lists what to grant.
    expect(difference(actionsOf(operationsFrom(AGENT_ENTRY)), roleActions(role[0]))).toEqual({ missing: [], unused: [] });
  });
});
