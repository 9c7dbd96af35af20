/**
 * The platform's shared state (docs/deploy.md "The topology"): the one DynamoDB table
 * (shared/db/table.ts), the private bucket of object bytes, function modules and backups, and the
 * secret holding the secret settings the machines read at boot (./boot.ts).
 */
import { TTL_ATTRIBUTE, tableDefinition } from '../../../shared/db/table.ts';
import { type Section, sub } from './cfn.ts';
import { SECRET_PARAMETERS } from './params.ts';

/** The one DynamoDB table and its index (shared/db/table.ts). */
function tableResource(): Record<string, unknown> {
  const table = tableDefinition('__TABLE__');
  return {
    Type: 'AWS::DynamoDB::Table',
    DeletionPolicy: 'Retain',
    UpdateReplacePolicy: 'Retain',
    Properties: {
      TableName: sub('${AWS::StackName}-svc'),
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

/** The secret settings as one JSON secret, `SVCD_*` name → value, read by the machines' boot script. */
function settingsSecretResource(): Record<string, unknown> {
  const fields = Object.entries(SECRET_PARAMETERS).map(([param, setting]) => `"${setting}":"\${${param}}"`);
  return {
    Type: 'AWS::SecretsManager::Secret',
    // Made again from the parameters whenever it is replaced or removed.
    DeletionPolicy: 'Delete',
    UpdateReplacePolicy: 'Delete',
    Properties: {
      Description: sub('svc-cloud secret settings of ${AWS::StackName} (docs/deploy.md "Every setting")'),
      SecretString: sub(`{${fields.join(',')}}`),
    },
  };
}

/** The shared state's resources. */
export function dataResources(): Section {
  return { Table: tableResource(), BlobBucket: blobBucketResource(), Settings: settingsSecretResource() };
}
