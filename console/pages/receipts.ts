/** `#/projects/<id>/receipts`: receipts of the project's receipted changes, newest first (docs/api.md "Decisions"). */
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import type { ProjectClient, Receipt } from '../../client/index.ts';
import { ErrorBox, PagedTable, Time, usePager } from '../ui.ts';

/** The receipts page. */
export function Receipts({ project }: { project: ProjectClient }): VNode {
  const pager = usePager(async (cursor) => {
    const page = await project.receipts.list({ limit: 25, ...(cursor ? { cursor } : {}) }).first();
    return { items: page.receipts, next: page.next_cursor };
  }, [project.id]);
  const row = (r: Receipt) => html`<tr key=${r.id} data-test="receipt-row">
    <td><${Time} at=${r.at} /></td>
    <td class="mono" data-test="receipt-op">${r.op}</td>
    <td class="mono">${r.target}</td>
    <td class="mono">${r.actor}</td>
    <td class="mono">${r.request_id}</td>
  </tr>`;
  return html`<div data-test="page-receipts">
    <h1>Receipts</h1>
    <p class="muted">Every object upload and delete, secret change and other receipted change, written with the change itself.</p>
    <div class="row"><button class="link" onClick=${() => pager.reload()} data-test="receipts-refresh">Refresh</button></div>
    <${ErrorBox} error=${pager.action.error} />
    <${PagedTable} pager=${pager} test="receipts-table" head=${['At', 'Operation', 'Target', 'Actor', 'Request']} row=${row} loading="Loading receipts…" empty="No receipt yet." />
  </div>`;
}
