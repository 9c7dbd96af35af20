/**
 * `#/projects/<id>/sql`: the SQL editor (docs/console.md "SQL editor"). It runs on the data plane,
 * which takes a project key: the user pastes one or lets the console create one for this tab. A
 * script of several statements is one batch, run as one transaction; each statement's result is a
 * table, and the engine's errors show its own code and message.
 */
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useMemo, useState } from 'preact/hooks';
import { isBlankSql, splitStatements } from '../../client/cli/sql-split.ts';
import type { ProjectClient, ResultSet, Value } from '../../client/index.ts';
import { keyClient, setSqlKey, sqlKeyOf } from '../session.ts';
import { Busy, ErrorBox, useAction } from '../ui.ts';

const SHOWN_ROWS = 1000;

/** The SQL editor page. */
export function Sql({ project }: { project: ProjectClient }): VNode {
  const [key, setKey] = useState<string | null>(() => sqlKeyOf(project.id));
  const [pasted, setPasted] = useState('');
  const [script, setScript] = useState('SELECT sqlite_version() AS version;');
  const [results, setResults] = useState<{ sql: string; result: ResultSet }[] | null>(null);
  const [elapsed, setElapsed] = useState<number | null>(null);
  const client = useMemo(() => (key ? keyClient(key) : null), [key]);

  const useKey = (value: string | null) => {
    setSqlKey(project.id, value);
    setKey(value);
  };
  const createKey = useAction(async () => {
    const issued = await project.keys.create({ label: 'console sql editor' });
    useKey(issued.key);
  });
  const run = useAction(
    async () => {
      if (!client) return;
      // Split by SQLite's own rule, as the engine counts statements (the CLI's splitter); an
      // unterminated last statement is a statement too.
      const { statements: complete, rest } = splitStatements(script);
      const statements = [...complete, rest.trim()].filter((s) => !isBlankSql(s));
      if (statements.length === 0) throw new Error('nothing to run: the editor holds no statement');
      const started = performance.now();
      setResults(null);
      const sets = statements.length === 1 ? [await client.sql(statements[0]!)] : await client.batch(statements);
      setElapsed(performance.now() - started);
      setResults(sets.map((result, i) => ({ sql: statements[i]!, result })));
    },
    { sessionCall: false },
  );

  if (!key) {
    return html`<div data-test="page-sql">
      <h1>SQL editor</h1>
      <div class="panel stack">
        <p>The SQL editor runs statements on the data plane (<code>/v2/sql</code>), which takes a project key. This tab keeps the key until it closes.</p>
        <div class="row">
          <button class="primary" disabled=${createKey.busy} onClick=${() => createKey.run()} data-test="sql-create-key">Create a key for this tab</button>
          <span class="muted">(labelled “console sql editor”; revoke it on the Keys page when done)</span>
        </div>
        <form class="row" onSubmit=${(e: Event) => (e.preventDefault(), pasted.trim() && useKey(pasted.trim()))}>
          <input name="sql_key" type="password" placeholder="or paste a key: svc1_…" value=${pasted} onInput=${(e: Event) => setPasted((e.target as HTMLInputElement).value)} style=${{ width: '420px' }} />
          <button type="submit" data-test="sql-use-key">Use this key</button>
        </form>
        <${ErrorBox} error=${createKey.error} />
      </div>
    </div>`;
  }
  return html`<div data-test="page-sql">
    <h1>SQL editor</h1>
    <div class="row muted" style=${{ marginBottom: '8px' }}>
      Using key <code>${key.slice(0, 13)}…</code>
      <button class="link" onClick=${() => useKey(null)} data-test="sql-forget-key">use another key</button>
    </div>
    <textarea name="sql" rows="9" style=${{ width: '100%' }} value=${script} spellcheck=${false}
      onInput=${(e: Event) => setScript((e.target as HTMLTextAreaElement).value)}
      onKeyDown=${(e: KeyboardEvent) => (e.ctrlKey || e.metaKey) && e.key === 'Enter' && (e.preventDefault(), void run.run())}
      data-test="sql-input"></textarea>
    <div class="row">
      <button class="primary" disabled=${run.busy} onClick=${() => run.run()} data-test="sql-run">Run</button>
      <span class="muted">Ctrl+Enter runs. Several statements run as one transaction.</span>
      ${run.busy ? html`<${Busy}>Running…<//>` : null}
    </div>
    <${ErrorBox} error=${run.error} />
    ${results
      ? html`<div data-test="sql-results">
          <p class="muted">${results.length} statement${results.length === 1 ? '' : 's'} in ${elapsed?.toFixed(0)} ms</p>
          ${results.map((r, i) => html`<${StatementResult} key=${i} sql=${r.sql} result=${r.result} />`)}
        </div>`
      : null}
  </div>`;
}

function StatementResult({ sql, result }: { sql: string; result: ResultSet }): VNode {
  const rows = result.toArrays();
  return html`<div class="panel" data-test="sql-result">
    <div class="mono muted" style=${{ marginBottom: '6px' }}>${sql.length > 160 ? `${sql.slice(0, 160)}…` : sql}</div>
    ${result.columns.length === 0
      ? html`<div data-test="sql-affected">OK · ${result.rowsAffected} row${result.rowsAffected === 1 ? '' : 's'} affected${result.lastInsertRowid !== undefined ? ` · last rowid ${result.lastInsertRowid}` : ''}</div>`
      : html`<div class="table-wrap"><table data-test="sql-table">
          <thead><tr>${result.columns.map((c) => html`<th>${c}</th>`)}</tr></thead>
          <tbody>${rows.slice(0, SHOWN_ROWS).map((row) => html`<tr>${row.map((v) => html`<td class=${typeof v === 'number' ? 'num' : ''}>${cell(v)}</td>`)}</tr>`)}</tbody>
        </table></div>
        <div class="muted" data-test="sql-row-count">${rows.length} row${rows.length === 1 ? '' : 's'}${rows.length > SHOWN_ROWS ? ` (first ${SHOWN_ROWS} shown)` : ''}</div>`}
  </div>`;
}

function cell(v: Value): VNode | string {
  return v === null ? html`<span class="muted">NULL</span>` : String(v);
}
