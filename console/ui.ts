/**
 * Building blocks every page uses (docs/console.md "Pages"): the error box (every error shows its
 * code and message, and the request id to quote), busy indicators, a copy button, a confirmation
 * dialog, an async-action hook, and formatting.
 */
import { html } from 'htm/preact';
import { Fragment, type ComponentChildren, type VNode } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { RealtimeOverflowError, SvcError } from '../client/index.ts';

/** Called when the service says the session no longer stands (set by the app). */
let onSessionEnded: (() => void) | null = null;

/** Registers what happens when a call answers 401 with the session (sign-out). */
export function setSessionEndedHandler(handler: () => void): void {
  onSessionEnded = handler;
}

/** Code, message and request id of anything thrown. */
export function describeError(err: unknown): { code: string; message: string; requestId: string | null; status: number | null } {
  if (err instanceof SvcError) return { code: err.code, message: err.message, requestId: err.requestId, status: err.status };
  if (err instanceof RealtimeOverflowError) return { code: 'overflow', message: err.message, requestId: null, status: null };
  if (err instanceof DOMException && err.name === 'AbortError') return { code: 'aborted', message: 'cancelled', requestId: null, status: null };
  if (err instanceof TypeError) return { code: 'network_error', message: `the service could not be reached (${err.message})`, requestId: null, status: null };
  return { code: 'client_error', message: err instanceof Error ? err.message : String(err), requestId: null, status: null };
}

/** An error, as a box with its code, message and request id; nothing for no error. */
export function ErrorBox({ error }: { error: unknown }): VNode | null {
  if (error === null || error === undefined) return null;
  const e = describeError(error);
  return html`<div class="error" role="alert" data-test="error">
    <code data-test="error-code">${e.code}</code><span data-test="error-message">${e.message}</span>
    ${e.requestId ? html`<span class="rid">request ${e.requestId}${e.status ? ` · HTTP ${e.status}` : ''}</span>` : null}
  </div>`;
}

/** A spinner with a label, for work in progress. */
export function Busy({ children }: { children?: ComponentChildren }): VNode {
  return html`<span class="busy" data-test="busy">${children ?? 'Working…'}</span>`;
}

/** Progress of a transfer: a bar and the bytes so far. */
export function Progress({ loaded, total, label }: { loaded: number; total: number | null; label: string }): VNode {
  return html`<div class="row" data-test="progress">
    <span>${label}</span>
    <progress max=${total ?? undefined} value=${total === null ? undefined : loaded}></progress>
    <span class="muted">${formatBytes(loaded)}${total !== null ? ` of ${formatBytes(total)}` : ''}</span>
  </div>`;
}

/** Copies `text` to the clipboard; says so for a moment. */
export function CopyButton({ text, label = 'Copy', test }: { text: string; label?: string; test?: string }): VNode {
  const [done, setDone] = useState<'copied' | 'failed' | null>(null);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(text);
      setDone('copied');
    } catch {
      setDone('failed');
    }
    setTimeout(() => setDone(null), 1500);
  };
  return html`<button type="button" onClick=${copy} data-test=${test ?? 'copy'}>${done === 'copied' ? 'Copied' : done === 'failed' ? 'Select and copy' : label}</button>`;
}

/**
 * A confirmation dialog: `onConfirm` runs only after the second, explicit click; with `typed`, only
 * once the user has typed that text (a project's or a bucket's name) into the dialog.
 */
export function Confirm(props: {
  title: string;
  children?: ComponentChildren;
  confirmLabel: string;
  onConfirm: () => void;
  onCancel: () => void;
  typed?: string;
}): VNode {
  const ref = useRef<HTMLButtonElement>(null);
  const [typed, setTyped] = useState('');
  const ready = props.typed === undefined || typed === props.typed;
  useEffect(() => ref.current?.focus(), []);
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => e.key === 'Escape' && props.onCancel();
    addEventListener('keydown', onKey);
    return () => removeEventListener('keydown', onKey);
  }, [props.onCancel]);
  return html`<div class="modal-back" data-test="confirm-dialog">
    <div class="modal" role="dialog" aria-modal="true">
      <h2>${props.title}</h2>
      <div class="stack">${props.children}</div>
      ${props.typed === undefined
        ? null
        : html`<label style=${{ marginTop: '12px' }}>Type <code>${props.typed}</code> to confirm
            <input name="confirm_text" autocomplete="off" value=${typed} onInput=${(e: Event) => setTyped((e.target as HTMLInputElement).value)} data-test="confirm-text" />
          </label>`}
      <div class="row" style=${{ marginTop: '16px', justifyContent: 'flex-end' }}>
        <button type="button" ref=${ref} onClick=${props.onCancel} data-test="confirm-cancel">Cancel</button>
        <button type="button" class="danger solid" disabled=${!ready} onClick=${() => ready && props.onConfirm()} data-test="confirm-ok">${props.confirmLabel}</button>
      </div>
    </div>
  </div>`;
}

/** State of one async action: run it, see whether it is busy, and its error. */
export interface Action<A extends unknown[], R> {
  run: (...args: A) => Promise<R | undefined>;
  busy: boolean;
  error: unknown;
  clear: () => void;
}

/**
 * Wraps an async function: one run at a time, `busy` while it runs, its error kept for the page to
 * show. A 401 answer to a call made with the session ends the tab's session (it expired or was
 * signed out elsewhere); `sessionCall: false` for calls made with a project key.
 */
export function useAction<A extends unknown[], R>(fn: (...args: A) => Promise<R>, options: { sessionCall?: boolean } = {}): Action<A, R> {
  const sessionCall = options.sessionCall ?? true;
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const fnRef = useRef(fn);
  fnRef.current = fn;
  const running = useRef(false);
  const run = useCallback(async (...args: A) => {
    if (running.current) return undefined;
    running.current = true;
    setBusy(true);
    setError(null);
    try {
      return await fnRef.current(...args);
    } catch (err) {
      if (sessionCall && err instanceof SvcError && err.status === 401 && err.code === 'authentication_required') {
        onSessionEnded?.();
      }
      setError(err);
      return undefined;
    } finally {
      running.current = false;
      setBusy(false);
    }
  }, []);
  return { run, busy, error, clear: () => setError(null) };
}

/** Runs `load` when the page opens (and when `deps` change); answers its state and a reload. */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[]): { data: T | undefined; action: Action<[], T>; reload: () => Promise<T | undefined> } {
  const [data, setData] = useState<T | undefined>(undefined);
  const action = useAction(async () => {
    const value = await load();
    setData(value);
    return value;
  });
  useEffect(() => {
    void action.run();
  }, deps);
  return { data, action, reload: action.run };
}

/** `1.5 MiB`. */
export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`;
}

/** A timestamp in the reader's locale, with the RFC 3339 original as its title. */
export function Time({ at }: { at: string | null | undefined }): VNode {
  if (!at) return html`<span class="muted">—</span>`;
  return html`<time datetime=${at} title=${at}>${new Date(at).toLocaleString()}</time>`;
}

/** A project state as a coloured badge. */
export function StateBadge({ state }: { state: string }): VNode {
  return html`<span class=${`badge ${state}`} data-test="state">${state}</span>`;
}

/**
 * Any value as labelled fields (docs/console.md "Pages"): an object's members one per line, nested
 * objects indented under their name, arrays by index; scalars as they are.
 */
export function Fields({ value, test }: { value: unknown; test?: string }): VNode {
  if (value === null || typeof value !== 'object') return html`<span class="mono">${scalar(value)}</span>`;
  // A list of plain values reads best on one line.
  if (Array.isArray(value) && value.length > 0 && value.every((v) => v === null || typeof v !== 'object')) {
    return html`<span class="mono">${value.map(scalar).join(', ')}</span>`;
  }
  const entries = Array.isArray(value) ? value.map((v, i) => [String(i), v] as const) : Object.entries(value as Record<string, unknown>);
  if (entries.length === 0) return html`<span class="muted">${Array.isArray(value) ? 'none' : '—'}</span>`;
  return html`<dl class="fields" data-test=${test}>
    ${entries.map(
      ([k, v]) => html`<${Fragment} key=${k}>
        <dt>${k.replace(/_/g, ' ')}</dt>
        <dd data-field=${k}>${v !== null && typeof v === 'object' ? html`<${Fields} value=${v} />` : html`<span class="mono">${scalar(v)}</span>`}</dd>
      <//>`,
    )}
  </dl>`;
}

function scalar(v: unknown): string {
  if (v === null || v === undefined) return '—';
  if (typeof v === 'boolean') return v ? 'yes' : 'no';
  return String(v);
}

/** JSON of any value, indented. */
export function Json({ value }: { value: unknown }): VNode {
  return html`<pre>${JSON.stringify(value, null, 2)}</pre>`;
}

/** One page of a list: its items and the cursor of the next. */
export interface ListPage<T> {
  items: T[];
  next: string | null;
}

/**
 * A list read page by page (docs/api.md "Lists"): the current page, and moving forward by its
 * `next_cursor` or back through the cursors already seen.
 */
export function usePager<T>(load: (cursor: string | undefined) => Promise<ListPage<T>>, deps: unknown[]) {
  const [stack, setStack] = useState<(string | undefined)[]>([undefined]);
  const cursor = stack[stack.length - 1];
  const { data, action, reload } = useLoad(() => load(cursor), [...deps, cursor]);
  return {
    items: data?.items,
    action,
    reload,
    page: stack.length,
    hasPrev: stack.length > 1,
    hasNext: !!data?.next,
    prev: () => setStack((s) => (s.length > 1 ? s.slice(0, -1) : s)),
    next: () => {
      const n = data?.next;
      if (n) setStack((s) => [...s, n]);
    },
  };
}

/** What `usePager` answers. */
export type Paged<T> = ReturnType<typeof usePager<T>>;

/** Previous / next buttons of a paged list. */
export function Pager({ pager }: { pager: Paged<any> }): VNode | null {
  if (!pager.hasPrev && !pager.hasNext) return null;
  return html`<div class="row" style=${{ marginTop: '8px' }}>
    <button type="button" disabled=${!pager.hasPrev || pager.action.busy} onClick=${pager.prev} data-test="page-prev">Previous</button>
    <span class="muted" data-test="page-number">page ${pager.page}</span>
    <button type="button" disabled=${!pager.hasNext || pager.action.busy} onClick=${pager.next} data-test="page-next">Next</button>
  </div>`;
}

/**
 * A paged list as a table: a line while its first page loads, another when it is empty, the current
 * page's items (a `row` each under `head`), and the pager's buttons.
 */
export function PagedTable<T>(props: { pager: Paged<T>; test: string; head: string[]; row: (item: T) => VNode; loading: string; empty: ComponentChildren }): VNode {
  const { pager } = props;
  // On a narrow screen each row is a card whose cells say what they are (style.css `.cards`):
  // every cell carries its column's title.
  const table = useRef<HTMLTableElement>(null);
  useEffect(() => {
    for (const tr of table.current?.tBodies[0]?.rows ?? []) {
      [...tr.cells].forEach((td, i) => td.setAttribute('data-label', td.colSpan > 1 ? '' : (props.head[i] ?? '')));
    }
  });
  return html`<${Fragment}>
    ${pager.action.busy && !pager.items ? html`<${Busy}>${props.loading}<//>` : null}
    ${pager.items && pager.items.length === 0 ? html`<p class="empty">${props.empty}</p>` : null}
    ${pager.items && pager.items.length > 0
      ? html`<div class="scroll-x"><table class="cards" ref=${table} data-test=${props.test}>
          <thead><tr>${props.head.map((h) => html`<th>${h}</th>`)}</tr></thead>
          <tbody>${pager.items.map(props.row)}</tbody>
        </table></div>`
      : null}
    <${Pager} pager=${pager} />
  <//>`;
}
