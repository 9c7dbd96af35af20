/**
 * The engine commands' declarations (./engine-commands.ts; docs/engine.md "CLI"): each makes the
 * argv the contract gives it, and reads the documents the reference engine prints; a document that
 * lacks a field the agent relies on is named by that field.
 */
import { describe, expect, it } from 'vitest';
import { backupCommand, initCommand, parseResult, restoreCommand, serveCommand, statusCommand, verifyCommand, versionCommand } from './engine-commands.ts';

describe('engine commands', () => {
  it('make the argv of the contract', () => {
    expect(versionCommand.argv(undefined)).toEqual(['version', '--json']);
    expect(initCommand.argv({ dataDir: '/d' })).toEqual(['init', '--data-dir', '/d', '--json']);
    expect(statusCommand.argv({ dataDir: '/d' })).toEqual(['status', '--data-dir', '/d', '--json']);
    expect(backupCommand.argv({ dataDir: '/d', out: '/b' })).toEqual(['backup', '--data-dir', '/d', '--out', '/b', '--json']);
    expect(restoreCommand.argv({ backup: '/b', target: '/t' })).toEqual(['restore', '--backup', '/b', '--target', '/t', '--json']);
    expect(verifyCommand.argv({ backup: '/b' })).toEqual(['verify', '--backup', '/b', '--json']);
    expect(serveCommand.argv({ dataDir: '/d', host: '127.0.0.1', port: 7001, maxBodyBytes: 1024, statementTimeoutMs: 500 })).toEqual([
      'serve',
      '--data-dir',
      '/d',
      '--listen',
      '127.0.0.1:7001',
      '--max-body-bytes',
      '1024',
      '--statement-timeout-ms',
      '500',
    ]);
  });

  it('read the documents of the contract, keeping their other fields', () => {
    const status = { visible_csn: 7, root_digest: 'ab', directory_lineage: 'lin_0', catalog_version: 2, logical_time_micros: 99, extra: true };
    expect(parseResult(statusCommand, status)).toEqual({ ok: true, value: status });
    const ready = { ready: true, listen: '127.0.0.1:7001', pid: 42, data_dir: '/d' };
    expect(parseResult(serveCommand, ready)).toEqual({ ok: true, value: ready });
    expect(parseResult(versionCommand, { engine_version: '3.0.0', protocol_minor: 3 })).toMatchObject({ ok: true });
    const verified = { status: 'verified', backup_path: '/b', checkpoint_digest: 'c', file_count: 2, total_bytes: 9, visible_csn: 3, directory_lineage: 'lin_0' };
    expect(parseResult(verifyCommand, verified)).toEqual({ ok: true, value: verified });
  });

  it('name the first field a document lacks, as the 502 says it', () => {
    expect(parseResult(statusCommand, { visible_csn: 7, directory_lineage: 'lin_0', catalog_version: 2, logical_time_micros: 99 })).toEqual({
      ok: false,
      problem: "the engine's status output lacks a valid root_digest",
    });
    expect(parseResult(backupCommand, { backup_path: '/b', checkpoint_digest: 'c', file_count: 1.5, total_bytes: 1, status: 'verified', visible_csn: 1 })).toEqual({
      ok: false,
      problem: "the engine's backup output lacks a valid file_count",
    });
    expect(parseResult(serveCommand, { ready: false, listen: 'x', pid: 1 })).toMatchObject({ ok: false });
  });
});
