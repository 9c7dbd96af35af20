/**
 * The three roles (docs/deploy.md "Permissions"): the handlers function's, the Node workers' and
 * the agents'. Each grants the DynamoDB and S3 actions its entry's code sends, read from the source
 * (../iam-usage.ts), on the stack's table and bucket only; the machines' roles also grant what their
 * boot script and the drain watcher call (`aws …` in ./boot.ts and infra/host-agent/), each on the one
 * resource it names. infra/aws/iam.test.ts checks both against the code.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { actionsOf, operationsFrom, REPO, scriptActions } from '../iam-usage.ts';
import { agentBootScript, AGENT_GROUP_NAME, workerBootScript } from './boot.ts';
import { getAtt, policy, ref, type Section, sub } from './cfn.ts';

/** The deployed entries (docs/deploy.md "Permissions"). */
export const ENTRIES = { function: 'handlers/gateway.ts', workers: 'handlers/node-server.ts', agents: 'host-agent/main.ts' } as const;
/** The drain watcher every engine machine runs (its `aws` calls are the agents' role's too). */
export const DRAIN_WATCHER = 'infra/host-agent/svc-agent-drain.sh';

const TABLE = getAtt('Table', 'Arn');
const INDEXES = sub('${Table.Arn}/index/*');
const BUCKET = getAtt('BlobBucket', 'Arn');
const OBJECTS = sub('${BlobBucket.Arn}/*');

/** Where an action of the code applies: the table (queries also its indexes), the bucket (listing) or its objects. */
export function dataStatements(actions: string[]): Record<string, unknown>[] {
  const table = actions.filter((a) => a.startsWith('dynamodb:'));
  const bucket = actions.filter((a) => a === 's3:ListBucket');
  const objects = actions.filter((a) => a.startsWith('s3:') && a !== 's3:ListBucket');
  const other = actions.filter((a) => !a.startsWith('dynamodb:') && !a.startsWith('s3:'));
  if (other.length > 0) throw new Error(`no resource known for ${other.join(', ')} (infra/aws/template/roles.ts)`);
  return [
    { Effect: 'Allow', Action: table, Resource: TABLE },
    ...(table.includes('dynamodb:Query') ? [{ Effect: 'Allow', Action: ['dynamodb:Query'], Resource: INDEXES }] : []),
    ...(objects.length ? [{ Effect: 'Allow', Action: objects, Resource: OBJECTS }] : []),
    ...(bucket.length ? [{ Effect: 'Allow', Action: bucket, Resource: BUCKET }] : []),
  ];
}

/** The one resource each action of a boot script or the drain watcher applies to. */
const BOOT_RESOURCES: Record<string, unknown> = {
  's3:GetObject': sub('arn:${AWS::Partition}:s3:::${ReleaseBucket}/${ReleaseKey}'),
  'secretsmanager:GetSecretValue': ref('Settings'),
  'autoscaling:CompleteLifecycleAction': sub(`arn:\${AWS::Partition}:autoscaling:\${AWS::Region}:\${AWS::AccountId}:autoScalingGroup:*:autoScalingGroupName/${AGENT_GROUP_NAME}`),
  'autoscaling:RecordLifecycleActionHeartbeat': sub(`arn:\${AWS::Partition}:autoscaling:\${AWS::Region}:\${AWS::AccountId}:autoScalingGroup:*:autoScalingGroupName/${AGENT_GROUP_NAME}`),
};

/** One statement per action the scripts call, on its resource. */
export function bootStatements(actions: string[]): Record<string, unknown>[] {
  return actions.map((action) => {
    const resource = BOOT_RESOURCES[action];
    if (!resource) throw new Error(`no resource known for ${action}, which a boot script calls (infra/aws/template/roles.ts)`);
    return { Effect: 'Allow', Action: [action], Resource: resource };
  });
}

/** What each machine's scripts call. */
export function agentScriptActions(): string[] {
  return scriptActions(`${agentBootScript()}\n${readFileSync(join(REPO, DRAIN_WATCHER), 'utf8')}`);
}
export function workerScriptActions(): string[] {
  return scriptActions(workerBootScript());
}

function role(service: string, managed: string | undefined, policies: Record<string, unknown[]>): Record<string, unknown> {
  return {
    Type: 'AWS::IAM::Role',
    Properties: {
      AssumeRolePolicyDocument: policy([{ Effect: 'Allow', Principal: { Service: service }, Action: 'sts:AssumeRole' }]),
      ...(managed ? { ManagedPolicyArns: [sub(`arn:\${AWS::Partition}:iam::aws:policy/${managed}`)] } : {}),
      Policies: Object.entries(policies).map(([PolicyName, statements]) => ({ PolicyName, PolicyDocument: policy(statements) })),
    },
  };
}

/** The roles, and the machines' instance profiles. */
export function roleResources(): Section {
  const data = (entry: string) => dataStatements(actionsOf(operationsFrom(entry)));
  return {
    // In a VPC: the managed policy lets Lambda attach the function to its subnets, and write its logs.
    FunctionRole: role('lambda.amazonaws.com', 'service-role/AWSLambdaVPCAccessExecutionRole', { 'svc-data': data(ENTRIES.function) }),
    // No managed policy: the machines call nothing but what their code and scripts send.
    WorkerRole: role('ec2.amazonaws.com', undefined, { 'svc-data': data(ENTRIES.workers), 'svc-boot': bootStatements(workerScriptActions()) }),
    AgentRole: role('ec2.amazonaws.com', undefined, { 'svc-data': data(ENTRIES.agents), 'svc-boot': bootStatements(agentScriptActions()) }),
    WorkerInstanceProfile: { Type: 'AWS::IAM::InstanceProfile', Properties: { Roles: [ref('WorkerRole')] } },
    AgentInstanceProfile: { Type: 'AWS::IAM::InstanceProfile', Properties: { Roles: [ref('AgentRole')] } },
  };
}
