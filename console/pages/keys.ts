/**
 * `#/projects/<id>/keys`: project keys (docs/dataplane.md "Keys"). A new key is shown once with a
 * copy button; revoking asks first, since the very next request with the key is refused.
 */
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useState } from 'preact/hooks';
import type { IssuedKey, KeyRecord, ProjectClient } from '../../client/index.ts';
import { Confirm, CopyButton, ErrorBox, PagedTable, Time, useAction, usePager } from '../ui.ts';

/** The keys page. */
export function Keys({ project }: { project: ProjectClient }): VNode {
  const pager = usePager(async (cursor) => {
    const page = await project.keys.list({ limit: 50, ...(cursor ? { cursor } : {}) }).first();
    return { items: page.keys, next: page.next_cursor };
  }, [project.id]);
  const [label, setLabel] = useState('');
  const [issued, setIssued] = useState<IssuedKey | null>(null);
  const [revoking, setRevoking] = useState<KeyRecord | null>(null);
  const create = useAction(async () => {
    setIssued(await project.keys.create({ label: label.trim() === '' ? null : label.trim() }));
    setLabel('');
    await pager.reload();
  });
  const revoke = useAction(async (key: KeyRecord) => {
    setRevoking(null);
    await project.keys.revoke(key.key_id);
    await pager.reload();
  });
  const row = (k: KeyRecord) => html`<tr key=${k.key_id} data-test="key-row">
    <td class="mono">${k.key_id}</td>
    <td>${k.label ?? html`<span class="muted">—</span>`}</td>
    <td><${Time} at=${k.created_at} /></td>
    <td>${k.revoked_at ? html`<span class="badge revoked">revoked</span> <${Time} at=${k.revoked_at} />` : html`<span class="muted">active</span>`}</td>
    <td>${k.revoked_at ? null : html`<button class="danger" disabled=${revoke.busy} onClick=${() => setRevoking(k)} data-test="revoke-key">Revoke</button>`}</td>
  </tr>`;
  return html`<div data-test="page-keys">
    <h1>Project keys</h1>
    <p class="muted">A project key authenticates the data plane (<code>/v2</code>) and realtime subscriptions of this project.</p>
    <div class="panel">
      <form class="row" onSubmit=${(e: Event) => (e.preventDefault(), void create.run())}>
        <input name="key_label" placeholder="Label (optional)" value=${label} maxlength="64" onInput=${(e: Event) => setLabel((e.target as HTMLInputElement).value)} />
        <button class="primary" type="submit" disabled=${create.busy} data-test="create-key">${create.busy ? 'Creating…' : 'Create key'}</button>
      </form>
      <${ErrorBox} error=${create.error} />
      ${issued
        ? html`<div class="once stack" data-test="new-key">
            <strong>Copy the key now: it is shown only this once.</strong>
            <div><code data-test="new-key-value">${issued.key}</code></div>
            <div class="row"><${CopyButton} text=${issued.key} label="Copy key" test="copy-key" /><button type="button" onClick=${() => setIssued(null)} data-test="dismiss-key">Done</button></div>
          </div>`
        : null}
    </div>
    <${ErrorBox} error=${revoke.error} />
    <${ErrorBox} error=${pager.action.error} />
    <${PagedTable} pager=${pager} test="keys-table" head=${['Key id', 'Label', 'Created', 'Revoked', '']} row=${row} loading="Loading keys…" empty="No key yet." />
    ${revoking
      ? html`<${Confirm} title="Revoke this key?" confirmLabel="Revoke" onConfirm=${() => revoke.run(revoking)} onCancel=${() => setRevoking(null)}>
          <p>Key <code>${revoking.key_id}</code>${revoking.label ? ` (${revoking.label})` : ''} stops working at once: the very next request with it is refused. This cannot be undone.</p>
        <//>`
      : null}
  </div>`;
}
