/**
 * The files of control groups (./cgroups.ts; docs/lifecycle.md "Engine isolation"): writing one
 * group's limits in either hierarchy (v1 per controller, v2 in the one directory), enabling the
 * controllers of a v2 parent, reading a group's processes, and removing empty groups.
 */
import { existsSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Limits of one group; an absent limit is "no limit" (the controller's default). */
export interface CgroupLimits {
  /** Memory (and memory plus swap where accounted) in bytes; the kernel's OOM killer acts past it. */
  memoryBytes?: number;
  /** Relative CPU weight in v1 units (1024 = the default share). */
  cpuShares?: number;
  /** At most this much CPU time, in percent of one core (100 = one core, 200 = two). */
  cpuQuotaPercent?: number;
  /** At most this many tasks (processes and threads). */
  pidsMax?: number;
}

/** The controllers this module uses. */
export type Controller = 'memory' | 'cpu' | 'pids';

const CFS_PERIOD_US = 100_000;
/** v1's "no memory limit" as the kernel reports it (page-rounded LONG_MAX); writing -1 sets it. */
const V1_UNLIMITED = -1;

/** v2: lets the children of `dir` use memory, cpu (and pids), unless they may already. */
export function enableControllers(dir: string): void {
  const enabled = readQuietly(join(dir, 'cgroup.subtree_control'))?.split(/\s+/) ?? [];
  const offered = readQuietly(join(dir, 'cgroup.controllers'))?.split(/\s+/) ?? [];
  const wanted = ['memory', 'cpu', 'pids'].filter((c) => offered.includes(c) && !enabled.includes(c));
  if (wanted.length > 0) writeFileSync(join(dir, 'cgroup.subtree_control'), wanted.map((c) => `+${c}`).join(' '));
}

/** v1: the limits of one controller's group. */
export function applyV1(controller: Controller, dir: string, limits: CgroupLimits): void {
  if (controller === 'memory') {
    const target = limits.memoryBytes ?? V1_UNLIMITED;
    const limitFile = join(dir, 'memory.limit_in_bytes');
    const swapFile = join(dir, 'memory.memsw.limit_in_bytes');
    if (!existsSync(swapFile)) {
      writeFileSync(limitFile, String(target));
      return;
    }
    // memory+swap may never be below memory: raise it first when the limit goes up, lower it after.
    const current = Number(readQuietly(limitFile) ?? 'NaN');
    const raising = target === V1_UNLIMITED || !(target <= current);
    if (raising) {
      writeFileSync(swapFile, String(target));
      writeFileSync(limitFile, String(target));
    } else {
      writeFileSync(limitFile, String(target));
      writeFileSync(swapFile, String(target));
    }
  } else if (controller === 'cpu') {
    writeFileSync(join(dir, 'cpu.shares'), String(Math.max(2, Math.round(limits.cpuShares ?? 1024))));
    writeFileSync(join(dir, 'cpu.cfs_period_us'), String(CFS_PERIOD_US));
    writeFileSync(join(dir, 'cpu.cfs_quota_us'), limits.cpuQuotaPercent === undefined ? '-1' : String(quotaUs(limits.cpuQuotaPercent)));
  } else {
    writeFileSync(join(dir, 'pids.max'), limits.pidsMax === undefined ? 'max' : String(Math.max(1, Math.floor(limits.pidsMax))));
  }
}

/** v2: every limit in the one directory. */
export function applyV2(dir: string, limits: CgroupLimits): void {
  writeFileSync(join(dir, 'memory.max'), limits.memoryBytes === undefined ? 'max' : String(Math.floor(limits.memoryBytes)));
  if (existsSync(join(dir, 'memory.swap.max'))) writeFileSync(join(dir, 'memory.swap.max'), limits.memoryBytes === undefined ? 'max' : '0');
  writeFileSync(join(dir, 'cpu.weight'), String(sharesToWeight(limits.cpuShares ?? 1024)));
  writeFileSync(join(dir, 'cpu.max'), `${limits.cpuQuotaPercent === undefined ? 'max' : quotaUs(limits.cpuQuotaPercent)} ${CFS_PERIOD_US}`);
  if (existsSync(join(dir, 'pids.max'))) writeFileSync(join(dir, 'pids.max'), limits.pidsMax === undefined ? 'max' : String(Math.max(1, Math.floor(limits.pidsMax))));
}

/** CPU time per period for a percentage of one core (at least the kernel's 1 ms minimum). */
function quotaUs(percent: number): number {
  return Math.max(1000, Math.round((percent / 100) * CFS_PERIOD_US));
}

/** A v1 share as a v2 weight: proportional, so v1's default 1024 is v2's default 100 (1..10000). */
export function sharesToWeight(shares: number): number {
  return Math.min(10_000, Math.max(1, Math.round((shares * 100) / 1024)));
}

export function readQuietly(file: string): string | null {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return null;
  }
}

export function readPids(dir: string): number[] {
  const text = readQuietly(join(dir, 'cgroup.procs'));
  if (text === null) return [];
  return text
    .split('\n')
    .filter((line) => /^\d+$/.test(line))
    .map(Number);
}

/** Removes `top`'s empty descendant groups, deepest first, and `top` itself when `andTop`. */
export function removeEmptyTree(top: string, andTop: boolean): void {
  let entries;
  try {
    entries = readdirSync(top, { withFileTypes: true });
  } catch {
    return;
  }
  for (const entry of entries) {
    if (entry.isDirectory()) removeEmptyTree(join(top, entry.name), true);
  }
  if (!andTop || readPids(top).length > 0) return;
  try {
    rmdirSync(top);
  } catch {
    // still in use, or not ours to remove
  }
}
