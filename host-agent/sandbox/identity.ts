/**
 * Running a process as an unprivileged user (docs/lifecycle.md "Engine isolation"): a root agent
 * prefixes the command with util-linux `setpriv`, which switches the real, effective and saved uid
 * and gid, drops every supplementary group (root's included) and sets no_new_privs before it execs the
 * command, so nothing the command runs can gain privileges back. An agent that is not root cannot
 * switch users at all: its processes run as itself. Also the ownership of the directories such a
 * process must write (given to it, repaired when an older agent left them root's).
 */
import { chmodSync, lchownSync, lstatSync, readdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { systemTool } from './system-tools.ts';

/** A numeric user and group (no account needs to exist for them). */
export interface ProcessUser {
  uid: number;
  gid: number;
}

/** Whether this process can switch users (it runs as root). */
export function isRoot(): boolean {
  return process.getuid?.() === 0;
}

/**
 * The argv prefix that runs a command as `user` (`setpriv --reuid U --regid G --clear-groups
 * --no-new-privs --`), or why it cannot be had (util-linux setpriv is not installed).
 */
export function runAsPrefix(user: ProcessUser, setpriv: string | null = systemTool('setpriv')): string[] | string {
  if (user.uid === 0 || user.gid === 0) return 'refusing to run a sandboxed process as uid or gid 0';
  if (setpriv === null) return 'util-linux setpriv is not installed, so processes cannot be switched to an unprivileged user';
  return [setpriv, `--reuid=${user.uid}`, `--regid=${user.gid}`, '--clear-groups', '--no-new-privs', '--'];
}

/**
 * Gives the tree at `path` to `user` (`chown -R`, symbolic links themselves, never their targets) when
 * its top is not theirs yet, then sets the top's mode. The top is changed last, so a walk cut short
 * is done again next time. Answers whether anything was changed. Throws when the tree is missing,
 * is not a directory, or belongs to a third user.
 *
 * Only a tree of root (or of this process) is walked, and every directory is given away only once
 * everything below it was: while the walk runs, each directory it enters can be changed by root
 * alone, so `user` can never swap one for a symbolic link under it. A tree that is already `user`'s
 * (another group) gets its top's group only.
 */
export function ownTree(path: string, user: ProcessUser, mode: number): boolean {
  const top = lstatSync(path);
  if (!top.isDirectory()) throw new Error(`${path} is not a directory`);
  let changed = false;
  if (top.uid !== user.uid) {
    if (top.uid !== 0 && top.uid !== process.getuid?.()) throw new Error(`${path} belongs to uid ${top.uid}, neither the engine user ${user.uid} nor root: not given away automatically`);
    chownBelow(path, user);
    lchownSync(path, user.uid, user.gid);
    changed = true;
  } else if (top.gid !== user.gid) {
    lchownSync(path, user.uid, user.gid);
    changed = true;
  }
  if ((top.mode & 0o7777) !== mode) {
    chmodSync(path, mode);
    changed = true;
  }
  return changed;
}

function chownBelow(dir: string, user: ProcessUser): void {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) chownBelow(path, user);
    lchownSync(path, user.uid, user.gid);
  }
}

/** Adds search permission for others to a directory of ours (mode unchanged otherwise). */
export function allowTraversal(dir: string): void {
  const mode = statSync(dir).mode & 0o7777;
  if ((mode & 0o001) === 0) chmodSync(dir, mode | 0o001);
}

/**
 * The first directory on the way to `path` (itself included) that `user` cannot search, or null when
 * every one can be: `user` reaches `path` only through directories whose others, group or owner bits
 * let it in. Root is not assumed to be anyone's group.
 */
export function blockedOnTheWay(path: string, user: ProcessUser): string | null {
  const chain: string[] = [];
  for (let dir = path; ; dir = dirname(dir)) {
    chain.unshift(dir);
    if (dirname(dir) === dir) break;
  }
  for (const dir of chain) {
    let s;
    try {
      s = lstatSync(dir).isSymbolicLink() ? statSync(dir) : lstatSync(dir);
    } catch {
      return dir;
    }
    const bit = s.uid === user.uid ? 0o100 : s.gid === user.gid ? 0o010 : 0o001;
    if ((s.mode & bit) === 0) return dir;
  }
  return null;
}
