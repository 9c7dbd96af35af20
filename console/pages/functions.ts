/**
 * `#/projects/<id>/functions`: the project's functions (docs/console.md "Functions"; docs/functions.md):
 * list, deploy a module file as a new version, invoke (the function's answer shown as it is),
 * read the logs, delete after a confirmation. A service without the functions API answers its list
 * with 404 "no route"; the page then says so instead of failing.
 */
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useRef, useState } from 'preact/hooks';
import { SvcError, type FunctionInfo, type ProjectClient } from '../../client/index.ts';
import { Busy, Confirm, ErrorBox, PagedTable, Time, formatBytes, useAction, usePager, type Action } from '../ui.ts';

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];

/** The functions page. */
export function Functions({ project }: { project: ProjectClient }): VNode {
  const [offered, setOffered] = useState(true);
  const pager = usePager(async (cursor) => {
    try {
      const page = await project.functions.list({ limit: 50, ...(cursor ? { cursor } : {}) }).first();
      return { items: page.functions, next: page.next_cursor };
    } catch (err) {
      if (err instanceof SvcError && err.status === 404 && /no route/.test(err.message)) {
        setOffered(false);
        return { items: [] as FunctionInfo[], next: null };
      }
      throw err;
    }
  }, [project.id]);
  const invoking = useInvoke(project);
  const [logs, setLogs] = useState<{ name: string; text: string } | null>(null);
  const readLogs = useAction(async (fn: string) => {
    const { lines } = await project.functions.logs(fn, { tail: 200 });
    setLogs({ name: fn, text: lines.join('\n') });
  });
  const [deleting, setDeleting] = useState<FunctionInfo | null>(null);
  const remove = useAction(async (f: FunctionInfo) => {
    setDeleting(null);
    await project.functions.delete(f.name);
    if (invoking.target === f.name) invoking.setTarget(null);
    await pager.reload();
  });

  if (!offered) {
    return html`<div data-test="page-functions"><h1>Functions</h1><p class="empty" data-test="functions-unavailable">This service does not offer functions.</p></div>`;
  }
  const row = (f: FunctionInfo) => html`<tr key=${f.name}>
    <td class="mono" data-test="function-name">${f.name}</td><td class="num">${f.version}</td><td class="num">${formatBytes(f.size)}</td><td><${Time} at=${f.updated_at} /></td>
    <td><div class="row">
      <button onClick=${() => (invoking.setTarget(f.name), invoking.setAnswer(null))} data-test="function-invoke">Invoke…</button>
      <button disabled=${readLogs.busy} onClick=${() => readLogs.run(f.name)} data-test="function-logs">Logs</button>
      <button class="danger" disabled=${remove.busy} onClick=${() => setDeleting(f)} data-test="delete-function">Delete</button>
    </div></td>
  </tr>`;
  return html`<div data-test="page-functions">
    <h1>Functions</h1>
    <${DeployPanel} project=${project} onDeployed=${() => pager.reload()} />
    <${ErrorBox} error=${pager.action.error} />
    <${ErrorBox} error=${remove.error} />
    <${PagedTable} pager=${pager} test="functions-table" head=${['Name', 'Version', 'Size', 'Updated', '']} row=${row} loading="Loading functions…" empty="No function yet." />
    ${invoking.target ? html`<${InvokePanel} invoking=${invoking} />` : null}
    <${ErrorBox} error=${readLogs.error} />
    ${logs !== null
      ? html`<div class="panel" data-test="function-log"><h2 style=${{ marginTop: 0 }}>Logs of ${logs.name}</h2>${logs.text ? html`<pre>${logs.text}</pre>` : html`<p class="empty">Nothing logged yet.</p>`}</div>`
      : null}
    ${deleting
      ? html`<${Confirm} title="Delete this function?" confirmLabel="Delete" onConfirm=${() => remove.run(deleting)} onCancel=${() => setDeleting(null)}>
          <p><code>${deleting.name}</code> and its versions are removed; invocations in flight finish.</p>
        <//>`
      : null}
  </div>`;
}

/** Deploys a chosen module file under a name as the function's new version. */
function DeployPanel({ project, onDeployed }: { project: ProjectClient; onDeployed: () => Promise<unknown> }): VNode {
  const file = useRef<HTMLInputElement>(null);
  const [name, setName] = useState('');
  const deploy = useAction(async () => {
    const chosen = file.current?.files?.[0];
    if (!chosen) throw new Error('choose a JavaScript module file to deploy');
    await project.functions.deploy(name.trim(), chosen);
    await onDeployed();
  });
  return html`<div class="panel">
    <h2 style=${{ marginTop: 0 }}>Deploy</h2>
    <form class="row" onSubmit=${(e: Event) => (e.preventDefault(), void deploy.run())}>
      <input name="function_name" placeholder="name" value=${name} onInput=${(e: Event) => setName((e.target as HTMLInputElement).value)} pattern="[a-z][a-z0-9\\-]{0,62}" required />
      <input type="file" ref=${file} accept=".js,.mjs,application/javascript,text/javascript" data-test="function-file" />
      <button class="primary" type="submit" disabled=${deploy.busy} data-test="deploy-function">Deploy</button>
      ${deploy.busy ? html`<${Busy}>Deploying…<//>` : null}
    </form>
    <p class="muted">One ES module exporting <code>default { fetch(request, env, ctx) }</code>; each deploy is a new version, and the project's secrets are its environment.</p>
    <${ErrorBox} error=${deploy.error} />
  </div>`;
}

/** The invocation form's state: which function, the request typed, and the last answer. */
interface Invoking {
  target: string | null;
  setTarget(name: string | null): void;
  method: string;
  setMethod(method: string): void;
  path: string;
  setPath(path: string): void;
  body: string;
  setBody(body: string): void;
  answer: { status: number; type: string | null; text: string } | null;
  setAnswer(answer: Invoking['answer']): void;
  invoke: Action<[], void>;
}

/** Kept by the page, so the request typed stays while another function is chosen. */
function useInvoke(project: ProjectClient): Invoking {
  const [target, setTarget] = useState<string | null>(null);
  const [method, setMethod] = useState('GET');
  const [path, setPath] = useState('');
  const [body, setBody] = useState('');
  const [answer, setAnswer] = useState<Invoking['answer']>(null);
  const invoke = useAction(async () => {
    if (!target) return;
    setAnswer(null);
    const r = await project.functions.invoke(target, { method, path, ...(method === 'GET' ? {} : { body }) });
    setAnswer({ status: r.status, type: r.headers.get('content-type'), text: await r.text() });
  });
  return { target, setTarget, method, setMethod, path, setPath, body, setBody, answer, setAnswer, invoke };
}

/** Invokes the chosen function and shows its answer as it is. */
function InvokePanel({ invoking: i }: { invoking: Invoking }): VNode {
  return html`<div class="panel" style=${{ marginTop: '16px' }}>
    <h2 style=${{ marginTop: 0 }}>Invoke ${i.target}</h2>
    <form class="stack" onSubmit=${(e: Event) => (e.preventDefault(), void i.invoke.run())}>
      <div class="row">
        <select value=${i.method} onChange=${(e: Event) => i.setMethod((e.target as HTMLSelectElement).value)}>${METHODS.map((m) => html`<option>${m}</option>`)}</select>
        <input placeholder="path after /invoke" value=${i.path} onInput=${(e: Event) => i.setPath((e.target as HTMLInputElement).value)} />
        <button class="primary" type="submit" disabled=${i.invoke.busy} data-test="invoke-run">Invoke</button>
        ${i.invoke.busy ? html`<${Busy}>Waiting for the function…<//>` : null}
      </div>
      ${i.method === 'GET' ? null : html`<textarea rows="3" placeholder="body" value=${i.body} onInput=${(e: Event) => i.setBody((e.target as HTMLTextAreaElement).value)}></textarea>`}
    </form>
    <${ErrorBox} error=${i.invoke.error} />
    ${i.answer ? html`<div data-test="invoke-answer"><strong>${i.answer.status}</strong> <span class="muted">${i.answer.type ?? ''}</span><pre>${i.answer.text}</pre></div>` : null}
  </div>`;
}
