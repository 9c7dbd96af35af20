/**
 * Renaming and deleting a project (docs/console.md "Projects"), used by the projects list and the
 * overview: a rename form (`PATCH /v0/projects/{id}` with `name`) and a deletion that asks the user
 * to type the project's name first (`DELETE /v0/projects/{id}` removes its keys, objects, snapshots,
 * secrets, functions and data).
 */
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useState } from 'preact/hooks';
import type { Project, ProjectClient } from '../client/index.ts';
import { Busy, Confirm, ErrorBox, useAction } from './ui.ts';

/** A one-line form renaming `record`; `onRenamed` gets the project as answered. */
export function RenameForm({ project, record, onRenamed, onCancel }: { project: ProjectClient; record: Project; onRenamed: (p: Project) => void; onCancel?: () => void }): VNode {
  const [name, setName] = useState(record.name);
  const rename = useAction(async () => {
    const next = await project.rename(name.trim());
    onRenamed(next);
  });
  return html`<div>
    <form class="row" onSubmit=${(e: Event) => (e.preventDefault(), void rename.run())} data-test="rename-form">
      <input name="rename" aria-label="New name" value=${name} onInput=${(e: Event) => setName((e.target as HTMLInputElement).value)} maxlength="64" required data-test="rename-input" />
      <button class="primary" type="submit" disabled=${rename.busy || name.trim() === '' || name.trim() === record.name} data-test="rename-save">${rename.busy ? 'Renaming…' : 'Rename'}</button>
      ${onCancel ? html`<button type="button" onClick=${onCancel} data-test="rename-cancel">Cancel</button>` : null}
    </form>
    <${ErrorBox} error=${rename.error} />
  </div>`;
}

/**
 * The project's deletion: a button, then a dialog that names what goes and takes effect only once
 * the project's name has been typed. `onDeleted` runs after the service answered.
 */
export function DeleteProject({ project, record, onDeleted }: { project: ProjectClient; record: Project; onDeleted: () => void }): VNode {
  const [asking, setAsking] = useState(false);
  const remove = useAction(async () => {
    setAsking(false);
    await project.delete();
    onDeleted();
  });
  return html`<div>
    <div class="row">
      <button class="danger" disabled=${remove.busy} onClick=${() => setAsking(true)} data-test="delete-project">Delete project</button>
      ${remove.busy ? html`<${Busy}>Deleting ${record.name}…<//>` : null}
    </div>
    <${ErrorBox} error=${remove.error} />
    ${asking
      ? html`<${Confirm} title=${`Delete ${record.name}?`} confirmLabel="Delete project" typed=${record.name} onConfirm=${() => remove.run()} onCancel=${() => setAsking(false)}>
          <p>The engine is stopped and the project <code>${record.id}</code> is removed with its data, keys, objects, snapshots, secrets and functions. This cannot be undone.</p>
        <//>`
      : null}
  </div>`;
}
