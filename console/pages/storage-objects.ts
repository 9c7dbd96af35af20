/**
 * One bucket on the storage page (docs/console.md "Storage"): its folders — the listing with
 * delimiter `/` (docs/storage.md "Listing by prefix and delimiter"), breadcrumbs back up — its
 * objects with download, preview and delete, its pending rows (an upload that never finished) with
 * a remove action, and the upload panel for the folder being browsed.
 */
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useState } from 'preact/hooks';
import type { ObjectRow, ProjectClient } from '../../client/index.ts';
import type { ConsoleSession } from '../session.ts';
import { Confirm, ErrorBox, PagedTable, Progress, Time, formatBytes, useAction, usePager } from '../ui.ts';
import { Preview, previewKind } from './storage-preview.ts';
import { downloadObject, hex, save } from './storage-transfer.ts';
import { UploadPanel } from './storage-upload.ts';

/** A line of the listing: a folder (common prefix) or an object. */
type Entry = { kind: 'folder'; prefix: string } | { kind: 'object'; row: ObjectRow };

const PAGE = 50;

/** The objects of `bucket`, folder by folder. */
export function Objects({ project, bucket, session }: { project: ProjectClient; bucket: string; session: ConsoleSession }): VNode {
  const [prefix, setPrefix] = useState('');
  const pager = usePager<Entry>(async (cursor) => {
    const page = await project.storage.list(bucket, { prefix, delimiter: '/', limit: PAGE, ...(cursor ? { cursor } : {}) }).first();
    const folders: Entry[] = page.common_prefixes.map((p) => ({ kind: 'folder', prefix: p }));
    return { items: [...folders, ...page.objects.map((row): Entry => ({ kind: 'object', row }))], next: page.next_cursor };
  }, [bucket, prefix]);
  const [transfer, setTransfer] = useState<{ label: string; loaded: number; total: number | null } | null>(null);
  const [downloaded, setDownloaded] = useState<{ key: string; size: number; sha256: string; matches: boolean | null } | null>(null);
  const [deleting, setDeleting] = useState<ObjectRow | null>(null);
  const [previewing, setPreviewing] = useState<ObjectRow | null>(null);

  const download = useAction(async (row: ObjectRow) => {
    setDownloaded(null);
    setTransfer({ label: `Downloading ${row.key}`, loaded: 0, total: row.size });
    try {
      const blob = await downloadObject(project, bucket, row, (loaded, total) => setTransfer({ label: `Downloading ${row.key}`, loaded, total }));
      const sha256 = hex(await crypto.subtle.digest('SHA-256', await blob.arrayBuffer()));
      setDownloaded({ key: row.key, size: blob.size, sha256, matches: row.backend === 'fs' ? sha256 === row.etag : null });
      save(blob, row.key.split('/').pop() || 'download');
    } finally {
      setTransfer(null);
    }
  });

  const remove = useAction(async (row: ObjectRow) => {
    setDeleting(null);
    if (previewing?.key === row.key) setPreviewing(null);
    await project.storage.delete(bucket, row.key);
    await pager.reload();
  });

  /** Browses folder `p`; the folder already shown is read again. */
  const open = (p: string) => {
    setPreviewing(null);
    if (p === prefix) void pager.reload();
    else setPrefix(p);
  };
  /** After an upload: the listing again, in the folder of a single named file put elsewhere. */
  const stored = (key: string) => {
    const folder = key.slice(0, key.lastIndexOf('/') + 1);
    if (folder !== prefix) open(folder);
    else void pager.reload();
  };

  const row = (e: Entry) => html`<${EntryRow} key=${e.kind === 'folder' ? `f:${e.prefix}` : e.row.id} entry=${e} prefix=${prefix} onOpen=${open} onPreview=${setPreviewing} onDownload=${download.run} onDelete=${setDeleting} busy=${download.busy || remove.busy} />`;

  return html`<div data-test="objects">
    <${UploadPanel} project=${project} session=${session} bucket=${bucket} prefix=${prefix} onStored=${stored} />
    ${transfer ? html`<${Progress} ...${transfer} />` : null}
    <${ErrorBox} error=${download.error} />
    <${ErrorBox} error=${remove.error} />
    ${downloaded ? html`<${DownloadedNotice} ...${downloaded} />` : null}
    ${previewing ? html`<${Preview} key=${previewing.key} project=${project} bucket=${bucket} row=${previewing} onClose=${() => setPreviewing(null)} />` : null}
    <${Crumbs} bucket=${bucket} prefix=${prefix} onOpen=${open} />
    <${ErrorBox} error=${pager.action.error} />
    <${PagedTable}
      pager=${pager}
      test="objects-table"
      head=${['Name', 'Size', 'Type', 'State', 'Updated', '']}
      row=${row}
      loading="Loading objects…"
      empty=${prefix ? 'Nothing in this folder yet: a folder exists as long as an object is in it.' : 'This bucket is empty.'}
    />
    ${deleting
      ? html`<${Confirm} title=${deleting.state === 'stored' ? 'Delete this object?' : 'Remove this pending row?'} confirmLabel=${deleting.state === 'stored' ? 'Delete' : 'Remove'} onConfirm=${() => remove.run(deleting)} onCancel=${() => setDeleting(null)}>
          ${deleting.state === 'stored'
            ? html`<p><code class="wrap">${bucket}/${deleting.key}</code> (${formatBytes(deleting.size)}) and its bytes are removed. This cannot be undone.</p>`
            : html`<p><code class="wrap">${bucket}/${deleting.key}</code> is an upload that never finished (a ticket with no bytes). Its row is removed; it keeps the bucket from being deleted until then.</p>`}
        <//>`
      : null}
  </div>`;
}

/** What a finished download showed: its size and SHA-256, and whether that is the stored checksum (fs only). */
function DownloadedNotice(d: { key: string; size: number; sha256: string; matches: boolean | null }): VNode {
  return html`<div class="notice wrap" data-test="downloaded">
    Downloaded <code>${d.key}</code>: ${formatBytes(d.size)}, SHA-256 <code data-test="downloaded-sha256">${d.sha256}</code>
    ${d.matches === null ? null : d.matches ? html` — matches the stored checksum` : html` — <strong>differs from the stored checksum</strong>`}
  </div>`;
}

/** One line of the listing: a folder to open, or an object with its actions (a pending row: Remove). */
function EntryRow(props: {
  entry: Entry;
  prefix: string;
  busy: boolean;
  onOpen: (prefix: string) => void;
  onPreview: (row: ObjectRow) => void;
  onDownload: (row: ObjectRow) => void;
  onDelete: (row: ObjectRow) => void;
}): VNode {
  const { entry: e, prefix } = props;
  if (e.kind === 'folder') {
    return html`<tr data-test="folder-row">
      <td colspan="5"><button class="link folder" onClick=${() => props.onOpen(e.prefix)} data-test="folder">${e.prefix.slice(prefix.length)}</button></td>
      <td></td>
    </tr>`;
  }
  const o = e.row;
  const name = o.key.slice(prefix.length);
  const pending = o.state !== 'stored';
  return html`<tr data-test=${pending ? 'pending-row' : 'object-row'}>
    <td class="mono wrap" data-test="object-key">${!pending && previewKind(o) ? html`<button class="link mono" onClick=${() => props.onPreview(o)} data-test="preview-open">${name}</button>` : name}</td>
    <td class="num">${formatBytes(o.size)}</td>
    <td class="mono wrap">${o.content_type}</td>
    <td>${pending ? html`<span class="badge pending" title="an upload ticket was issued and no bytes arrived">pending</span>` : o.state}</td>
    <td><${Time} at=${o.updated_at} /></td>
    <td><div class="row">
      ${pending ? null : html`<button disabled=${props.busy} onClick=${() => props.onDownload(o)} data-test="download">Download</button>`}
      <button class="danger" disabled=${props.busy} onClick=${() => props.onDelete(o)} data-test=${pending ? 'remove-pending' : 'delete-object'}>${pending ? 'Remove' : 'Delete'}</button>
    </div></td>
  </tr>`;
}

/** Where the listing is (the bucket, then each folder, each a way back up) and a field to open a folder by name. */
function Crumbs({ bucket, prefix, onOpen }: { bucket: string; prefix: string; onOpen: (prefix: string) => void }): VNode {
  const [folderName, setFolderName] = useState('');
  const crumbs = prefix.split('/').slice(0, -1);
  const openNamed = () => {
    const name = folderName.trim().replace(/\/+$/, '');
    if (!name) return;
    onOpen(`${prefix}${name}/`);
    setFolderName('');
  };
  return html`<div class="row" style=${{ justifyContent: 'space-between', margin: '8px 0' }}>
    <nav class="crumbs" aria-label="Folder" data-test="crumbs">
      <button class="link" onClick=${() => onOpen('')} data-test="crumb">${bucket}</button>
      ${crumbs.map((c, i) => html`<span>/</span><button class="link" onClick=${() => onOpen(`${crumbs.slice(0, i + 1).join('/')}/`)} data-test="crumb">${c}</button>`)}
      <span>/</span>
    </nav>
    <form class="row" onSubmit=${(e: Event) => (e.preventDefault(), openNamed())}>
      <input name="folder_name" placeholder="open or start a folder" value=${folderName} onInput=${(e: Event) => setFolderName((e.target as HTMLInputElement).value)} style=${{ width: '180px' }} />
      <button type="submit" data-test="folder-open">Open</button>
    </form>
  </div>`;
}
