/**
 * The user switch and the ownership of sandboxed processes' directories (./identity.ts): the setpriv
 * prefix, `chown -R` that never follows a symbolic link out of the tree and never walks a tree of a
 * third user, and the search-permission check on the way to a directory.
 */
import { chmodSync, chownSync, lstatSync, mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { blockedOnTheWay, ownTree, runAsPrefix } from './identity.ts';

const ROOT = process.getuid?.() === 0;
const USER = { uid: 4321, gid: 4322 };
const temps: string[] = [];
afterAll(() => {
  for (const dir of temps) rmSync(dir, { recursive: true, force: true });
});

function temp(): string {
  const dir = mkdtempSync(join(tmpdir(), 'svc-identity-'));
  temps.push(dir);
  return dir;
}

describe('runAsPrefix', () => {
  it('switches uid and gid, drops every group and sets no_new_privs, through setpriv', () => {
    expect(runAsPrefix(USER, '/usr/bin/setpriv')).toEqual(['/usr/bin/setpriv', '--reuid=4321', '--regid=4322', '--clear-groups', '--no-new-privs', '--']);
  });

  it('refuses uid or gid 0, and says when setpriv is missing', () => {
    expect(runAsPrefix({ uid: 0, gid: 5 }, '/usr/bin/setpriv')).toMatch(/uid or gid 0/);
    expect(runAsPrefix({ uid: 5, gid: 0 }, '/usr/bin/setpriv')).toMatch(/uid or gid 0/);
    expect(runAsPrefix(USER, null)).toMatch(/setpriv is not installed/);
  });
});

describe.skipIf(!ROOT)('ownTree (as root)', () => {
  it('gives a root tree to the user, links themselves and never their targets, then the top’s mode', () => {
    const dir = temp();
    const outside = join(dir, 'outside');
    writeFileSync(outside, 'host file');
    const tree = join(dir, 'data');
    mkdirSync(join(tree, 'a', 'b'), { recursive: true });
    writeFileSync(join(tree, 'a', 'b', 'f'), 'x');
    symlinkSync(outside, join(tree, 'a', 'link'));
    symlinkSync(dir, join(tree, 'dirlink'));
    expect(ownTree(tree, USER, 0o700)).toBe(true);
    for (const path of [tree, join(tree, 'a'), join(tree, 'a', 'b'), join(tree, 'a', 'b', 'f'), join(tree, 'a', 'link'), join(tree, 'dirlink')]) {
      expect(lstatSync(path).uid, path).toBe(USER.uid);
      expect(lstatSync(path).gid, path).toBe(USER.gid);
    }
    expect(statSync(outside).uid).toBe(0);
    expect(statSync(dir).uid).toBe(0);
    expect(statSync(tree).mode & 0o7777).toBe(0o700);
    // Already the user's: nothing to do.
    expect(ownTree(tree, USER, 0o700)).toBe(false);
  });

  it('refuses a tree of a third user, and a symbolic link in place of the tree', () => {
    const dir = temp();
    const theirs = join(dir, 'theirs');
    mkdirSync(theirs);
    chownSync(theirs, 5555, 5555);
    expect(() => ownTree(theirs, USER, 0o700)).toThrow(/belongs to uid 5555/);
    symlinkSync(dir, join(dir, 'link'));
    expect(() => ownTree(join(dir, 'link'), USER, 0o700)).toThrow(/not a directory/);
  });
});

describe('blockedOnTheWay', () => {
  it('names the first directory the user cannot search', () => {
    const dir = temp();
    const inner = join(dir, 'a', 'b');
    mkdirSync(inner, { recursive: true });
    chmodSync(dir, 0o711);
    chmodSync(join(dir, 'a'), 0o700);
    expect(blockedOnTheWay(inner, USER)).toBe(join(dir, 'a'));
    chmodSync(join(dir, 'a'), 0o711);
    expect(blockedOnTheWay(inner, USER)).toBeNull();
  });
});
