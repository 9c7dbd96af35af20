/**
 * The handlers function (`dist/gateway.mjs`) in the VPC's private subnets, so that it reaches the
 * agents' internal port at their private addresses (docs/deploy.md "The topology"). The entry invokes
 * it through the alias `live`; every new `CodeKey` publishes a new version and moves the alias to it
 * in one step, so requests in flight finish on the version they started on and no request finds no
 * function (docs/deploy.md "Rolling out").
 */
import { getAtt, ref, type Section, sub } from './cfn.ts';
import { PRIVATE_SUBNETS } from './network.ts';
import { SECRET_PARAMETERS } from './params.ts';

/** The function's settings: the stack's table and bucket, and the secret parameters. */
export function functionEnvironment(): Record<string, unknown> {
  return {
    SVCD_TABLE: ref('Table'),
    SVCD_DYNAMODB_REGION: ref('AWS::Region'),
    SVCD_BLOB_BACKEND: 's3',
    SVCD_S3_BUCKET: ref('BlobBucket'),
    SVCD_S3_REGION: ref('AWS::Region'),
    SVCD_LOG_FORMAT: 'json',
    ...Object.fromEntries(Object.entries(SECRET_PARAMETERS).map(([param, setting]) => [setting, ref(param)])),
  };
}

/** The function, its published version and the alias the entry invokes. */
export function functionResources(): Section {
  return {
    Function: {
      Type: 'AWS::Lambda::Function',
      Properties: {
        Runtime: 'nodejs24.x',
        Handler: 'gateway.handler',
        Architectures: ['arm64'],
        MemorySize: 512,
        Timeout: 29,
        Role: getAtt('FunctionRole', 'Arn'),
        Code: { S3Bucket: ref('CodeBucket'), S3Key: ref('CodeKey') },
        VpcConfig: { SubnetIds: PRIVATE_SUBNETS.map(ref), SecurityGroupIds: [ref('FunctionSecurityGroup')] },
        Environment: { Variables: functionEnvironment() },
      },
    },
    // A version's description cannot change in place: a new CodeKey replaces it, which publishes the new code.
    FunctionVersion: {
      Type: 'AWS::Lambda::Version',
      DeletionPolicy: 'Retain',
      UpdateReplacePolicy: 'Retain',
      Properties: { FunctionName: ref('Function'), Description: sub('code s3://${CodeBucket}/${CodeKey}') },
    },
    FunctionAlias: {
      Type: 'AWS::Lambda::Alias',
      Properties: { FunctionName: ref('Function'), FunctionVersion: getAtt('FunctionVersion', 'Version'), Name: 'live' },
    },
  };
}
