/**
 * The web console (docs/console.md): one page at `{base_url}/console/`, written on the SDK
 * (client/), rendered with preact and htm, everything bundled by build.mjs. Routes live in the
 * location's fragment (console/router.ts); the session lives in the tab (console/session.ts).
 */
import { html } from 'htm/preact';
import { render, type VNode } from 'preact';
import { useEffect, useMemo, useState } from 'preact/hooks';
import type { Project, SvcClient } from '../client/index.ts';
import { useRealtimeFeed } from './feed.ts';
import { SignIn, SignUp } from './pages/auth.ts';
import { Functions } from './pages/functions.ts';
import { Keys } from './pages/keys.ts';
import { Overview } from './pages/overview.ts';
import { Projects } from './pages/projects.ts';
import { Realtime } from './pages/realtime.ts';
import { Receipts } from './pages/receipts.ts';
import { Secrets } from './pages/secrets.ts';
import { Snapshots } from './pages/snapshots.ts';
import { Sql } from './pages/sql.ts';
import { Storage } from './pages/storage.ts';
import { hrefOf, navigate, PROJECT_TABS, useRoute, type ProjectTab } from './router.ts';
import { apiClient, clearSession, loadSession, type ConsoleSession } from './session.ts';
import { Busy, ErrorBox, setSessionEndedHandler, useLoad } from './ui.ts';

const TAB_TITLES: Record<ProjectTab, string> = {
  overview: 'Overview',
  keys: 'Keys',
  sql: 'SQL editor',
  storage: 'Storage',
  realtime: 'Realtime',
  secrets: 'Secrets',
  snapshots: 'Snapshots',
  receipts: 'Receipts',
  functions: 'Functions',
};

function App(): VNode {
  const route = useRoute();
  const [session, setSession] = useState<ConsoleSession | null>(() => loadSession());
  const [notice, setNotice] = useState<string | null>(null);
  const client = useMemo(() => apiClient(session), [session]);

  useEffect(() => {
    setSessionEndedHandler(() => {
      clearSession();
      setSession(null);
      setNotice('Your session ended (it expired or was signed out). Sign in again.');
      navigate({ page: 'signin' });
    });
  }, []);
  const signedIn = () => {
    setNotice(null);
    setSession(loadSession());
  };
  const signOut = () => {
    // The session ends on the service too; the tab forgets it whatever the answer.
    void client.endSession().catch(() => {});
    clearSession();
    setSession(null);
    navigate({ page: 'signin' });
  };

  if (!session || route.page === 'signin' || route.page === 'signup') {
    // The signed-up page stays until the user confirms they saved the secret.
    return route.page === 'signup' ? html`<${SignUp} onSignedIn=${signedIn} />` : html`<${SignIn} onSignedIn=${signedIn} notice=${notice} />`;
  }
  return html`<div>
    <header class="top">
      <a class="brand" href="#/projects">svc-cloud<span class="wide-only"> console</span></a>
      <a href="#/projects" style=${{ color: '#c9d1dc' }} data-test="nav-projects">Projects</a>
      <span class="who" data-test="who">${session.accountId}</span>
      <button type="button" onClick=${signOut} data-test="sign-out">Sign out</button>
    </header>
    ${route.page === 'project'
      ? html`<${ProjectFrame} key=${route.id} client=${client} session=${session} id=${route.id} tab=${route.tab} />`
      : html`<main><${Projects} client=${client} /></main>`}
  </div>`;
}

/** A project's frame: its side bar, its record, its live feed, and the page of `tab`. */
function ProjectFrame({ client, session, id, tab }: { client: SvcClient; session: ConsoleSession; id: string; tab: ProjectTab }): VNode {
  const project = useMemo(() => client.project(id), [client, id]);
  const loaded = useLoad(() => project.get(), [project]);
  const [record, setRecord] = useState<Project | null>(null);
  useEffect(() => setRecord(loaded.data ?? null), [loaded.data]);
  const feed = useRealtimeFeed(project);
  // Narrow screens (docs/console.md "Small screens"): the side bar folds into a menu button.
  const [menuOpen, setMenuOpen] = useState(false);
  useEffect(() => setMenuOpen(false), [tab]);
  // A lifecycle event on the feed means the recorded state changed: read it again.
  const latest = feed.events[0];
  useEffect(() => {
    if (latest?.channel === 'system') void project.get().then(setRecord, () => {});
  }, [latest?.id]);

  let page: VNode;
  if (!record) page = loaded.action.error ? html`<${ErrorBox} error=${loaded.action.error} />` : html`<${Busy}>Loading the project…<//>`;
  else {
    switch (tab) {
      case 'overview':
        page = html`<${Overview} project=${project} record=${record} onChanged=${setRecord} />`;
        break;
      case 'keys':
        page = html`<${Keys} project=${project} />`;
        break;
      case 'sql':
        page = html`<${Sql} project=${project} />`;
        break;
      case 'storage':
        page = html`<${Storage} project=${project} session=${session} />`;
        break;
      case 'realtime':
        page = html`<${Realtime} project=${project} feed=${feed} />`;
        break;
      case 'secrets':
        page = html`<${Secrets} project=${project} />`;
        break;
      case 'snapshots':
        page = html`<${Snapshots} project=${project} record=${record} onChanged=${setRecord} />`;
        break;
      case 'receipts':
        page = html`<${Receipts} project=${project} />`;
        break;
      case 'functions':
        page = html`<${Functions} project=${project} />`;
        break;
    }
  }
  return html`<div class="layout">
    <button type="button" class="menu-toggle" aria-expanded=${menuOpen} onClick=${() => setMenuOpen(!menuOpen)} data-test="menu-toggle">
      <span aria-hidden="true">☰</span> <span class="menu-title">${record?.name ?? '…'} · ${TAB_TITLES[tab]}</span>
    </button>
    <nav class=${`side${menuOpen ? ' open' : ''}`} data-test="side">
      <div class="project-name" title=${record?.name ?? ''}>${record?.name ?? '…'}</div>
      <div class="project-id">${id}</div>
      ${PROJECT_TABS.map(
        (t) => html`<a href=${hrefOf({ page: 'project', id, tab: t })} class=${t === tab ? 'active' : ''} data-test=${`tab-${t}`}>
          ${TAB_TITLES[t]}${t === 'realtime' && feed.status === 'live' ? html` <span class="dot on" title="live"></span>` : null}
        </a>`,
      )}
    </nav>
    <main>${page}</main>
  </div>`;
}

const root = document.getElementById('app')!;
root.textContent = '';
render(html`<${App} />`, root);
