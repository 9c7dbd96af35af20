/**
 * The AWS deployment template (CloudFormation), generated from the code: the DynamoDB table from
 * `shared/db/table.ts`, the gateway routes from the route declarations (shared/api/), and parameters
 * for every secret setting. `npm run infra:template` writes infra/aws/template.json; a test checks
 * the committed file against this generator, so the template can never drift from the code.
 */
import { HANDLER_ROUTES, isLongLived, type RouteDecl } from '../../shared/api/index.ts';
import { TTL_ATTRIBUTE, tableDefinition } from '../../shared/db/table.ts';

/**
 * Whether the function gateway serves a route: not when its bodies are bytes or streams or its
 * answer an event stream (object bytes, function deploys and invocations, realtime subscribe, engine
 * logs with `follow`) — a gateway caps bodies and cannot hold an answer open; those go to the Node
 * workers (docs/deploy.md "The routing split").
 */
export function isGatewayRoute(route: RouteDecl): boolean {
  return route.servedBy === 'handlers' && !isLongLived(route);
}

/** Converts an itty-router pattern into an API Gateway route key path (`:id` → `{id}`, `:key+` → `{key+}`). */
export function gatewayPath(path: string): string {
  return path.replace(/:(\w+)\+/g, '{$1+}').replace(/:(\w+)/g, '{$1}');
}

/** The gateway's route keys (`METHOD /path`), sorted, one per method and path. */
export function gatewayRouteKeys(): string[] {
  return [...new Set(HANDLER_ROUTES.filter(isGatewayRoute).map((r) => `${r.method} ${gatewayPath(r.path)}`))].sort();
}

const SECRET_PARAMETERS = {
  SessionSecret: 'SVCD_SESSION_SECRET',
  KeyPepper: 'SVCD_KEY_PEPPER',
  InternalSecret: 'SVCD_INTERNAL_SECRET',
  SecretsKeys: 'SVCD_SECRETS_KEYS',
} as const;

/** The one DynamoDB table and its index (shared/db/table.ts). */
function tableResource(): Record<string, unknown> {
  const table = tableDefinition('__TABLE__');
  return {
    Type: 'AWS::DynamoDB::Table',
    DeletionPolicy: 'Retain',
    UpdateReplacePolicy: 'Retain',
    Properties: {
      TableName: { 'Fn::Sub': '${AWS::StackName}-svc' },
      BillingMode: table.BillingMode,
      AttributeDefinitions: table.AttributeDefinitions,
      KeySchema: table.KeySchema,
      GlobalSecondaryIndexes: table.GlobalSecondaryIndexes,
      SSESpecification: { SSEEnabled: true },
      PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
      // Items that are useless after a time carry it in this attribute (shared/db/table.ts).
      TimeToLiveSpecification: { AttributeName: TTL_ATTRIBUTE, Enabled: true },
    },
  };
}

/** The private, encrypted bucket the `s3` blob store writes to. */
function blobBucketResource(): Record<string, unknown> {
  return {
    Type: 'AWS::S3::Bucket',
    DeletionPolicy: 'Retain',
    UpdateReplacePolicy: 'Retain',
    Properties: {
      BucketEncryption: { ServerSideEncryptionConfiguration: [{ ServerSideEncryptionByDefault: { SSEAlgorithm: 'AES256' } }] },
      PublicAccessBlockConfiguration: { BlockPublicAcls: true, BlockPublicPolicy: true, IgnorePublicAcls: true, RestrictPublicBuckets: true },
      OwnershipControls: { Rules: [{ ObjectOwnership: 'BucketOwnerEnforced' }] },
    },
  };
}

/**
 * What the handlers function may do to its table and bucket: exactly the actions its code sends
 * (docs/deploy.md "Permissions"; infra/aws/iam.test.ts compares them with the source). A
 * transaction has no action of its own: each of its items needs the action of its kind.
 */
export const FUNCTION_TABLE_ACTIONS = [
  'dynamodb:BatchGetItem',
  'dynamodb:BatchWriteItem',
  'dynamodb:ConditionCheckItem',
  'dynamodb:DeleteItem',
  'dynamodb:GetItem',
  'dynamodb:PutItem',
  'dynamodb:Query',
  'dynamodb:UpdateItem',
];
export const FUNCTION_OBJECT_ACTIONS = ['s3:AbortMultipartUpload', 's3:DeleteObject', 's3:GetObject', 's3:PutObject'];
/** On the bucket itself: without it S3 answers a read of a missing key 403, not 404. */
export const FUNCTION_BUCKET_ACTIONS = ['s3:ListBucket'];

/** The handlers function's role: its table, its index and its bucket, nothing else. */
function functionRoleResource(): Record<string, unknown> {
  return {
    Type: 'AWS::IAM::Role',
    Properties: {
      AssumeRolePolicyDocument: {
        Version: '2012-10-17',
        Statement: [{ Effect: 'Allow', Principal: { Service: 'lambda.amazonaws.com' }, Action: 'sts:AssumeRole' }],
      },
      ManagedPolicyArns: [{ 'Fn::Sub': 'arn:${AWS::Partition}:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole' }],
      Policies: [
        {
          PolicyName: 'svc-data',
          PolicyDocument: {
            Version: '2012-10-17',
            Statement: [
              { Effect: 'Allow', Action: FUNCTION_TABLE_ACTIONS, Resource: { 'Fn::GetAtt': ['Table', 'Arn'] } },
              { Effect: 'Allow', Action: ['dynamodb:Query'], Resource: { 'Fn::Sub': '${Table.Arn}/index/*' } },
              { Effect: 'Allow', Action: FUNCTION_OBJECT_ACTIONS, Resource: { 'Fn::Sub': '${BlobBucket.Arn}/*' } },
              { Effect: 'Allow', Action: FUNCTION_BUCKET_ACTIONS, Resource: { 'Fn::GetAtt': ['BlobBucket', 'Arn'] } },
            ],
          },
        },
      ],
    },
  };
}

/** The handlers function (`dist/gateway.mjs`), its settings from the stack's resources and parameters. */
function functionResource(): Record<string, unknown> {
  return {
    Type: 'AWS::Lambda::Function',
    Properties: {
      Runtime: 'nodejs24.x',
      Handler: 'gateway.handler',
      Architectures: ['arm64'],
      MemorySize: 512,
      Timeout: 29,
      Role: { 'Fn::GetAtt': ['FunctionRole', 'Arn'] },
      Code: { S3Bucket: { Ref: 'CodeBucket' }, S3Key: { Ref: 'CodeKey' } },
      Environment: {
        Variables: {
          SVCD_TABLE: { Ref: 'Table' },
          SVCD_DYNAMODB_REGION: { Ref: 'AWS::Region' },
          SVCD_BLOB_BACKEND: 's3',
          SVCD_S3_BUCKET: { Ref: 'BlobBucket' },
          SVCD_S3_REGION: { Ref: 'AWS::Region' },
          ...Object.fromEntries(Object.entries(SECRET_PARAMETERS).map(([param, setting]) => [setting, { Ref: param }])),
        },
      },
    },
  };
}

/** The HTTP API in front of the function, its integration, stage and permission to invoke it. */
function apiResources(): Record<string, unknown> {
  return {
    HttpApi: { Type: 'AWS::ApiGatewayV2::Api', Properties: { Name: { 'Fn::Sub': '${AWS::StackName}-api' }, ProtocolType: 'HTTP' } },
    Integration: {
      Type: 'AWS::ApiGatewayV2::Integration',
      Properties: {
        ApiId: { Ref: 'HttpApi' },
        IntegrationType: 'AWS_PROXY',
        IntegrationUri: { 'Fn::GetAtt': ['Function', 'Arn'] },
        PayloadFormatVersion: '2.0',
      },
    },
    Stage: { Type: 'AWS::ApiGatewayV2::Stage', Properties: { ApiId: { Ref: 'HttpApi' }, StageName: '$default', AutoDeploy: true } },
    InvokePermission: {
      Type: 'AWS::Lambda::Permission',
      Properties: {
        Action: 'lambda:InvokeFunction',
        FunctionName: { Ref: 'Function' },
        Principal: 'apigateway.amazonaws.com',
        SourceArn: { 'Fn::Sub': 'arn:${AWS::Partition}:execute-api:${AWS::Region}:${AWS::AccountId}:${HttpApi}/*' },
      },
    },
  };
}

/** One API route per gateway route key (`gatewayRouteKeys`). */
function routeResources(): Record<string, unknown> {
  return Object.fromEntries(
    gatewayRouteKeys().map((routeKey, i) => [
      `Route${String(i).padStart(3, '0')}`,
      { Type: 'AWS::ApiGatewayV2::Route', Properties: { ApiId: { Ref: 'HttpApi' }, RouteKey: routeKey, Target: { 'Fn::Sub': 'integrations/${Integration}' } } },
    ]),
  );
}

/** The CloudFormation template as a plain object. */
export function generateTemplate(): Record<string, unknown> {
  return {
    AWSTemplateFormatVersion: '2010-09-09',
    Description: 'svc-cloud control plane: DynamoDB table, private S3 bucket, handlers function behind an HTTP API (generated by infra/aws/template.ts; do not edit)',
    Parameters: {
      CodeBucket: { Type: 'String', Description: 'S3 bucket holding the zipped dist/gateway.mjs' },
      CodeKey: { Type: 'String', Description: 'S3 key of the zipped dist/gateway.mjs' },
      ...Object.fromEntries(
        Object.entries(SECRET_PARAMETERS).map(([param, setting]) => [param, { Type: 'String', NoEcho: true, MinLength: 32, Description: `${setting}` }]),
      ),
    },
    Resources: {
      Table: tableResource(),
      BlobBucket: blobBucketResource(),
      FunctionRole: functionRoleResource(),
      Function: functionResource(),
      ...apiResources(),
      ...routeResources(),
    },
    Outputs: {
      ApiUrl: { Value: { 'Fn::GetAtt': ['HttpApi', 'ApiEndpoint'] } },
      TableName: { Value: { Ref: 'Table' } },
      BlobBucketName: { Value: { Ref: 'BlobBucket' } },
    },
  };
}

/** The template as the committed JSON text. */
export function templateText(): string {
  return `${JSON.stringify(generateTemplate(), null, 2)}\n`;
}
