/** `#/projects/<id>`: the project's state and its lifecycle — wake up, sleep, head (docs/lifecycle.md). */
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useState } from 'preact/hooks';
import type { Head, Project, ProjectClient } from '../../client/index.ts';
import { Busy, ErrorBox, Json, StateBadge, Time, useAction } from '../ui.ts';

/** The overview page. */
export function Overview({ project, record, onChanged }: { project: ProjectClient; record: Project; onChanged: (p: Project) => void }): VNode {
  const [head, setHead] = useState<Head | null>(null);
  const [doing, setDoing] = useState<string | null>(null);
  const lifecycle = useAction(async (what: 'wakeup' | 'sleep' | 'refresh') => {
    setDoing(what === 'wakeup' ? 'Waking the engine up…' : what === 'sleep' ? 'Putting the engine to sleep…' : 'Reading the project…');
    try {
      const next = what === 'wakeup' ? await project.wakeup() : what === 'sleep' ? await project.sleep() : await project.get();
      onChanged(next);
      setHead(null);
    } finally {
      setDoing(null);
    }
  });
  const probe = useAction(async () => setHead(await project.head()));
  return html`<div data-test="page-overview">
    <h1>${record.name} <${StateBadge} state=${record.state} /></h1>
    <div class="panel grid2">
      <span>Id</span><span class="mono" data-test="project-id">${record.id}</span>
      <span>State</span><span data-test="project-state">${record.state}</span>
      <span>Engine pin</span><span class="mono">${record.native.pin}</span>
      <span>Data plane</span><span class="mono">${location.origin}${record.native.data_plane}</span>
      <span>Created</span><${Time} at=${record.created_at} />
      <span>Updated</span><${Time} at=${record.updated_at} />
    </div>
    <div class="row">
      <button class="primary" disabled=${lifecycle.busy} onClick=${() => lifecycle.run('wakeup')} data-test="wakeup">Wake up</button>
      <button disabled=${lifecycle.busy} onClick=${() => lifecycle.run('sleep')} data-test="sleep">Sleep</button>
      <button disabled=${probe.busy} onClick=${() => probe.run()} data-test="head">Head</button>
      <button class="link" disabled=${lifecycle.busy} onClick=${() => lifecycle.run('refresh')} data-test="refresh">Refresh</button>
      ${doing ? html`<${Busy}>${doing}<//>` : null}
      ${probe.busy ? html`<${Busy}>Asking the engine…<//>` : null}
    </div>
    <${ErrorBox} error=${lifecycle.error} />
    <${ErrorBox} error=${probe.error} />
    ${head
      ? html`<div class="panel" data-test="head-result">
          <h2>Head: ${head.source === 'live_probe' ? 'live probe of the running engine' : 'offline status of the data directory'}</h2>
          <${Json} value=${head} />
        </div>`
      : null}
  </div>`;
}
