/**
 * `#/projects/<id>/snapshots`: snapshots of the data directory (docs/lifecycle.md): create one of a
 * sleeping project, list them, restore one after a confirmation (the current directory is moved
 * aside, never deleted).
 */
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useState } from 'preact/hooks';
import type { Project, ProjectClient, Restored, Snapshot } from '../../client/index.ts';
import { Busy, Confirm, ErrorBox, PagedTable, Time, formatBytes, useAction, usePager } from '../ui.ts';

/** The snapshots page. */
export function Snapshots({ project, record, onChanged }: { project: ProjectClient; record: Project; onChanged: (p: Project) => void }): VNode {
  const pager = usePager(async (cursor) => {
    const page = await project.snapshots.list({ limit: 20, ...(cursor ? { cursor } : {}) }).first();
    return { items: page.snapshots, next: page.next_cursor };
  }, [project.id]);
  const [label, setLabel] = useState('');
  const [restoring, setRestoring] = useState<Snapshot | null>(null);
  const [restored, setRestored] = useState<Restored | null>(null);
  const create = useAction(async () => {
    await project.snapshots.create({ label: label.trim() === '' ? null : label.trim() });
    setLabel('');
    await pager.reload();
  });
  const sleep = useAction(async () => onChanged(await project.sleep()));
  const restore = useAction(async (s: Snapshot) => {
    setRestoring(null);
    setRestored(null);
    setRestored(await project.restore(s.id));
    onChanged(await project.get());
  });
  const running = record.state === 'running';
  const row = (s: Snapshot) => html`<tr key=${s.id} data-test="snapshot-row">
    <td class="mono" data-test="snapshot-id">${s.id}</td>
    <td>${s.label ?? html`<span class="muted">—</span>`}${s.automatic ? html` <span class="badge" title="taken by the agent after a sleep">automatic</span>` : null}</td>
    <td><${Time} at=${s.created_at} /></td>
    <td class="num">${formatBytes(s.backup.total_bytes)}</td>
    <td class="num">${s.lineage.visible_csn}</td>
    <td data-test="snapshot-offsite">${s.offsite ? html`<span class=${`badge ${s.offsite.state}`} title=${s.offsite.completed_at ?? ''}>${s.offsite.state}</span>` : html`<span class="muted">—</span>`}</td>
    <td><button class="danger" disabled=${restore.busy} onClick=${() => setRestoring(s)} data-test="restore-snapshot">Restore</button></td>
  </tr>`;
  return html`<div data-test="page-snapshots">
    <h1>Snapshots</h1>
    <p class="muted">A snapshot is a verified backup of the data directory, taken while the engine sleeps. Restoring replaces the directory and keeps the previous one aside.</p>
    ${running
      ? html`<div class="notice row">The engine is running: snapshots and restores need it asleep.
          <button disabled=${sleep.busy} onClick=${() => sleep.run()} data-test="snapshots-sleep">Sleep now</button>${sleep.busy ? html`<${Busy}>Stopping the engine…<//>` : null}</div>`
      : null}
    <${ErrorBox} error=${sleep.error} />
    <div class="panel">
      <form class="row" onSubmit=${(e: Event) => (e.preventDefault(), void create.run())}>
        <input name="snapshot_label" placeholder="Label (optional)" value=${label} maxlength="64" onInput=${(e: Event) => setLabel((e.target as HTMLInputElement).value)} />
        <button class="primary" type="submit" disabled=${create.busy} data-test="create-snapshot">Create snapshot</button>
        ${create.busy ? html`<${Busy}>Taking a verified backup…<//>` : null}
      </form>
      <${ErrorBox} error=${create.error} />
    </div>
    ${restore.busy ? html`<${Busy}>Restoring: the engine verifies the backup, stages and checks it…<//>` : null}
    <${ErrorBox} error=${restore.error} />
    ${restored
      ? html`<div class="notice" data-test="restored">Restored snapshot <code>${restored.snapshot_id}</code> at <${Time} at=${restored.restored_at} />; the previous directory is kept at <code>${restored.replaced_dir}</code>. The project is ${restored.state}.</div>`
      : null}
    <${ErrorBox} error=${pager.action.error} />
    <${PagedTable} pager=${pager} test="snapshots-table" head=${['Id', 'Label', 'Created', 'Size', 'Commits', 'Off machine', '']} row=${row} loading="Loading snapshots…" empty="No snapshot yet." />
    ${restoring
      ? html`<${Confirm} title="Restore this snapshot?" confirmLabel="Restore" onConfirm=${() => restore.run(restoring)} onCancel=${() => setRestoring(null)}>
          <p>The data directory is replaced by the state of <code>${restoring.id}</code>${restoring.label ? ` (${restoring.label})` : ''}, taken <${Time} at=${restoring.created_at} />.</p>
          <p>Everything written since is no longer in the project; the current directory is moved aside on the host, not deleted. The project stays asleep.</p>
        <//>`
      : null}
  </div>`;
}
