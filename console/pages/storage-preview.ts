/**
 * A stored object's preview on the storage page (docs/console.md "Storage"): an image (up to
 * `IMAGE_MAX` bytes, read whole and shown as a `data:` URL, the one image source besides the origin
 * the console's Content-Security-Policy allows) or the first `TEXT_MAX` bytes of a text (a range
 * request). Anything else says what it is and offers the download.
 */
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import type { ObjectRow, ProjectClient } from '../../client/index.ts';
import { Busy, ErrorBox, formatBytes, useLoad } from '../ui.ts';

const IMAGE_MAX = 10 * 1024 * 1024;
const TEXT_MAX = 64 * 1024;

const IMAGE_TYPES = /^image\/(png|jpeg|gif|webp|avif|bmp|x-icon|vnd\.microsoft\.icon)$/;
const TEXT_TYPES = /^(text\/|application\/(json|xml|javascript|x-ndjson|yaml|x-yaml|toml|sql|csv)\b|[^;]*\+(json|xml)\b)/;
const TEXT_NAMES = /\.(txt|md|markdown|json|ndjson|csv|tsv|log|xml|ya?ml|toml|ini|conf|sql|js|mjs|ts|css|html?|sh|py|rs|go)$/i;
const IMAGE_NAMES = /\.(png|jpe?g|gif|webp|avif|bmp|ico)$/i;

/** What a preview shows for `row`: `image`, `text`, or null when the type is neither. */
export function previewKind(row: ObjectRow): 'image' | 'text' | null {
  const type = row.content_type.toLowerCase();
  const generic = type === 'application/octet-stream' || type === '';
  if (IMAGE_TYPES.test(type) || (generic && IMAGE_NAMES.test(row.key))) return 'image';
  if (TEXT_TYPES.test(type) || (generic && TEXT_NAMES.test(row.key))) return 'text';
  return null;
}

type Shown = { kind: 'image'; src: string } | { kind: 'text'; text: string; cut: boolean } | { kind: 'none'; why: string };

/** The preview panel of `row`. */
export function Preview({ project, bucket, row, onClose }: { project: ProjectClient; bucket: string; row: ObjectRow; onClose: () => void }): VNode {
  const shown = useLoad(() => load(project, bucket, row), [bucket, row.key, row.etag]);
  const s = shown.data;
  return html`<div class="panel preview" data-test="preview">
    <div class="row" style=${{ justifyContent: 'space-between' }}>
      <h2 style=${{ margin: 0 }} class="wrap"><code>${row.key}</code></h2>
      <button type="button" onClick=${onClose} data-test="preview-close">Close</button>
    </div>
    <p class="muted">${row.content_type} · ${formatBytes(row.size)}</p>
    ${shown.action.busy ? html`<${Busy}>Reading the object…<//>` : null}
    <${ErrorBox} error=${shown.action.error} />
    ${s?.kind === 'image' ? html`<img src=${s.src} alt=${row.key} data-test="preview-image" />` : null}
    ${s?.kind === 'text'
      ? html`<pre data-test="preview-text">${s.text}</pre>${s.cut ? html`<p class="muted">The first ${formatBytes(TEXT_MAX)} of ${formatBytes(row.size)}.</p>` : null}`
      : null}
    ${s?.kind === 'none' ? html`<p class="muted" data-test="preview-none">${s.why}</p>` : null}
  </div>`;
}

async function load(project: ProjectClient, bucket: string, row: ObjectRow): Promise<Shown> {
  const kind = previewKind(row);
  if (row.state !== 'stored') return { kind: 'none', why: 'This upload never finished: the row holds no bytes.' };
  if (kind === 'image') {
    if (row.size > IMAGE_MAX) return { kind: 'none', why: `Images over ${formatBytes(IMAGE_MAX)} are not previewed: download it instead.` };
    const blob = await read(project, bucket, row.key);
    return { kind: 'image', src: await dataUrl(new Blob([blob], { type: row.content_type.startsWith('image/') ? row.content_type : imageTypeOf(row.key) })) };
  }
  if (kind === 'text') {
    if (row.size === 0) return { kind: 'text', text: '', cut: false };
    const cut = row.size > TEXT_MAX;
    const blob = await read(project, bucket, row.key, cut ? `bytes=0-${TEXT_MAX - 1}` : undefined);
    return { kind: 'text', text: new TextDecoder().decode(await blob.arrayBuffer()), cut };
  }
  return { kind: 'none', why: `No preview for ${row.content_type}: download it instead.` };
}

async function read(project: ProjectClient, bucket: string, key: string, range?: string): Promise<Blob> {
  const answer = await project.storage.download(bucket, key, range ? { range } : {});
  return new Response(answer.body).blob();
}

function imageTypeOf(key: string): string {
  const ext = key.split('.').pop()!.toLowerCase();
  return ext === 'jpg' ? 'image/jpeg' : ext === 'ico' ? 'image/x-icon' : `image/${ext}`;
}

function dataUrl(blob: Blob): Promise<string> {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result as string);
    reader.onerror = () => reject(reader.error ?? new Error('the image could not be read'));
    reader.readAsDataURL(blob);
  });
}
