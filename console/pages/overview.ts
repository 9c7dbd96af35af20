/**
 * `#/projects/<id>`: the project's state, its last off-machine backup, its lifecycle — wake up,
 * sleep, head shown as fields (docs/lifecycle.md "head") — and its settings: name, automatic sleep
 * and backups (docs/lifecycle.md "Automatic sleep and backups"), deletion.
 */
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useState } from 'preact/hooks';
import type { Head, Project, ProjectClient } from '../../client/index.ts';
import { DeleteProject, RenameForm } from '../project-admin.ts';
import { navigate } from '../router.ts';
import { Busy, ErrorBox, Fields, StateBadge, Time, useAction } from '../ui.ts';
import { AutomationForm, BackupState } from './overview-settings.ts';

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
    <h1 class="wrap">${record.name} <${StateBadge} state=${record.state} /></h1>
    <div class="panel grid2">
      <span>Id</span><span class="mono wrap" data-test="project-id">${record.id}</span>
      <span>State</span><span data-test="project-state">${record.state}</span>
      <span>Engine pin</span><span class="mono">${record.native.pin}</span>
      <span>Data plane</span><span class="mono wrap">${location.origin}${record.native.data_plane}</span>
      <span>Created</span><${Time} at=${record.created_at} />
      <span>Updated</span><${Time} at=${record.updated_at} />
      <${BackupState} record=${record} />
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
    ${head ? html`<${HeadPanel} head=${head} />` : null}
    <div class="panel stack" data-test="settings">
      <h2 style=${{ marginTop: 0 }}>Settings</h2>
      <div>
        <div class="muted">Name</div>
        <${RenameForm} key=${record.name} project=${project} record=${record} onRenamed=${onChanged} />
      </div>
      <${AutomationForm} project=${project} record=${record} onChanged=${onChanged} />
      <div>
        <div class="muted">Danger zone</div>
        <${DeleteProject} project=${project} record=${record} onDeleted=${() => navigate({ page: 'projects' })} />
      </div>
    </div>
  </div>`;
}

/** The head answer as fields: what it is, then the engine's own outputs, each member on its line. */
function HeadPanel({ head }: { head: Head }): VNode {
  const { source, state, timestamp, engine, endpoint, ...rest } = head as Head & Record<string, unknown>;
  const summary: Record<string, unknown> = { source, state, address: endpoint.address ?? 'nothing listens (asleep)', probed_at: timestamp };
  const details: Record<string, unknown> = { ...rest };
  if (head.source === 'live_probe') {
    const { capabilities, ...others } = details as { capabilities: { status: number; content_type: string | null; body_base64: string } };
    Object.assign(summary, others);
    return html`<div class="panel" data-test="head-result">
      <h2 style=${{ marginTop: 0 }}>Head: live probe of the running engine</h2>
      <${Fields} value=${summary} test="head-fields" />
      <h3>Capabilities (HTTP ${capabilities.status}, ${capabilities.content_type ?? 'no content type'})</h3>
      <${Fields} value=${decodeProduct(capabilities.body_base64)} test="head-capabilities" />
      <h3>Engine</h3>
      <${Fields} value=${engine} />
    </div>`;
  }
  const { lineage, ...others } = details;
  Object.assign(summary, others);
  return html`<div class="panel" data-test="head-result">
    <h2 style=${{ marginTop: 0 }}>Head: offline status of the data directory</h2>
    <${Fields} value=${summary} test="head-fields" />
    <h3>Lineage</h3>
    <${Fields} value=${lineage} />
    <h3>Engine</h3>
    <${Fields} value=${engine} />
  </div>`;
}

/**
 * The engine's product envelope (docs/api.md "/v2": 8 bytes `SVCRSP01`, a 4-byte big-endian
 * length, that many bytes of UTF-8 JSON) as its JSON value; anything else as its size.
 */
export function decodeProduct(base64: string): unknown {
  let bytes: Uint8Array;
  try {
    bytes = Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
  } catch {
    return { body: 'not base64' };
  }
  const magic = new TextDecoder().decode(bytes.subarray(0, 8));
  if (magic === 'SVCRSP01' && bytes.length >= 12) {
    const length = new DataView(bytes.buffer, bytes.byteOffset + 8, 4).getUint32(0);
    try {
      return JSON.parse(new TextDecoder().decode(bytes.subarray(12, 12 + length))) as unknown;
    } catch {
      // not JSON after all: fall through to the size
    }
  }
  return { body: `${bytes.length} bytes` };
}
