/**
 * `#/projects/<id>/functions`: the project's functions (docs/console.md "Functions"): list, deploy a
 * module file, invoke, read the logs. A service without the functions API answers its list with 404
 * "no route"; the page then says so instead of failing. The SDK has no functions methods yet, so
 * this page calls the routes with fetch, the session and the SDK's error class.
 */
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useRef, useState } from 'preact/hooks';
import { SvcError } from '../../client/index.ts';
import type { ConsoleSession } from '../session.ts';
import { Busy, ErrorBox, Time, formatBytes, useAction, useLoad } from '../ui.ts';

interface FunctionRecord {
  name: string;
  version: number;
  size: number;
  updated_at: string;
  timeout_ms?: number;
}

/** The functions page. */
export function Functions({ projectId, session }: { projectId: string; session: ConsoleSession }): VNode {
  const base = `/v0/projects/${encodeURIComponent(projectId)}/functions`;
  const call = (method: string, path: string, init: { body?: BodyInit; type?: string } = {}) => api(session, method, path, init);
  const list = useLoad(async () => {
    try {
      const answer = (await (await call('GET', `${base}?limit=100`)).json()) as { functions: FunctionRecord[] };
      return { available: true, functions: answer.functions };
    } catch (err) {
      if (err instanceof SvcError && err.status === 404 && /no route/.test(err.message)) return { available: false, functions: [] as FunctionRecord[] };
      throw err;
    }
  }, [projectId]);

  const file = useRef<HTMLInputElement>(null);
  const [name, setName] = useState('');
  const deploy = useAction(async () => {
    const chosen = file.current?.files?.[0];
    if (!chosen) throw new Error('choose a JavaScript module file to deploy');
    await call('PUT', `${base}/${encodeURIComponent(name.trim())}`, { body: chosen, type: 'application/javascript' });
    await list.reload();
  });

  const [target, setTarget] = useState('');
  const [method, setMethod] = useState('GET');
  const [path, setPath] = useState('');
  const [body, setBody] = useState('');
  const [answer, setAnswer] = useState<{ status: number; type: string | null; text: string } | null>(null);
  const invoke = useAction(async () => {
    const rest = path.replace(/^\/+/, '');
    const r = await call(method, `${base}/${encodeURIComponent(target)}/invoke${rest ? `/${rest}` : ''}`, method === 'GET' || method === 'HEAD' ? {} : { body, type: 'text/plain' });
    setAnswer({ status: r.status, type: r.headers.get('content-type'), text: await r.text() });
  });
  const [logs, setLogs] = useState<{ name: string; text: string } | null>(null);
  const readLogs = useAction(async (fn: string) => {
    const r = await call('GET', `${base}/${encodeURIComponent(fn)}/logs?tail=200`);
    const { lines } = (await r.json()) as { lines: string[] };
    setLogs({ name: fn, text: lines.join('\n') });
  });

  if (list.data && !list.data.available) {
    return html`<div data-test="page-functions"><h1>Functions</h1><p class="empty" data-test="functions-unavailable">This service does not offer functions yet.</p></div>`;
  }
  return html`<div data-test="page-functions">
    <h1>Functions</h1>
    <div class="panel">
      <h2 style=${{ marginTop: 0 }}>Deploy</h2>
      <form class="row" onSubmit=${(e: Event) => (e.preventDefault(), void deploy.run())}>
        <input name="function_name" placeholder="name" value=${name} onInput=${(e: Event) => setName((e.target as HTMLInputElement).value)} pattern="[a-z][a-z0-9\\-]{0,62}" required />
        <input type="file" ref=${file} accept=".js,.mjs,application/javascript,text/javascript" data-test="function-file" />
        <button class="primary" type="submit" disabled=${deploy.busy} data-test="deploy-function">Deploy</button>
        ${deploy.busy ? html`<${Busy}>Deploying…<//>` : null}
      </form>
      <p class="muted">One ES module exporting <code>default { fetch(request, env, ctx) }</code>; each deploy is a new version.</p>
      <${ErrorBox} error=${deploy.error} />
    </div>
    <${ErrorBox} error=${list.action.error} />
    ${list.action.busy && !list.data ? html`<${Busy}>Loading functions…<//>` : null}
    ${list.data && list.data.functions.length === 0 ? html`<p class="empty">No function yet.</p>` : null}
    ${list.data && list.data.functions.length > 0
      ? html`<table data-test="functions-table">
          <thead><tr><th>Name</th><th>Version</th><th>Size</th><th>Updated</th><th></th></tr></thead>
          <tbody>
            ${list.data.functions.map(
              (f) => html`<tr key=${f.name}>
                <td class="mono" data-test="function-name">${f.name}</td><td class="num">${f.version}</td><td class="num">${formatBytes(f.size)}</td><td><${Time} at=${f.updated_at} /></td>
                <td><div class="row"><button onClick=${() => (setTarget(f.name), setAnswer(null))} data-test="function-invoke">Invoke…</button><button onClick=${() => readLogs.run(f.name)} data-test="function-logs">Logs</button></div></td>
              </tr>`,
            )}
          </tbody>
        </table>`
      : null}
    ${target
      ? html`<div class="panel" style=${{ marginTop: '16px' }}>
          <h2 style=${{ marginTop: 0 }}>Invoke ${target}</h2>
          <form class="stack" onSubmit=${(e: Event) => (e.preventDefault(), void invoke.run())}>
            <div class="row">
              <select value=${method} onChange=${(e: Event) => setMethod((e.target as HTMLSelectElement).value)}>${['GET', 'POST', 'PUT', 'PATCH', 'DELETE'].map((m) => html`<option>${m}</option>`)}</select>
              <input placeholder="path after /invoke" value=${path} onInput=${(e: Event) => setPath((e.target as HTMLInputElement).value)} />
              <button class="primary" type="submit" disabled=${invoke.busy} data-test="invoke-run">Invoke</button>
            </div>
            ${method === 'GET' ? null : html`<textarea rows="3" placeholder="body" value=${body} onInput=${(e: Event) => setBody((e.target as HTMLTextAreaElement).value)}></textarea>`}
          </form>
          <${ErrorBox} error=${invoke.error} />
          ${answer ? html`<div data-test="invoke-answer"><strong>${answer.status}</strong> <span class="muted">${answer.type ?? ''}</span><pre>${answer.text}</pre></div>` : null}
        </div>`
      : null}
    <${ErrorBox} error=${readLogs.error} />
    ${logs !== null
      ? html`<div class="panel" data-test="function-log"><h2 style=${{ marginTop: 0 }}>Logs of ${logs.name}</h2>${logs.text ? html`<pre>${logs.text}</pre>` : html`<p class="empty">Nothing logged yet.</p>`}</div>`
      : null}
  </div>`;
}

/**
 * A call with the session on this origin; an error envelope becomes a SvcError. An invocation's
 * answer is the function's own and is shown as it is, whatever its status.
 */
async function api(session: ConsoleSession, method: string, path: string, init: { body?: BodyInit; type?: string }): Promise<Response> {
  const headers: Record<string, string> = { authorization: `Bearer ${session.token}` };
  if (init.type) headers['content-type'] = init.type;
  const r = await fetch(path, { method, headers, ...(init.body === undefined ? {} : { body: init.body }) });
  if (r.status < 400 || path.includes('/invoke')) return r;
  let e: { code?: string; message?: string } | undefined;
  try {
    e = ((await r.json()) as { error?: { code: string; message: string } }).error;
  } catch {
    // not an envelope: the status says enough
  }
  throw new SvcError({ status: r.status, code: (e?.code ?? 'internal') as never, message: e?.message ?? `HTTP ${r.status}`, requestId: r.headers.get('x-request-id') });
}
