/**
 * The storage page's upload panel (docs/console.md "Storage"): files chosen with the file field or
 * dropped on the panel go into the folder being browsed, one after the other, each with its
 * progress bar (console/pages/storage-transfer.ts says how they travel). A resumable upload that
 * failed stays listed with **Resume** and **Cancel**.
 */
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useRef, useState } from 'preact/hooks';
import type { ProjectClient } from '../../client/index.ts';
import type { ConsoleSession } from '../session.ts';
import { ErrorBox, Progress, describeError } from '../ui.ts';
import { sendFile, type Sending, type TransferProgress } from './storage-transfer.ts';

/** One file's upload as listed. */
interface Item {
  id: number;
  key: string;
  progress: TransferProgress;
  state: 'waiting' | 'sending' | 'failed' | 'done';
  error?: unknown;
  sending?: Sending;
}

let nextId = 1;

/** The upload panel of `bucket`, putting files under `prefix`; `onStored` with each stored file's key. */
export function UploadPanel(props: { project: ProjectClient; session: ConsoleSession; bucket: string; prefix: string; onStored: (key: string) => void }): VNode {
  const { project, session, bucket, prefix } = props;
  const file = useRef<HTMLInputElement>(null);
  const [objectKey, setObjectKey] = useState('');
  const [over, setOver] = useState(false);
  const [items, setItems] = useState<Item[]>([]);
  const [error, setError] = useState<unknown>(null);
  const queue = useRef<Promise<void>>(Promise.resolve());
  const update = (id: number, change: Partial<Item>) => setItems((list) => list.map((i) => (i.id === id ? { ...i, ...change } : i)));

  const track = async (item: Item, sending: Sending) => {
    update(item.id, { state: 'sending', sending, error: undefined });
    try {
      await sending.done;
      update(item.id, { state: 'done', sending: undefined });
      props.onStored(item.key);
    } catch (err) {
      update(item.id, { state: 'failed', error: err });
    }
  };

  /** Queues `files`, each under the folder being browsed (a single one may be given another key). */
  const enqueue = (files: File[], keyOf: (f: File) => string) => {
    setError(null);
    for (const f of files) {
      const item: Item = { id: nextId++, key: keyOf(f), progress: { loaded: 0, total: f.size, via: 'put' }, state: 'waiting' };
      setItems((list) => [...list.filter((i) => i.state !== 'done'), item]);
      const target = { bucket, key: item.key, contentType: f.type || 'application/octet-stream' };
      queue.current = queue.current.then(() => track(item, sendFile(project, session, target, f, (progress) => update(item.id, { progress }))));
    }
  };

  const submit = () => {
    const chosen = [...(file.current?.files ?? [])];
    if (chosen.length === 0) return setError(new Error('choose a file to upload, or drop files on the panel'));
    const single = chosen.length === 1 && objectKey.trim() !== '';
    enqueue(chosen, (f) => (single ? prefix + objectKey.trim() : prefix + f.name));
    setObjectKey('');
    if (file.current) file.current.value = '';
  };

  const onDrop = (e: DragEvent) => {
    e.preventDefault();
    setOver(false);
    const files = [...(e.dataTransfer?.files ?? [])];
    if (files.length > 0) enqueue(files, (f) => prefix + f.name);
  };
  const onDragOver = (e: DragEvent) => {
    e.preventDefault();
    if (e.dataTransfer) e.dataTransfer.dropEffect = 'copy';
    setOver(true);
  };

  const busy = items.some((i) => i.state === 'sending' || i.state === 'waiting');
  return html`<div class="panel stack" onDragOver=${onDragOver} onDragLeave=${() => setOver(false)} onDrop=${onDrop} data-test="upload-panel">
    <h2 style=${{ marginTop: 0 }} class="wrap">Upload to <code>${bucket}/${prefix}</code></h2>
    <div class=${`drop${over ? ' over' : ''}`} data-test="drop-zone">Drop files here to upload them into this folder</div>
    <form class="row" onSubmit=${(e: Event) => (e.preventDefault(), submit())}>
      <input type="file" multiple ref=${file} name="file" data-test="upload-file" />
      <input name="object_key" placeholder="name (default: the file's name)" value=${objectKey} onInput=${(e: Event) => setObjectKey((e.target as HTMLInputElement).value)} style=${{ width: '260px' }} />
      <button class="primary" type="submit" disabled=${busy} data-test="upload">Upload</button>
    </form>
    <${ErrorBox} error=${error} />
    ${items.map((i) => html`<${UploadRow} key=${i.id} item=${i} onResume=${() => i.sending?.resume && void track(i, i.sending.resume())} onDismiss=${() => (i.sending?.abort(), setItems((l) => l.filter((x) => x.id !== i.id)))} />`)}
  </div>`;
}

function UploadRow({ item, onResume, onDismiss }: { item: Item; onResume: () => void; onDismiss: () => void }): VNode {
  const { progress } = item;
  const how = progress.via === 'resumable' ? 'resumable upload' : 'upload';
  const label =
    item.state === 'done'
      ? `Stored ${item.key}`
      : item.state === 'failed'
        ? `Stopped: ${item.key}`
        : progress.retrying
          ? `Network error: retrying ${item.key}`
          : `Uploading ${item.key}`;
  return html`<div data-test="upload-item" data-state=${item.state} data-via=${progress.via}>
    <${Progress} loaded=${progress.loaded} total=${progress.total} label=${`${label} (${how})`} />
    ${item.state === 'failed'
      ? html`<div class="row">
          <${ErrorBox} error=${item.error} />
          ${item.sending?.resume && describeError(item.error).code !== 'aborted' ? html`<button class="primary" onClick=${onResume} data-test="upload-resume">Resume</button>` : null}
          <button onClick=${onDismiss} data-test="upload-dismiss">Dismiss</button>
        </div>`
      : null}
  </div>`;
}
