/**
 * The overview's backup state and automation settings (docs/lifecycle.md "Automatic sleep and
 * backups"): the project's recovery point (`last_backup_at`) and the state of its newest snapshot's
 * off-machine copy (`last_backup_offsite`), and a form for `auto_sleep_after_s` and `backup`
 * (`{on_sleep, keep}`) sent with `PATCH /v0/projects/{id}` (the SDK's `update`). Each renders nothing on a service whose
 * project answer has no such field.
 */
import { html } from 'htm/preact';
import { Fragment, type VNode } from 'preact';
import { useState } from 'preact/hooks';
import type { Project, ProjectClient } from '../../client/index.ts';
import { ErrorBox, Time, useAction } from '../ui.ts';

/** The settings this form sets, as the project answer carries them (absent on an older service). */
interface Automation {
  last_backup_at?: string | null;
  last_backup_offsite?: 'pending' | 'complete' | 'unavailable' | null;
  auto_sleep_after_s?: number | null;
  backup?: { on_sleep: boolean; keep: number } | null;
}

const OFFSITE: Record<string, string> = {
  complete: 'copied off the machine',
  pending: 'copy off the machine in progress',
  unavailable: 'no off-machine store configured',
};

/** Rows of the overview's grid: the last backup and its off-machine state. */
export function BackupState({ record }: { record: Project }): VNode | null {
  const r = record as Project & Automation;
  if (!('last_backup_at' in r) && !('last_backup_offsite' in r)) return null;
  return html`<${Fragment}>
    <span>Last backup</span>
    <span data-test="last-backup">${r.last_backup_at ? html`<${Time} at=${r.last_backup_at} />` : html`<span class="muted">none off the machine yet</span>`}</span>
    <span>Newest snapshot</span>
    <span data-test="last-backup-offsite">${r.last_backup_offsite ? html`<span class=${`badge ${r.last_backup_offsite}`}>${r.last_backup_offsite}</span> <span class="muted">${OFFSITE[r.last_backup_offsite] ?? ''}</span>` : html`<span class="muted">no snapshot</span>`}</span>
  <//>`;
}

/** Automatic sleep and backups: a small form, or nothing when the service answers neither setting. */
export function AutomationForm({ project, record, onChanged }: { project: ProjectClient; record: Project; onChanged: (p: Project) => void }): VNode | null {
  const r = record as Project & Automation;
  const hasSleep = 'auto_sleep_after_s' in r;
  const hasBackup = 'backup' in r;
  const [sleepOn, setSleepOn] = useState(r.auto_sleep_after_s != null);
  const [minutes, setMinutes] = useState(r.auto_sleep_after_s != null ? String(r.auto_sleep_after_s / 60) : '15');
  const [backupOn, setBackupOn] = useState(r.backup?.on_sleep ?? false);
  const [keep, setKeep] = useState(String(r.backup?.keep ?? 7));
  const [saved, setSaved] = useState(false);
  const save = useAction(async () => {
    setSaved(false);
    const body: Pick<Automation, 'auto_sleep_after_s' | 'backup'> = {};
    if (hasSleep) {
      const seconds = Math.round(Number(minutes) * 60);
      if (sleepOn && !(seconds > 0)) throw new Error('automatic sleep: give the idle time in minutes');
      body.auto_sleep_after_s = sleepOn ? seconds : null;
    }
    if (hasBackup) body.backup = backupOn ? { on_sleep: true, keep: Number(keep) } : null;
    onChanged(await project.update(body));
    setSaved(true);
  });
  if (!hasSleep && !hasBackup) return null;
  const input = (set: (v: string) => void) => (e: Event) => (setSaved(false), set((e.target as HTMLInputElement).value));
  const check = (set: (v: boolean) => void) => (e: Event) => (setSaved(false), set((e.target as HTMLInputElement).checked));
  return html`<form class="stack" onSubmit=${(e: Event) => (e.preventDefault(), void save.run())} data-test="automation-form">
    <div class="muted">Automatic sleep and backups</div>
    ${hasSleep
      ? html`<div class="row">
          <label class="inline"><input type="checkbox" name="auto_sleep" checked=${sleepOn} onChange=${check(setSleepOn)} data-test="auto-sleep-on" /> Sleep after</label>
          <input type="number" name="auto_sleep_minutes" min="0.1" step="any" style=${{ width: '90px' }} value=${minutes} disabled=${!sleepOn} onInput=${input(setMinutes)} data-test="auto-sleep-minutes" />
          <span>minutes without <code>/v2</code> requests</span>
        </div>`
      : null}
    ${hasBackup
      ? html`<div class="row">
          <label class="inline"><input type="checkbox" name="backup_on_sleep" checked=${backupOn} onChange=${check(setBackupOn)} data-test="backup-on-sleep" /> Snapshot at each sleep after writes, keeping the newest</label>
          <input type="number" name="backup_keep" min="1" max="100" style=${{ width: '70px' }} value=${keep} disabled=${!backupOn} onInput=${input(setKeep)} data-test="backup-keep" />
        </div>`
      : null}
    <div class="row">
      <button type="submit" disabled=${save.busy} data-test="automation-save">${save.busy ? 'Saving…' : 'Save'}</button>
      ${saved ? html`<span class="muted" data-test="automation-saved">Saved.</span>` : null}
    </div>
    <${ErrorBox} error=${save.error} />
  </form>`;
}
