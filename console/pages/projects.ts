/**
 * `#/projects`: the account's projects, page by page, a form to create one, and each one's rename
 * and deletion (docs/console.md "Pages"; console/project-admin.ts).
 */
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useState } from 'preact/hooks';
import type { Project, SvcClient } from '../../client/index.ts';
import { DeleteProject, RenameForm } from '../project-admin.ts';
import { hrefOf, navigate } from '../router.ts';
import { ErrorBox, PagedTable, StateBadge, Time, useAction, usePager } from '../ui.ts';

/** The projects page. */
export function Projects({ client }: { client: SvcClient }): VNode {
  const pager = usePager(async (cursor) => {
    const page = await client.projects.list({ limit: 20, ...(cursor ? { cursor } : {}) }).first();
    return { items: page.projects, next: page.next_cursor };
  }, []);
  const [name, setName] = useState('');
  const [renaming, setRenaming] = useState<string | null>(null);
  const create = useAction(async () => {
    const project = await client.projects.create({ name });
    setName('');
    navigate({ page: 'project', id: project.id, tab: 'overview' });
  });
  const row = (p: Project) => html`<tr key=${p.id} data-test="project-row">
    <td>
      ${renaming === p.id
        ? html`<${RenameForm} project=${client.project(p.id)} record=${p} onRenamed=${() => (setRenaming(null), void pager.reload())} onCancel=${() => setRenaming(null)} />`
        : html`<a href=${hrefOf({ page: 'project', id: p.id, tab: 'overview' })} data-test="project-link">${p.name}</a>`}
    </td>
    <td class="mono wrap">${p.id}</td>
    <td><${StateBadge} state=${p.state} /></td>
    <td><${Time} at=${p.created_at} /></td>
    <td><div class="row">
      ${renaming === p.id ? null : html`<button onClick=${() => setRenaming(p.id)} data-test="rename-project">Rename</button>`}
      <${DeleteProject} project=${client.project(p.id)} record=${p} onDeleted=${() => void pager.reload()} />
    </div></td>
  </tr>`;
  return html`<div data-test="page-projects">
    <h1>Projects</h1>
    <div class="panel">
      <form class="row" onSubmit=${(e: Event) => (e.preventDefault(), void create.run())}>
        <input name="project_name" placeholder="Project name" value=${name} onInput=${(e: Event) => setName((e.target as HTMLInputElement).value)} maxlength="64" required />
        <button class="primary" type="submit" disabled=${create.busy} data-test="create-project">${create.busy ? 'Creating…' : 'Create project'}</button>
      </form>
      <p class="muted">A new project reserves a tenant; its engine starts on the first wake-up.</p>
      <${ErrorBox} error=${create.error} />
    </div>
    <${ErrorBox} error=${pager.action.error} />
    <${PagedTable} pager=${pager} test="projects-table" head=${['Name', 'Id', 'State', 'Created', '']} row=${row} loading="Loading projects…" empty="No project yet: create your first one above." />
  </div>`;
}
