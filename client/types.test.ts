/**
 * The SDK's answer types (client/types.ts) stay equal to the types the service answers with, and each
 * method answers what its route's declaration (shared/api/) says: checked by the type checker
 * (`tsc --noEmit`), so a field added or renamed on either side fails the build.
 */
import { describe, expectTypeOf, it } from 'vitest';
import type * as api from '../shared/api/index.ts';
import type { AnswersOf, BodyInputOf } from '../shared/api/index.ts';
import type { ProjectsApi, SvcClient } from './client.ts';
import type { FunctionsApi } from './functions.ts';
import type { ProjectClient } from './project.ts';
import type { KeysApi, RealtimeApi, ReceiptsApi, ReplacedApi, SecretsApi, SnapshotsApi } from './project-apis.ts';
import type { StorageClient } from './storage.ts';
import type { SignedUp as ServiceSignedUp, Session as ServiceSession } from '../handlers/domain/accounts.ts';
import type { IssuedKey as ServiceIssuedKey } from '../handlers/domain/keys.ts';
import type { KeyView } from '../shared/db/keys.ts';
import type { Receipt as ServiceReceipt } from '../shared/db/receipts.ts';
import type { SecretMetadata as ServiceSecret } from '../shared/db/secrets.ts';
import type { Snapshot as ServiceSnapshot } from '../shared/db/snapshots.ts';
import type { bucketView } from '../handlers/domain/objects/buckets.ts';
import type { ObjectRow as ServiceObjectRow } from '../shared/db/storage.ts';
import type { Bucket, IssuedKey, KeyRecord, ObjectRow, Receipt, SecretMetadata, Session, SignedUp, Snapshot } from './types.ts';

describe('the SDK answer types', () => {
  it('equal the service types of the same answers', () => {
    expectTypeOf<SignedUp>().toEqualTypeOf<ServiceSignedUp>();
    expectTypeOf<Session>().toEqualTypeOf<ServiceSession>();
    expectTypeOf<IssuedKey>().toEqualTypeOf<ServiceIssuedKey>();
    expectTypeOf<KeyRecord>().toEqualTypeOf<KeyView>();
    expectTypeOf<SecretMetadata>().toEqualTypeOf<ServiceSecret>();
    expectTypeOf<Snapshot>().toEqualTypeOf<ServiceSnapshot>();
    expectTypeOf<Bucket>().toEqualTypeOf<ReturnType<typeof bucketView>>();
    expectTypeOf<ObjectRow>().toEqualTypeOf<ServiceObjectRow>();
    // The service's receipt names its operations; the SDK keeps any string, so new ones still parse.
    expectTypeOf<ServiceReceipt>().toExtend<Receipt>();
  });
});

/** What a method's promise resolves to. */
type Answered<F extends (...args: never[]) => unknown> = Awaited<ReturnType<F>>;
/** The page type of a list method. */
type Paged<F extends (...args: never[]) => { first(): Promise<unknown> }> = Awaited<ReturnType<ReturnType<F>['first']>>;

describe('each SDK method', () => {
  it('answers the JSON answer its route declares', () => {
    expectTypeOf<Answered<SvcClient['health']>>().toEqualTypeOf<AnswersOf<typeof api.service.health>>();
    expectTypeOf<Answered<SvcClient['signup']>>().toEqualTypeOf<AnswersOf<typeof api.accounts.signup>>();
    expectTypeOf<Answered<SvcClient['createSession']>>().toEqualTypeOf<AnswersOf<typeof api.accounts.openSession>>();
    expectTypeOf<Answered<SvcClient['me']>>().toEqualTypeOf<AnswersOf<typeof api.accounts.me>>();
    expectTypeOf<Answered<SvcClient['rotateSecret']>>().toEqualTypeOf<AnswersOf<typeof api.accounts.rotateSecret>>();
    expectTypeOf<Paged<SvcClient['receipts']>>().toEqualTypeOf<AnswersOf<typeof api.receipts.ofAccount>>();
    expectTypeOf<Answered<ProjectsApi['create']>>().toEqualTypeOf<AnswersOf<typeof api.projects.create>>();
    expectTypeOf<Paged<ProjectsApi['list']>>().toEqualTypeOf<AnswersOf<typeof api.projects.list>>();
    expectTypeOf<Answered<ProjectsApi['get']>>().toEqualTypeOf<AnswersOf<typeof api.projects.read>>();
    expectTypeOf<Answered<ProjectClient['get']>>().toEqualTypeOf<AnswersOf<typeof api.projects.read>>();
    expectTypeOf<Answered<ProjectClient['rename']>>().toEqualTypeOf<AnswersOf<typeof api.projects.rename>>();
    expectTypeOf<Answered<ProjectClient['delete']>>().toEqualTypeOf<AnswersOf<typeof api.projects.remove>>();
    expectTypeOf<Answered<ProjectClient['logs']>>().toEqualTypeOf<AnswersOf<typeof api.logs.engineLogs>>();
    expectTypeOf<Answered<ProjectClient['wakeup']>>().toEqualTypeOf<AnswersOf<typeof api.lifecycle.wakeup>>();
    expectTypeOf<Answered<ProjectClient['sleep']>>().toEqualTypeOf<AnswersOf<typeof api.lifecycle.sleep>>();
    expectTypeOf<Answered<ProjectClient['head']>>().toEqualTypeOf<AnswersOf<typeof api.lifecycle.head>>();
    expectTypeOf<Answered<ProjectClient['restore']>>().toEqualTypeOf<AnswersOf<typeof api.lifecycle.restore>>();
    expectTypeOf<Answered<SnapshotsApi['create']>>().toEqualTypeOf<AnswersOf<typeof api.lifecycle.createSnapshot>>();
    expectTypeOf<Paged<SnapshotsApi['list']>>().toEqualTypeOf<AnswersOf<typeof api.lifecycle.listSnapshots>>();
    expectTypeOf<Answered<SnapshotsApi['get']>>().toEqualTypeOf<AnswersOf<typeof api.lifecycle.readSnapshot>>();
    expectTypeOf<Answered<SnapshotsApi['delete']>>().toEqualTypeOf<AnswersOf<typeof api.lifecycle.deleteSnapshot>>();
    expectTypeOf<Paged<ReplacedApi['list']>>().toEqualTypeOf<AnswersOf<typeof api.lifecycle.listReplaced>>();
    expectTypeOf<Answered<ReplacedApi['delete']>>().toEqualTypeOf<AnswersOf<typeof api.lifecycle.discardReplaced>>();
    expectTypeOf<Answered<KeysApi['create']>>().toEqualTypeOf<AnswersOf<typeof api.keys.issue>>();
    expectTypeOf<Paged<KeysApi['list']>>().toEqualTypeOf<AnswersOf<typeof api.keys.list>>();
    expectTypeOf<Answered<KeysApi['revoke']>>().toEqualTypeOf<AnswersOf<typeof api.keys.revoke>>();
    expectTypeOf<Answered<SecretsApi['set']>>().toEqualTypeOf<AnswersOf<typeof api.secrets.put>>();
    expectTypeOf<Paged<SecretsApi['list']>>().toEqualTypeOf<AnswersOf<typeof api.secrets.list>>();
    expectTypeOf<Answered<SecretsApi['get']>>().toEqualTypeOf<AnswersOf<typeof api.secrets.read>>();
    expectTypeOf<Answered<SecretsApi['delete']>>().toEqualTypeOf<AnswersOf<typeof api.secrets.remove>>();
    expectTypeOf<Answered<RealtimeApi['publish']>>().toEqualTypeOf<AnswersOf<typeof api.realtime.publish>>();
    expectTypeOf<Answered<RealtimeApi['ticket']>>().toEqualTypeOf<AnswersOf<typeof api.realtime.ticket>>();
    expectTypeOf<Paged<ReceiptsApi['list']>>().toEqualTypeOf<AnswersOf<typeof api.receipts.ofProject>>();
    expectTypeOf<Answered<StorageClient['createBucket']>>().toEqualTypeOf<AnswersOf<typeof api.storage.putBucket>>();
    expectTypeOf<Answered<StorageClient['deleteBucket']>>().toEqualTypeOf<AnswersOf<typeof api.storage.deleteBucket>>();
    expectTypeOf<Paged<StorageClient['listBuckets']>>().toEqualTypeOf<AnswersOf<typeof api.storage.listBuckets>>();
    expectTypeOf<Answered<StorageClient['uploadTicket']>>().toEqualTypeOf<AnswersOf<typeof api.storage.uploadTicket>>();
    expectTypeOf<Answered<StorageClient['downloadTicket']>>().toEqualTypeOf<AnswersOf<typeof api.storage.downloadTicket>>();
    expectTypeOf<Answered<StorageClient['upload']>>().toEqualTypeOf<AnswersOf<typeof api.storage.putObject>>();
    expectTypeOf<Paged<StorageClient['list']>>().toEqualTypeOf<AnswersOf<typeof api.storage.listObjects>>();
    expectTypeOf<Answered<StorageClient['delete']>>().toEqualTypeOf<AnswersOf<typeof api.storage.deleteObject>>();
    expectTypeOf<Answered<FunctionsApi['deploy']>>().toEqualTypeOf<AnswersOf<typeof api.functions.deploy>>();
    expectTypeOf<Paged<FunctionsApi['list']>>().toEqualTypeOf<AnswersOf<typeof api.functions.list>>();
    expectTypeOf<Answered<FunctionsApi['get']>>().toEqualTypeOf<AnswersOf<typeof api.functions.read>>();
    expectTypeOf<Paged<FunctionsApi['versions']>>().toEqualTypeOf<AnswersOf<typeof api.functions.versions>>();
    expectTypeOf<Answered<FunctionsApi['delete']>>().toEqualTypeOf<AnswersOf<typeof api.functions.remove>>();
    expectTypeOf<Answered<FunctionsApi['logs']>>().toEqualTypeOf<AnswersOf<typeof api.functions.logs>>();
  });

  it('takes the JSON body its route declares', () => {
    expectTypeOf<Parameters<SvcClient['signup']>[0]>().toEqualTypeOf<BodyInputOf<typeof api.accounts.signup> | undefined>();
    expectTypeOf<Parameters<SvcClient['createSession']>[0]>().toEqualTypeOf<BodyInputOf<typeof api.accounts.openSession>>();
    expectTypeOf<Parameters<ProjectsApi['create']>[0]>().toEqualTypeOf<BodyInputOf<typeof api.projects.create>>();
    expectTypeOf<Parameters<SnapshotsApi['create']>[0]>().toEqualTypeOf<BodyInputOf<typeof api.lifecycle.createSnapshot> | undefined>();
    expectTypeOf<Parameters<KeysApi['create']>[0]>().toEqualTypeOf<BodyInputOf<typeof api.keys.issue> | undefined>();
    expectTypeOf<Parameters<StorageClient['uploadTicket']>[0]>().toEqualTypeOf<BodyInputOf<typeof api.storage.uploadTicket>>();
    expectTypeOf<Parameters<StorageClient['downloadTicket']>[0]>().toEqualTypeOf<BodyInputOf<typeof api.storage.downloadTicket>>();
  });
});
