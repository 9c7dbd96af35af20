/**
 * The SDK's answer types (client/types.ts) stay equal to the types the service answers with: checked
 * by the type checker (`tsc --noEmit`), so a field added or renamed on either side fails the build.
 */
import { describe, expectTypeOf, it } from 'vitest';
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
