/**
 * A project's automatic sleep and backups on the command line (docs/cli.md; docs/lifecycle.md
 * "Automatic sleep and backups"): `svc projects update` options turned into the body of
 * `PATCH /v0/projects/{id}`, and the settings and recovery point as `svc projects get|list` print them.
 */
import type { Project, RenameProjectInput } from '../../types.ts';
import { UsageError } from '../errors.ts';

const UNITS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400 };

/** `--auto-sleep`: `90`, `90s`, `10m`, `2h`, `1d` (whole numbers), or `off`; answers seconds or null. */
export function durationArg(value: string): number | null {
  if (value === 'off') return null;
  const m = /^(\d{1,9})([smhd]?)$/.exec(value);
  if (!m) throw new UsageError(`--auto-sleep must be a duration such as 90s, 10m, 2h or 1d, or off (got ${JSON.stringify(value)})`);
  return Number(m[1]) * UNITS[m[2] || 's']!;
}

/** `--backup-keep`: a whole number from 1 to 100. */
export function keepArg(value: string): number {
  if (!/^\d{1,3}$/.test(value) || Number(value) < 1 || Number(value) > 100) throw new UsageError(`--backup-keep must be a whole number from 1 to 100 (got ${JSON.stringify(value)})`);
  return Number(value);
}

/** The options of `svc projects update`. */
export interface UpdateOptions {
  name?: string;
  autoSleep?: string;
  backup?: string;
  backupKeep?: string;
}

/** The body of `PATCH /v0/projects/{id}` the options ask for; a usage error when they ask for nothing or contradict each other. */
export function changesOf(options: UpdateOptions): RenameProjectInput {
  const changes: RenameProjectInput = {};
  if (options.name !== undefined) changes.name = options.name;
  if (options.autoSleep !== undefined) changes.auto_sleep_after_s = durationArg(options.autoSleep);
  if (options.backup !== undefined && options.backup !== 'on' && options.backup !== 'off') throw new UsageError(`--backup must be on or off (got ${JSON.stringify(options.backup)})`);
  if (options.backup === 'off') {
    if (options.backupKeep !== undefined) throw new UsageError('--backup-keep needs --backup on (or no --backup)');
    changes.backup = null;
  } else if (options.backup === 'on' || options.backupKeep !== undefined) {
    changes.backup = { on_sleep: true, ...(options.backupKeep !== undefined ? { keep: keepArg(options.backupKeep) } : {}) };
  }
  if (Object.keys(changes).length === 0) throw new UsageError('nothing to change: pass --name, --auto-sleep, --backup or --backup-keep');
  return changes;
}

/** Seconds as the shortest whole unit: 600 → `10m`, 90 → `90s`. */
export function formatSeconds(seconds: number): string {
  for (const unit of ['d', 'h', 'm'] as const) if (seconds % UNITS[unit]! === 0) return `${seconds / UNITS[unit]!}${unit}`;
  return `${seconds}s`;
}

/** `auto_sleep` as printed. */
export function describeAutoSleep(p: Pick<Project, 'auto_sleep_after_s'>): string {
  return p.auto_sleep_after_s === null ? 'off' : `after ${formatSeconds(p.auto_sleep_after_s)} without /v2 traffic`;
}

/** `backup` as printed. */
export function describeBackup(p: Pick<Project, 'backup'>): string {
  if (!p.backup) return 'off';
  return p.backup.on_sleep ? `at each sleep that follows writes, newest ${p.backup.keep} kept` : `off (keep ${p.backup.keep})`;
}

/** The recovery point as printed: when the newest copy off the machine was taken, and the state of the newest snapshot's copy. */
export function describeLastBackup(p: Pick<Project, 'last_backup_at' | 'last_backup_offsite'>): string {
  const newest = p.last_backup_offsite === null ? 'no snapshot' : `newest snapshot's copy ${p.last_backup_offsite}`;
  return `${p.last_backup_at ?? 'none off the machine'} (${newest})`;
}
