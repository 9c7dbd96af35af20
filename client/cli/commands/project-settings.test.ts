import { describe, expect, it } from 'vitest';
import { UsageError } from '../errors.ts';
import { changesOf, describeAutoSleep, describeBackup, describeLastBackup, durationArg, formatSeconds, keepArg } from './project-settings.ts';

describe('svc projects update: settings on the command line', () => {
  it('reads durations in whole seconds, minutes, hours or days, and off', () => {
    expect([durationArg('90'), durationArg('90s'), durationArg('10m'), durationArg('2h'), durationArg('1d'), durationArg('off')]).toEqual([90, 90, 600, 7200, 86400, null]);
    for (const bad of ['', '1.5m', '-1', '10 m', 'soon', '5w', '1e3']) expect(() => durationArg(bad), bad).toThrow(UsageError);
  });

  it('reads keep from 1 to 100', () => {
    expect([keepArg('1'), keepArg('100')]).toEqual([1, 100]);
    for (const bad of ['0', '101', '2.5', 'x', '']) expect(() => keepArg(bad), bad).toThrow(UsageError);
  });

  it('turns the options into the PATCH body', () => {
    expect(changesOf({ autoSleep: '10m', backupKeep: '3' })).toEqual({ auto_sleep_after_s: 600, backup: { on_sleep: true, keep: 3 } });
    expect(changesOf({ backup: 'on' })).toEqual({ backup: { on_sleep: true } });
    expect(changesOf({ autoSleep: 'off', backup: 'off' })).toEqual({ auto_sleep_after_s: null, backup: null });
    expect(changesOf({ name: 'x' })).toEqual({ name: 'x' });
    expect(() => changesOf({})).toThrow(/nothing to change/);
    expect(() => changesOf({ backup: 'maybe' })).toThrow(/--backup must be on or off/);
    expect(() => changesOf({ backup: 'off', backupKeep: '3' })).toThrow(/--backup-keep needs --backup on/);
  });

  it('prints the settings and the recovery point', () => {
    expect([formatSeconds(600), formatSeconds(90), formatSeconds(7200), formatSeconds(86400), formatSeconds(61)]).toEqual(['10m', '90s', '2h', '1d', '61s']);
    expect(describeAutoSleep({ auto_sleep_after_s: null })).toBe('off');
    expect(describeAutoSleep({ auto_sleep_after_s: 600 })).toBe('after 10m without /v2 traffic');
    expect(describeBackup({ backup: null })).toBe('off');
    expect(describeBackup({ backup: { on_sleep: true, keep: 7 } })).toBe('at each sleep that follows writes, newest 7 kept');
    expect(describeLastBackup({ last_backup_at: null, last_backup_offsite: null })).toBe('none off the machine (no snapshot)');
    expect(describeLastBackup({ last_backup_at: '2026-11-26T10:00:00.000Z', last_backup_offsite: 'pending' })).toBe("2026-11-26T10:00:00.000Z (newest snapshot's copy pending)");
  });
});
