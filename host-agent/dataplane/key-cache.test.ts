import { describe, expect, it } from 'vitest';
import { newProjectKey, verifierOf } from '../../shared/auth.ts';
import type { KeyLookup } from '../../shared/db/keys.ts';
import { KeyCache, verifierBytes } from './key-cache.ts';

const PEPPER = 'p'.repeat(48);
const PROJECT = 'prj_0123456789abcdef';

async function fixture(overrides: Partial<KeyLookup> = {}) {
  const key = newProjectKey();
  const stored: KeyLookup = { key_id: key.keyId, project: PROJECT, verifier: await verifierOf(PEPPER, key.secret), revoked_at: null, ...overrides };
  return { key, stored };
}

/** A loader over a map, counting reads; `gate` holds reads until released. */
function loader(items: Map<string, KeyLookup>) {
  let release: () => void = () => {};
  let gate: Promise<void> | null = null;
  const l = {
    reads: 0,
    fail: false,
    hold() {
      gate = new Promise((r) => (release = r));
    },
    release: () => release(),
    load: async (id: string) => {
      l.reads++;
      if (gate) await gate;
      if (l.fail) throw new Error('DynamoDB unavailable');
      return items.get(id) ?? null;
    },
  };
  return l;
}

describe('verifierBytes', () => {
  it('is the verifier shared/auth.ts stores (HMAC-SHA256 of the secret under the pepper)', async () => {
    for (const secret of ['a'.repeat(64), newProjectKey().secret, '']) {
      expect(verifierBytes(PEPPER, secret).toString('hex')).toBe(await verifierOf(PEPPER, secret));
    }
  });
});

describe('KeyCache', () => {
  it('reads a key once, then verifies from memory', async () => {
    const { key, stored } = await fixture();
    const l = loader(new Map([[key.keyId, stored]]));
    const cache = new KeyCache({ pepper: PEPPER, load: l.load });
    for (let i = 0; i < 5; i++) await expect(cache.verify(key)).resolves.toEqual({ keyId: key.keyId, projectId: PROJECT });
    expect(l.reads).toBe(1);
    expect(cache.stats.hits).toBe(4);
  });

  it('shares one read among concurrent cold requests', async () => {
    const { key, stored } = await fixture();
    const l = loader(new Map([[key.keyId, stored]]));
    const cache = new KeyCache({ pepper: PEPPER, load: l.load });
    await Promise.all(Array.from({ length: 16 }, () => cache.verify(key)));
    expect(l.reads).toBe(1);
  });

  it('refuses a wrong secret from a warm entry without reading again', async () => {
    const { key, stored } = await fixture();
    const l = loader(new Map([[key.keyId, stored]]));
    const cache = new KeyCache({ pepper: PEPPER, load: l.load });
    await cache.verify(key);
    await expect(cache.verify({ keyId: key.keyId, secret: 'f'.repeat(64) })).rejects.toMatchObject({ status: 401 });
    expect(l.reads).toBe(1);
  });

  it('refuses a key revoked in the store, and remembers unknown key ids', async () => {
    const revoked = await fixture({ revoked_at: '2026-01-01T00:00:00.000Z' });
    const l = loader(new Map([[revoked.key.keyId, revoked.stored]]));
    const cache = new KeyCache({ pepper: PEPPER, load: l.load });
    await expect(cache.verify(revoked.key)).rejects.toMatchObject({ code: 'authentication_required' });
    await expect(cache.verify(revoked.key)).rejects.toMatchObject({ code: 'authentication_required' });
    const unknown = newProjectKey();
    await expect(cache.verify(unknown)).rejects.toMatchObject({ code: 'authentication_required' });
    await expect(cache.verify(unknown)).rejects.toMatchObject({ code: 'authentication_required' });
    expect(l.reads).toBe(2);
  });

  it('refuses the key at once after invalidate, with no read', async () => {
    const { key, stored } = await fixture();
    const l = loader(new Map([[key.keyId, stored]]));
    const cache = new KeyCache({ pepper: PEPPER, load: l.load });
    await cache.verify(key);
    cache.invalidate(key.keyId);
    await expect(cache.verify(key)).rejects.toMatchObject({ status: 401 });
    expect(l.reads).toBe(1);
  });

  it('lets an invalidation win over a read that was in flight when it arrived', async () => {
    const { key, stored } = await fixture();
    const l = loader(new Map([[key.keyId, stored]]));
    const cache = new KeyCache({ pepper: PEPPER, load: l.load });
    l.hold();
    const pending = cache.verify(key);
    await new Promise((r) => setTimeout(r, 5));
    cache.invalidate(key.keyId);
    l.release();
    await expect(pending).rejects.toMatchObject({ status: 401 });
    await expect(cache.verify(key)).rejects.toMatchObject({ status: 401 });
  });

  it('re-reads an active entry after refreshMs, and keeps serving it when that read fails', async () => {
    const { key, stored } = await fixture();
    const items = new Map([[key.keyId, stored]]);
    const l = loader(items);
    let now = 1_000_000;
    const cache = new KeyCache({ pepper: PEPPER, load: l.load, refreshMs: 60_000, retryMs: 1_000, now: () => now });
    await cache.verify(key);
    now += 61_000;
    l.fail = true;
    await expect(cache.verify(key)).resolves.toMatchObject({ projectId: PROJECT });
    expect(l.reads).toBe(2);
    // The failed re-read is retried after retryMs, not on every request.
    await cache.verify(key);
    expect(l.reads).toBe(2);
    now += 1_500;
    l.fail = false;
    items.set(key.keyId, { ...stored, revoked_at: '2026-01-01T00:00:00.000Z' });
    await expect(cache.verify(key)).rejects.toMatchObject({ status: 401 });
    expect(l.reads).toBe(3);
  });

  it('fails a cold read when the store is unavailable (no verdict is cached)', async () => {
    const { key, stored } = await fixture();
    const l = loader(new Map([[key.keyId, stored]]));
    l.fail = true;
    const cache = new KeyCache({ pepper: PEPPER, load: l.load });
    await expect(cache.verify(key)).rejects.toThrow('DynamoDB unavailable');
    l.fail = false;
    await expect(cache.verify(key)).resolves.toMatchObject({ projectId: PROJECT });
  });

  it('stays within its bounds', async () => {
    const l = loader(new Map());
    const cache = new KeyCache({ pepper: PEPPER, load: l.load, maxKeys: 3, maxUnknown: 2 });
    for (let i = 0; i < 10; i++) await cache.verify(newProjectKey()).catch(() => {});
    for (let i = 0; i < 10; i++) cache.invalidate(newProjectKey().keyId);
    expect(cache.size).toBe(5);
  });
});

describe('KeyCache with placements (several agents)', () => {
  /** A placement source over a map, counting reads; `gate` holds reads until released. */
  function placements(owners: Map<string, string>) {
    let release: () => void = () => {};
    let gate: Promise<void> | null = null;
    const p = {
      reads: 0,
      hold() {
        gate = new Promise((r) => (release = r));
      },
      release: () => release(),
      load: async (projectId: string) => {
        p.reads++;
        if (gate) await gate;
        return owners.get(projectId) ?? null;
      },
    };
    return p;
  }

  it("answers the key's owning agent; a cold key costs its own read plus its project's placement once", async () => {
    const a = await fixture();
    const b = await fixture();
    const other = await fixture({ project: 'prj_fedcba9876543210' });
    const l = loader(new Map([a, b, other].map((f) => [f.key.keyId, f.stored])));
    const p = placements(new Map([[PROJECT, 'agt_00000000000000aa'], ['prj_fedcba9876543210', 'agt_00000000000000bb']]));
    const cache = new KeyCache({ pepper: PEPPER, load: l.load, placement: p.load });
    await expect(cache.verify(a.key)).resolves.toEqual({ keyId: a.key.keyId, projectId: PROJECT, owner: 'agt_00000000000000aa' });
    await expect(cache.verify(b.key)).resolves.toMatchObject({ owner: 'agt_00000000000000aa' });
    await expect(cache.verify(other.key)).resolves.toMatchObject({ owner: 'agt_00000000000000bb' });
    for (let i = 0; i < 3; i++) await cache.verify(a.key);
    expect(l.reads).toBe(3); // one per key
    expect(p.reads).toBe(2); // one per project
    expect(cache.stats.placementLoads).toBe(2);
  });

  it('shares one placement read among concurrent cold keys of one project', async () => {
    const keys = await Promise.all(Array.from({ length: 8 }, () => fixture()));
    const l = loader(new Map(keys.map((f) => [f.key.keyId, f.stored])));
    const p = placements(new Map([[PROJECT, 'agt_00000000000000aa']]));
    const cache = new KeyCache({ pepper: PEPPER, load: l.load, placement: p.load });
    await Promise.all(keys.map((f) => cache.verify(f.key)));
    expect(p.reads).toBe(1);
  });

  it('does not read the placement again when an active entry is refreshed', async () => {
    const { key, stored } = await fixture();
    const other = await fixture({ project: 'prj_fedcba9876543210' });
    const l = loader(new Map([[key.keyId, stored], [other.key.keyId, other.stored]]));
    const p = placements(new Map([[PROJECT, 'agt_00000000000000aa'], ['prj_fedcba9876543210', 'agt_00000000000000bb']]));
    let now = 1_000_000;
    const cache = new KeyCache({ pepper: PEPPER, load: l.load, placement: p.load, refreshMs: 60_000, maxPlacements: 1, now: () => now });
    await cache.verify(key);
    // Evict the placement from its LRU (it holds one): the refresh still knows the owner from the entry.
    await expect(cache.verify(other.key)).resolves.toMatchObject({ owner: 'agt_00000000000000bb' });
    expect(p.reads).toBe(2);
    now += 61_000;
    await expect(cache.verify(key)).resolves.toMatchObject({ owner: 'agt_00000000000000aa' });
    expect(l.reads).toBe(3);
    expect(p.reads).toBe(2);
  });

  it('lets an invalidation win over a placement read in flight', async () => {
    const { key, stored } = await fixture();
    const l = loader(new Map([[key.keyId, stored]]));
    const p = placements(new Map([[PROJECT, 'agt_00000000000000aa']]));
    const cache = new KeyCache({ pepper: PEPPER, load: l.load, placement: p.load });
    p.hold();
    const pending = cache.verify(key);
    await new Promise((r) => setTimeout(r, 5));
    cache.invalidate(key.keyId);
    p.release();
    await expect(pending).rejects.toMatchObject({ status: 401 });
  });

  it('refuses a key whose project has no placement, and never reads it again', async () => {
    const { key, stored } = await fixture();
    const l = loader(new Map([[key.keyId, stored]]));
    const p = placements(new Map());
    const cache = new KeyCache({ pepper: PEPPER, load: l.load, placement: p.load });
    await expect(cache.verify(key)).rejects.toMatchObject({ status: 401 });
    await expect(cache.verify(key)).rejects.toMatchObject({ status: 401 });
    expect(l.reads).toBe(1);
  });
});
