/**
 * `#/projects/<id>/secrets`: function secrets (docs/secrets.md): names and versions listed, values
 * set through a password field and never displayed — the service never answers them.
 */
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useState } from 'preact/hooks';
import type { ProjectClient, SecretMetadata } from '../../client/index.ts';
import { Confirm, ErrorBox, PagedTable, Time, useAction, usePager } from '../ui.ts';

/** The secrets page. */
export function Secrets({ project }: { project: ProjectClient }): VNode {
  const pager = usePager(async (cursor) => {
    const page = await project.secrets.list({ limit: 50, ...(cursor ? { cursor } : {}) }).first();
    return { items: page.secrets, next: page.next_cursor };
  }, [project.id]);
  const [name, setName] = useState('');
  const [value, setValue] = useState('');
  const [saved, setSaved] = useState<SecretMetadata | null>(null);
  const [deleting, setDeleting] = useState<SecretMetadata | null>(null);
  const put = useAction(async () => {
    const meta = await project.secrets.set(name.trim(), value);
    setValue('');
    setName('');
    setSaved(meta);
    await pager.reload();
  });
  const remove = useAction(async (s: SecretMetadata) => {
    setDeleting(null);
    await project.secrets.delete(s.name);
    await pager.reload();
  });
  const row = (s: SecretMetadata) => html`<tr key=${s.name} data-test="secret-row">
    <td class="mono" data-test="secret-name">${s.name}</td>
    <td class="num">${s.version}</td>
    <td class="muted">hidden</td>
    <td><${Time} at=${s.updated_at} /></td>
    <td><button class="danger" disabled=${remove.busy} onClick=${() => setDeleting(s)} data-test="delete-secret">Delete</button></td>
  </tr>`;
  return html`<div data-test="page-secrets">
    <h1>Function secrets</h1>
    <p class="muted">Injected as <code>NAME=value</code> into every later function invocation of the project. Values are encrypted at rest and never shown again.</p>
    <div class="panel">
      <form class="row" onSubmit=${(e: Event) => (e.preventDefault(), void put.run())} autocomplete="off">
        <input name="secret_name" placeholder="NAME" value=${name} onInput=${(e: Event) => setName((e.target as HTMLInputElement).value.toUpperCase())} pattern="[A-Z][A-Z0-9_]{0,63}" title="A capital letter, then capitals, digits or _ (at most 64)" required />
        <input name="secret_value" type="password" placeholder="value" autocomplete="new-password" value=${value} onInput=${(e: Event) => setValue((e.target as HTMLInputElement).value)} maxlength="4096" required />
        <button class="primary" type="submit" disabled=${put.busy} data-test="set-secret">Set secret</button>
      </form>
      <${ErrorBox} error=${put.error} />
      ${saved ? html`<div class="notice" data-test="secret-saved"><code>${saved.name}</code> ${saved.version === 1 ? 'created' : `rotated to version ${saved.version}`}.</div>` : null}
    </div>
    <${ErrorBox} error=${remove.error} />
    <${ErrorBox} error=${pager.action.error} />
    <${PagedTable} pager=${pager} test="secrets-table" head=${['Name', 'Version', 'Value', 'Updated', '']} row=${row} loading="Loading secrets…" empty="No secret yet." />
    ${deleting
      ? html`<${Confirm} title="Delete this secret?" confirmLabel="Delete" onConfirm=${() => remove.run(deleting)} onCancel=${() => setDeleting(null)}>
          <p>Later invocations no longer see <code>${deleting.name}</code>.</p>
        <//>`
      : null}
  </div>`;
}
