/**
 * `#/projects/<id>/storage`: buckets, their objects page by page, upload with a progress bar,
 * download, delete (docs/storage.md; docs/console.md "Storage"). An upload takes an upload ticket
 * from the SDK and sends the file with XMLHttpRequest, the one browser API that reports upload
 * progress (fetch reports none, and a streamed fetch body needs HTTP/2).
 */
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useRef, useState } from 'preact/hooks';
import { SvcError, type ObjectRow, type ProjectClient } from '../../client/index.ts';
import type { ConsoleSession } from '../session.ts';
import { Confirm, ErrorBox, PagedTable, Progress, Time, formatBytes, useAction, useLoad, usePager } from '../ui.ts';

/** The storage page. */
export function Storage({ project, session }: { project: ProjectClient; session: ConsoleSession }): VNode {
  const buckets = useLoad(() => project.storage.listBuckets({ limit: 1000 }).all(), [project.id]);
  const [selected, setSelected] = useState<string | null>(null);
  const [name, setName] = useState('');
  const create = useAction(async () => {
    const bucket = await project.storage.createBucket(name.trim());
    setName('');
    await buckets.reload();
    setSelected(bucket.name);
  });
  const current = selected ?? buckets.data?.[0]?.name ?? null;
  return html`<div data-test="page-storage">
    <h1>Storage</h1>
    <div class="panel">
      <form class="row" onSubmit=${(e: Event) => (e.preventDefault(), void create.run())}>
        <input name="bucket_name" placeholder="new-bucket-name" value=${name} onInput=${(e: Event) => setName((e.target as HTMLInputElement).value)} pattern="[a-z0-9][a-z0-9\\-]{1,61}[a-z0-9]" title="3 to 63 lowercase letters, digits and dashes" required />
        <button class="primary" type="submit" disabled=${create.busy} data-test="create-bucket">Create bucket</button>
      </form>
      <${ErrorBox} error=${create.error} />
      <${ErrorBox} error=${buckets.action.error} />
      ${buckets.data && buckets.data.length === 0 ? html`<p class="empty">No bucket yet.</p>` : null}
      ${buckets.data && buckets.data.length > 0
        ? html`<div class="row" style=${{ marginTop: '10px' }}>
            <span class="muted">Bucket</span>
            <select name="bucket" value=${current ?? ''} onChange=${(e: Event) => setSelected((e.target as HTMLSelectElement).value)} data-test="bucket-select">
              ${buckets.data.map((b) => html`<option value=${b.name}>${b.name}</option>`)}
            </select>
          </div>`
        : null}
    </div>
    ${current ? html`<${Objects} key=${current} project=${project} bucket=${current} session=${session} />` : null}
  </div>`;
}

function Objects({ project, bucket, session }: { project: ProjectClient; bucket: string; session: ConsoleSession }): VNode {
  const pager = usePager(async (cursor) => {
    const page = await project.storage.list(bucket, { limit: 20, ...(cursor ? { cursor } : {}) }).first();
    return { items: page.objects, next: page.next_cursor };
  }, [bucket]);
  const file = useRef<HTMLInputElement>(null);
  const [objectKey, setObjectKey] = useState('');
  const [transfer, setTransfer] = useState<{ label: string; loaded: number; total: number | null } | null>(null);
  const [downloaded, setDownloaded] = useState<{ key: string; size: number; sha256: string; matches: boolean | null } | null>(null);
  const [deleting, setDeleting] = useState<ObjectRow | null>(null);

  const upload = useAction(async () => {
    const chosen = file.current?.files?.[0];
    if (!chosen) throw new Error('choose a file to upload');
    const key = objectKey.trim() || chosen.name;
    const contentType = chosen.type || 'application/octet-stream';
    setTransfer({ label: `Uploading ${key}`, loaded: 0, total: chosen.size });
    try {
      await uploadFile(project, session, { bucket, key, contentType }, chosen, (loaded) => setTransfer({ label: `Uploading ${key}`, loaded, total: chosen.size }));
    } finally {
      setTransfer(null);
    }
    setObjectKey('');
    if (file.current) file.current.value = '';
    await pager.reload();
  });

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
    await project.storage.delete(bucket, row.key);
    await pager.reload();
  });

  const row = (o: ObjectRow) => html`<tr key=${o.id} data-test="object-row">
    <td class="mono" data-test="object-key">${o.key}</td>
    <td class="num">${formatBytes(o.size)}</td>
    <td class="mono">${o.content_type}</td>
    <td>${o.state}</td>
    <td><${Time} at=${o.updated_at} /></td>
    <td><div class="row">
      <button disabled=${o.state !== 'stored' || download.busy} onClick=${() => download.run(o)} data-test="download">Download</button>
      <button class="danger" disabled=${remove.busy} onClick=${() => setDeleting(o)} data-test="delete-object">Delete</button>
    </div></td>
  </tr>`;
  return html`<div data-test="objects">
    <div class="panel">
      <h2 style=${{ marginTop: 0 }}>Upload to ${bucket}</h2>
      <form class="row" onSubmit=${(e: Event) => (e.preventDefault(), void upload.run())}>
        <input type="file" ref=${file} name="file" data-test="upload-file" />
        <input name="object_key" placeholder="key (default: the file's name)" value=${objectKey} onInput=${(e: Event) => setObjectKey((e.target as HTMLInputElement).value)} style=${{ width: '260px' }} />
        <button class="primary" type="submit" disabled=${upload.busy || download.busy} data-test="upload">Upload</button>
      </form>
      ${transfer ? html`<${Progress} ...${transfer} />` : null}
      <${ErrorBox} error=${upload.error} />
      <${ErrorBox} error=${download.error} />
      <${ErrorBox} error=${remove.error} />
      ${downloaded ? html`<${DownloadedNotice} ...${downloaded} />` : null}
    </div>
    <${ErrorBox} error=${pager.action.error} />
    <${PagedTable} pager=${pager} test="objects-table" head=${['Key', 'Size', 'Type', 'State', 'Updated', '']} row=${row} loading="Loading objects…" empty="This bucket is empty." />
    ${deleting
      ? html`<${Confirm} title="Delete this object?" confirmLabel="Delete" onConfirm=${() => remove.run(deleting)} onCancel=${() => setDeleting(null)}>
          <p><code>${bucket}/${deleting.key}</code> (${formatBytes(deleting.size)}) and its bytes are removed. This cannot be undone.</p>
        <//>`
      : null}
  </div>`;
}

/** What a finished download showed: its size and SHA-256, and whether that is the stored checksum (fs only). */
function DownloadedNotice(d: { key: string; size: number; sha256: string; matches: boolean | null }): VNode {
  return html`<div class="notice" data-test="downloaded">
    Downloaded <code>${d.key}</code>: ${formatBytes(d.size)}, SHA-256 <code data-test="downloaded-sha256">${d.sha256}</code>
    ${d.matches === null ? null : d.matches ? html` — matches the stored checksum` : html` — <strong>differs from the stored checksum</strong>`}
  </div>`;
}

/** Sends a file with an upload ticket, reporting bytes sent. */
async function uploadFile(
  project: ProjectClient,
  session: ConsoleSession,
  target: { bucket: string; key: string; contentType: string },
  file: Blob,
  onProgress: (loaded: number) => void,
): Promise<void> {
  const ticket = await project.storage.uploadTicket({ bucket: target.bucket, key: target.key, content_type: target.contentType });
  await putWithProgress(ticket.upload_url, file, { ...ticket.headers, 'content-type': target.contentType, authorization: `Bearer ${session.token}` }, onProgress);
}

/** An object's bytes read whole into a Blob, reporting bytes read. */
async function downloadObject(project: ProjectClient, bucket: string, row: ObjectRow, onProgress: (loaded: number, total: number) => void): Promise<Blob> {
  const answer = await project.storage.download(bucket, row.key);
  const chunks: Uint8Array<ArrayBuffer>[] = [];
  let loaded = 0;
  const reader = answer.body!.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value as Uint8Array<ArrayBuffer>);
    loaded += value.byteLength;
    onProgress(loaded, answer.size ?? row.size);
  }
  return new Blob(chunks, { type: answer.contentType ?? row.content_type });
}

/** Hands a Blob to the browser as a download named `name`. */
function save(blob: Blob, name: string): void {
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  a.click();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

/** PUTs `body` to `path` on this origin, reporting bytes sent; an error answer becomes a SvcError. */
function putWithProgress(path: string, body: Blob, headers: Record<string, string>, onProgress: (loaded: number) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open('PUT', path);
    for (const [name, value] of Object.entries(headers)) {
      if (name.toLowerCase() !== 'content-length') xhr.setRequestHeader(name, value);
    }
    xhr.upload.onprogress = (e) => onProgress(e.loaded);
    xhr.onerror = () => reject(new TypeError('the upload did not reach the service'));
    xhr.onabort = () => reject(new DOMException('cancelled', 'AbortError'));
    xhr.onload = () => {
      if (xhr.status >= 200 && xhr.status < 300) return resolve();
      let code = 'internal';
      let message = `HTTP ${xhr.status}`;
      try {
        const e = (JSON.parse(xhr.responseText) as { error: { code: string; message: string } }).error;
        code = e.code;
        message = e.message;
      } catch {
        // not an envelope: keep the status
      }
      reject(new SvcError({ status: xhr.status, code: code as never, message, requestId: xhr.getResponseHeader('x-request-id') }));
    };
    xhr.send(body);
  });
}

function hex(buf: ArrayBuffer): string {
  return [...new Uint8Array(buf)].map((b) => b.toString(16).padStart(2, '0')).join('');
}
