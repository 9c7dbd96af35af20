/**
 * Hash routes of the console (docs/console.md "Pages"): `#/signin`, `#/signup`, `#/projects`,
 * `#/projects/<id>` and `#/projects/<id>/<page>`. In the fragment, so the service serves one page
 * whatever the route, and a reload or a shared link opens the same page.
 */
import { useEffect, useState } from 'preact/hooks';

/** A parsed route. */
export type Route =
  | { page: 'signin' }
  | { page: 'signup' }
  | { page: 'projects' }
  | { page: 'project'; id: string; tab: ProjectTab };

/** The pages of one project, in the order the side bar lists them. */
export const PROJECT_TABS = ['overview', 'keys', 'sql', 'storage', 'realtime', 'secrets', 'snapshots', 'receipts', 'functions'] as const;
/** One page of a project. */
export type ProjectTab = (typeof PROJECT_TABS)[number];

/** Parses a location hash. */
export function parseRoute(hash: string): Route {
  const parts = hash.replace(/^#\/?/, '').split('/').filter(Boolean).map(decodeURIComponent);
  if (parts[0] === 'signin') return { page: 'signin' };
  if (parts[0] === 'signup') return { page: 'signup' };
  if (parts[0] === 'projects' && parts[1]) {
    const tab = (PROJECT_TABS as readonly string[]).includes(parts[2] ?? '') ? (parts[2] as ProjectTab) : 'overview';
    return { page: 'project', id: parts[1], tab };
  }
  return { page: 'projects' };
}

/** The hash of a route. */
export function hrefOf(route: Route): string {
  if (route.page === 'project') return `#/projects/${encodeURIComponent(route.id)}${route.tab === 'overview' ? '' : `/${route.tab}`}`;
  return `#/${route.page}`;
}

/** Goes to `route`. */
export function navigate(route: Route): void {
  location.hash = hrefOf(route);
}

/** The current route, following the hash. */
export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(location.hash));
  useEffect(() => {
    const on = () => setRoute(parseRoute(location.hash));
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  return route;
}
