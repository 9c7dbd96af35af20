/** `#/projects/<id>/receipts`: receipts of the project's receipted changes, newest first (docs/api.md "Decisions"). */
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import type { ProjectClient } from '../../client/index.ts';
import { Busy, ErrorBox, Pager, Time, usePager } from '../ui.ts';

/** The receipts page. */
export function Receipts({ project }: { project: ProjectClient }): VNode {
  const pager = usePager(async (cursor) => {
    const page = await project.receipts.list({ limit: 25, ...(cursor ? { cursor } : {}) }).first();
    return { items: page.receipts, next: page.next_cursor };
  }, [project.id]);
  return html`<div data-test="page-receipts">
    <h1>Receipts</h1>
    <p class="muted">Every object upload and delete, secret change and other receipted change, written with the change itself.</p>
    <div class="row"><button class="link" onClick=${() => pager.reload()} data-test="receipts-refresh">Refresh</button></div>
    <${ErrorBox} error=${pager.action.error} />
    ${pager.action.busy && !pager.items ? html`<${Busy}>Loading receipts…<//>` : null}
    ${pager.items && pager.items.length === 0 ? html`<p class="empty">No receipt yet.</p>` : null}
    ${pager.items && pager.items.length > 0
      ? html`<table data-test="receipts-table">
          <thead><tr><th>At</th><th>Operation</th><th>Target</th><th>Actor</th><th>Request</th></tr></thead>
          <tbody>
            ${pager.items.map(
              (r) => html`<tr key=${r.id} data-test="receipt-row">
                <td><${Time} at=${r.at} /></td>
                <td class="mono" data-test="receipt-op">${r.op}</td>
                <td class="mono">${r.target}</td>
                <td class="mono">${r.actor}</td>
                <td class="mono">${r.request_id}</td>
              </tr>`,
            )}
          </tbody>
        </table>`
      : null}
    <${Pager} pager=${pager} />
  </div>`;
}
