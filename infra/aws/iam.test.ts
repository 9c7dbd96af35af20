import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { actionsOf, localOnlyCallers, modulesFrom, operationsFrom, operationsIn, REPO, scriptActions } from './iam-usage.ts';
import { generateTemplate } from './template.ts';
import { agentBootScript, workerBootScript } from './template/boot.ts';

/** The entries that run on AWS (docs/deploy.md): the function, the Node workers, the host agents. */
const FUNCTION_ENTRY = 'handlers/gateway.ts';
const NODE_WORKER_ENTRY = 'handlers/node-server.ts';
const AGENT_ENTRY = 'host-agent/main.ts';
/** Each role of the template and the entry whose code it runs. */
const ROLES = { FunctionRole: FUNCTION_ENTRY, WorkerRole: NODE_WORKER_ENTRY, AgentRole: AGENT_ENTRY } as const;
const TEMPLATE = generateTemplate() as any;
const DRAIN_WATCHER = readFileSync(join(REPO, 'infra/host-agent/svc-agent-drain.sh'), 'utf8');

/** The statements of a role's inline policies (`svc-data`: what its code sends; `svc-boot`: what its machine's scripts call). */
function statements(role: string, policy?: string): any[] {
  const policies = TEMPLATE.Resources[role].Properties.Policies as any[];
  return policies.filter((p) => policy === undefined || p.PolicyName === policy).flatMap((p) => p.PolicyDocument.Statement);
}

/** Every action a role's inline policies (or one of them) allow, sorted. */
function roleActions(role: string, policy?: string): string[] {
  return [...new Set<string>(statements(role, policy).flatMap((s: any) => [s.Action].flat()))].sort();
}

/** What `granted` lacks of `needed` and what it grants beyond it. */
function difference(needed: string[], granted: string[]): { missing: string[]; unused: string[] } {
  return { missing: needed.filter((a) => !granted.includes(a)), unused: granted.filter((a) => !needed.includes(a)) };
}

describe('the permissions the code needs (docs/deploy.md "Permissions")', () => {
  it.each(Object.entries(ROLES))('%s grants every DynamoDB and S3 action its code (%s) sends, and nothing more', (role, entry) => {
    const needed = actionsOf(operationsFrom(entry));
    expect(difference(needed, roleActions(role, 'svc-data'))).toEqual({ missing: [], unused: [] });
    expect(statements(role).length, 'svc-data, and svc-boot on the machines').toBe(statements(role, 'svc-data').length + statements(role, 'svc-boot').length);
  });

  it.each(Object.keys(ROLES))('%s: table actions are on the table (queries also on its index), object actions on its objects, listing on the bucket', (role) => {
    const data = statements(role, 'svc-data');
    const where = (action: string) => data.filter((s) => s.Action.includes(action)).map((s) => JSON.stringify(s.Resource));
    for (const action of roleActions(role, 'svc-data')) {
      const expected = action.startsWith('dynamodb:')
        ? [JSON.stringify({ 'Fn::GetAtt': ['Table', 'Arn'] }), ...(action === 'dynamodb:Query' ? [JSON.stringify({ 'Fn::Sub': '${Table.Arn}/index/*' })] : [])]
        : action === 's3:ListBucket'
          ? [JSON.stringify({ 'Fn::GetAtt': ['BlobBucket', 'Arn'] })]
          : [JSON.stringify({ 'Fn::Sub': '${BlobBucket.Arn}/*' })];
      expect(where(action), action).toEqual(expected);
    }
  });

  it('the machines\' roles grant what their boot script (and, on the engine machines, the drain watcher) calls, each on the one resource it names', () => {
    const agentScripts = scriptActions(`${agentBootScript()}\n${DRAIN_WATCHER}`);
    expect(agentScripts).toEqual(['autoscaling:CompleteLifecycleAction', 'autoscaling:RecordLifecycleActionHeartbeat', 's3:GetObject', 'secretsmanager:GetSecretValue']);
    expect(roleActions('AgentRole', 'svc-boot')).toEqual(agentScripts);
    expect(scriptActions(workerBootScript())).toEqual(['s3:GetObject', 'secretsmanager:GetSecretValue']);
    expect(roleActions('WorkerRole', 'svc-boot')).toEqual(['s3:GetObject', 'secretsmanager:GetSecretValue']);
    expect(statements('FunctionRole', 'svc-boot')).toEqual([]);
    const group = { 'Fn::Sub': 'arn:${AWS::Partition}:autoscaling:${AWS::Region}:${AWS::AccountId}:autoScalingGroup:*:autoScalingGroupName/${AWS::StackName}-agents' };
    const expected: Record<string, unknown> = {
      's3:GetObject': { 'Fn::Sub': 'arn:${AWS::Partition}:s3:::${ReleaseBucket}/${ReleaseKey}' },
      'secretsmanager:GetSecretValue': { Ref: 'Settings' },
      'autoscaling:CompleteLifecycleAction': group,
      'autoscaling:RecordLifecycleActionHeartbeat': group,
    };
    for (const role of ['AgentRole', 'WorkerRole']) {
      for (const s of statements(role, 'svc-boot')) expect(s.Resource, `${role} ${s.Action}`).toEqual(expected[s.Action[0]]);
    }
    expect(TEMPLATE.Resources.AgentGroup.Properties.AutoScalingGroupName).toEqual({ 'Fn::Sub': '${AWS::StackName}-agents' });
  });

  it('reads the AWS CLI calls of a script: API commands by name, s3 cp by direction, comments skipped', () => {
    const script = [
      '# aws iam create-user is only a comment',
      'aws s3 cp --region eu-west-1 s3://b/k /tmp/k',
      'aws s3 cp ./out s3://b/out',
      'v=$(aws ssm get-parameter --name x) && aws secretsmanager get-secret-value \\',
      '  --secret-id y | node',
    ].join('\n');
    expect(scriptActions(script)).toEqual(['s3:GetObject', 's3:PutObject', 'secretsmanager:GetSecretValue', 'ssm:GetParameter']);
    expect(() => scriptActions('aws s3 sync s3://b .')).toThrow(/no IAM action known for aws s3 sync/);
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

  it('docs/deploy.md "Permissions" lists exactly what the function, the workers and the agents need', () => {
    const doc = readFileSync(join(REPO, 'docs/deploy.md'), 'utf8');
    const section = doc.slice(doc.indexOf('## Permissions'), doc.indexOf('\n## ', doc.indexOf('## Permissions')));
    const row = (who: string) => section.split('\n').find((l) => l.startsWith(`| ${who}`)) ?? '';
    const listed = (who: string) => [...new Set([...row(who).matchAll(/`((?:dynamodb|s3):\w+)`/g)].map((m) => m[1]!))].sort();
    expect(listed('the handlers function')).toEqual(roleActions('FunctionRole'));
    expect(listed('the Node workers')).toEqual(roleActions('WorkerRole', 'svc-data'));
    expect(listed('the host agents')).toEqual(roleActions('AgentRole', 'svc-data'));
    const boot = (who: string) => [...new Set([...row(who).matchAll(/`((?:s3|secretsmanager|autoscaling):\w+)`/g)].map((m) => m[1]!))].sort();
    expect(boot('the engine machines\' scripts')).toEqual(roleActions('AgentRole', 'svc-boot'));
    expect(boot('the Node workers\' boot script')).toEqual(roleActions('WorkerRole', 'svc-boot'));
  });
});
