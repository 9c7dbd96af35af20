/**
 * Every page of the console at 1280 and 390 px wide (docs/console.md "Small screens", "Tests"):
 * headless Chromium against the local stack with the built bundle; a project with something on
 * each page (keys, a table, folders of objects, a pending row, a secret, a snapshot, receipts). Each
 * page gets a screenshot in test-output/console/ (`pages-<page>-<width>.png`) and must not scroll
 * sideways (`document.documentElement.scrollWidth <= innerWidth`). At 390 px the side bar is a menu.
 *
 * Needs dist/ (`npm test` builds it first).
 */
import type { Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newPage } from '../helpers/browser.ts';
import { callJson } from '../helpers/http.ts';
import { click, go, setWidth, settled, shoot, sidewaysOverflow, signUp, signedInPage, startRig, textOf, WIDTHS, type Account, type ConsoleRig } from './console-helpers.ts';

let rig: ConsoleRig;
let account: Account;
let projectId: string;

beforeAll(async () => {
  rig = await startRig('svc-console-pages-');
  const url = rig.stack.url;
  account = await signUp(url);
  const auth = account.token;
  // A long name, as users give them: it must wrap or shorten, never widen the page.
  projectId = ((await callJson(url, 'POST', '/v0/projects', auth, { name: 'a-project-with-a-rather-long-name-for-small-screens' })) as { id: string }).id;
  const p = `/v0/projects/${projectId}`;
  await callJson(url, 'POST', `${p}/wakeup`, auth);
  const { key } = (await callJson(url, 'POST', `${p}/keys`, auth, { label: 'pages' })) as { key: string };
  const sql = await fetch(`${url}/v2/sql`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'x-svc-protocol-minor': '3', 'content-type': 'application/json' },
    body: JSON.stringify({ sql: 'CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)' }),
  });
  expect(sql.status).toBe(200);
  await callJson(url, 'PUT', `${p}/storage/buckets/assets`, auth);
  for (const [k, body, type] of [
    ['readme.txt', 'hello from the root', 'text/plain'],
    ['docs/guide/a-very-long-file-name-that-goes-on-and-on-and-on-without-a-single-space.md', '# guide', 'text/markdown'],
    ['docs/notes.json', '{"a": 1}', 'application/json'],
  ] as const) {
    const put = await fetch(`${url}${p}/storage/objects/assets/${k}`, { method: 'PUT', headers: { authorization: `Bearer ${auth}`, 'content-type': type }, body });
    expect(put.status).toBe(201);
  }
  await callJson(url, 'POST', `${p}/storage/uploads`, auth, { bucket: 'assets', key: 'never-finished.bin' });
  await callJson(url, 'PUT', `${p}/functions/secrets/STRIPE_KEY`, auth, { value: 'sk_test_pages' });
  await callJson(url, 'POST', `${p}/sleep`, auth);
  await callJson(url, 'POST', `${p}/snapshots`, auth, { label: 'before the pages test' });
  await callJson(url, 'POST', `${p}/wakeup`, auth);
}, 120_000);

afterAll(async () => {
  await rig?.stop();
});

/** The project's pages, each with what to do before its screenshot. */
const PROJECT_PAGES: [string, ((page: Page) => Promise<void>) | null][] = [
  ['overview', async (page) => {
    await click(page, '[data-test=head]');
    await page.waitForSelector('[data-test=head-fields]');
  }],
  ['keys', null],
  ['sql', null],
  ['storage', async (page) => {
    await textOf(page, '[data-test=objects-table]', /never-finished/);
  }],
  ['realtime', async (page) => {
    await click(page, '[data-test=rt-connect]');
    await textOf(page, '[data-test=rt-status]', /live on/);
    await click(page, '[data-test=rt-publish]');
    await textOf(page, '[data-test=rt-events]', /message/);
  }],
  ['secrets', null],
  ['snapshots', null],
  ['receipts', null],
  ['functions', null],
];

describe('every page at 1280 and 390 px', () => {
  for (const width of WIDTHS) {
    it(`${width} px: a screenshot of each page, none scrolls sideways`, async () => {
      const problems: string[] = [];
      const wide: string[] = [];
      const check = async (page: Page, name: string) => {
        await shoot(page, `pages-${name}`, width);
        const { overflow, culprit } = await sidewaysOverflow(page);
        if (overflow > 0) wide.push(`${name}: ${overflow} px too wide (${culprit})`);
      };

      // Signed out: sign-in and sign-up.
      const out = await newPage(rig.browser, problems);
      await setWidth(out, width);
      await out.goto(`${rig.stack.url}/console/#/signin`);
      await out.waitForSelector('[data-test=page-signin]');
      await check(out, 'signin');
      await click(out, '[data-test=to-signup]');
      await out.waitForSelector('[data-test=page-signup]');
      await check(out, 'signup');
      await out.close();

      const page = await signedInPage(rig.browser, rig.stack.url, account, problems);
      await setWidth(page, width);
      await go(page, '#/projects', 'page-projects');
      await textOf(page, '[data-test=projects-table]', /rather-long-name/);
      await check(page, 'projects');
      for (const [tab, before] of PROJECT_PAGES) {
        await go(page, `#/projects/${projectId}${tab === 'overview' ? '' : `/${tab}`}`, `page-${tab}`);
        if (before) await before(page);
        await settled(page);
        await check(page, tab);
      }
      // A folder two levels down, holding a long name without a space.
      await go(page, `#/projects/${projectId}/storage`, 'page-storage');
      for (const folder of ['docs/', 'guide/']) {
        await page.waitForFunction((f) => [...document.querySelectorAll('[data-test=folder]')].some((b) => b.textContent === f), {}, folder);
        await page.evaluate((f) => [...document.querySelectorAll<HTMLButtonElement>('[data-test=folder]')].find((b) => b.textContent === f)!.click(), folder);
      }
      await textOf(page, '[data-test=objects-table]', /a-very-long-file-name/);
      await check(page, 'storage-folder');
      // The side bar: beside the page when wide, a menu when narrow.
      const side = await page.$eval('[data-test=side]', (el) => getComputedStyle(el).display);
      if (width < 700) {
        expect(side).toBe('none');
        await click(page, '[data-test=menu-toggle]');
        await page.waitForSelector('[data-test=side] [data-test=tab-keys]', { visible: true });
        await check(page, 'menu-open');
        await click(page, '[data-test=tab-keys]');
        await page.waitForSelector('[data-test=page-keys]');
        expect(await page.$eval('[data-test=side]', (el) => getComputedStyle(el).display)).toBe('none');
      } else {
        expect(side).toBe('block');
        expect(await page.$eval('[data-test=menu-toggle]', (el) => getComputedStyle(el).display)).toBe('none');
      }
      // A dialog with a typed confirmation fits too.
      await go(page, `#/projects/${projectId}`, 'page-overview');
      await click(page, '[data-test=delete-project]');
      await page.waitForSelector('[data-test=confirm-dialog]');
      await check(page, 'delete-dialog');
      await click(page, '[data-test=confirm-cancel]');

      expect(wide).toEqual([]);
      expect(problems).toEqual([]);
      await page.close();
    }, 120_000);
  }
});
