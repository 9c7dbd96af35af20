/**
 * `#/projects/<id>/storage`: buckets — list, create, delete (forced: every object in it, pending
 * rows included, after the bucket's name is typed) — and the chosen bucket's folders and objects
 * (console/pages/storage-objects.ts; docs/storage.md; docs/console.md "Storage").
 */
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useState } from 'preact/hooks';
import type { ProjectClient } from '../../client/index.ts';
import type { ConsoleSession } from '../session.ts';
import { Confirm, ErrorBox, useAction, useLoad } from '../ui.ts';
import { Objects } from './storage-objects.ts';

/** The storage page. */
export function Storage({ project, session }: { project: ProjectClient; session: ConsoleSession }): VNode {
  const buckets = useLoad(() => project.storage.listBuckets({ limit: 1000 }).all(), [project.id]);
  const [selected, setSelected] = useState<string | null>(null);
  const [name, setName] = useState('');
  const [deleting, setDeleting] = useState<string | null>(null);
  const create = useAction(async () => {
    const bucket = await project.storage.createBucket(name.trim());
    setName('');
    await buckets.reload();
    setSelected(bucket.name);
  });
  const remove = useAction(async (bucket: string) => {
    setDeleting(null);
    await project.storage.deleteBucket(bucket, { force: true });
    setSelected(null);
    await buckets.reload();
  });
  const names = buckets.data?.map((b) => b.name) ?? [];
  const current = selected && names.includes(selected) ? selected : (names[0] ?? null);
  return html`<div data-test="page-storage">
    <h1>Storage</h1>
    <div class="panel">
      <form class="row" onSubmit=${(e: Event) => (e.preventDefault(), void create.run())}>
        <input name="bucket_name" placeholder="new-bucket-name" value=${name} onInput=${(e: Event) => setName((e.target as HTMLInputElement).value)} pattern="[a-z0-9][a-z0-9\\-]{1,61}[a-z0-9]" title="3 to 63 lowercase letters, digits and dashes" required />
        <button class="primary" type="submit" disabled=${create.busy} data-test="create-bucket">Create bucket</button>
      </form>
      <${ErrorBox} error=${create.error} />
      <${ErrorBox} error=${buckets.action.error} />
      <${ErrorBox} error=${remove.error} />
      ${buckets.data && buckets.data.length === 0 ? html`<p class="empty">No bucket yet.</p>` : null}
      ${current
        ? html`<div class="row" style=${{ marginTop: '10px' }}>
            <span class="muted">Bucket</span>
            <select name="bucket" value=${current} onChange=${(e: Event) => setSelected((e.target as HTMLSelectElement).value)} data-test="bucket-select">
              ${names.map((b) => html`<option value=${b}>${b}</option>`)}
            </select>
            <button class="danger" disabled=${remove.busy} onClick=${() => setDeleting(current)} data-test="delete-bucket">${remove.busy ? 'Deleting…' : 'Delete bucket'}</button>
          </div>`
        : null}
    </div>
    ${current && !remove.busy ? html`<${Objects} key=${current} project=${project} bucket=${current} session=${session} />` : null}
    ${deleting
      ? html`<${Confirm} title=${`Delete the bucket ${deleting}?`} confirmLabel="Delete bucket" typed=${deleting} onConfirm=${() => remove.run(deleting)} onCancel=${() => setDeleting(null)}>
          <p>Every object in <code>${deleting}</code> is deleted with its bytes, pending uploads included (each deletion gets its receipt), then the bucket. This cannot be undone.</p>
        <//>`
      : null}
  </div>`;
}
