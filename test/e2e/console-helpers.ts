/**
 * What the console suites (test/e2e/console-*.test.ts; docs/console.md "Tests") share: the local
 * stack with the built handlers bundle and headless Chromium, an account made over HTTP whose
 * session is put in the tab, and page helpers — typing, clicking, waiting for text, screenshots
 * at a width, and the no-sideways-scrolling check.
 */
import { randomBytes } from 'node:crypto';
import type { Browser, Page } from 'puppeteer-core';
import { inject } from 'vitest';
import { startStack, type Stack } from '../../infra/local/stack.ts';
import { launchBrowser, newPage, screenshot } from '../helpers/browser.ts';
import { tempDir } from '../helpers/env.ts';
import { callJson } from '../helpers/http.ts';

/** The stack and the browser of one suite. */
export interface ConsoleRig {
  stack: Stack;
  browser: Browser;
  stop(): Promise<void>;
}

/** Starts the local stack (worker bundle in miniflare) and Chromium side by side. */
export async function startRig(prefix: string): Promise<ConsoleRig> {
  const dir = tempDir(prefix);
  const [stack, browser] = await Promise.all([
    startStack({
      dir: dir.dir,
      dynamoEndpoint: inject('dynamoEndpoint'),
      env: { SVCD_TABLE: `cn_${randomBytes(6).toString('hex')}`, SVCD_PORT: '0', SVCD_AGENT_PORT: '0', SVCD_DATAPLANE_PORT: '0', SVCD_METRICS_PORT: '0' },
      agentOutput: 'collect',
      log: () => {},
    }),
    launchBrowser(),
  ]);
  return {
    stack,
    browser,
    stop: async () => {
      await browser.close();
      await stack.stop();
      dir.cleanup();
    },
  };
}

/** An account made over HTTP. */
export interface Account {
  account_id: string;
  account_secret: string;
  token: string;
  expires_at: string;
}

export async function signUp(url: string): Promise<Account> {
  return (await callJson(url, 'POST', '/v0/signup', undefined, { name: 'console tester' })) as Account;
}

/** A page of the console signed in as `account` (the session put in the tab, as sign-in does). */
export async function signedInPage(browser: Browser, url: string, account: Account, problems: string[]): Promise<Page> {
  const page = await newPage(browser, problems);
  await page.goto(`${url}/console/#/signin`);
  await page.waitForSelector('[data-test=page-signin]');
  await page.evaluate((s) => sessionStorage.setItem('svc.console.session', JSON.stringify(s)), {
    token: account.token,
    accountId: account.account_id,
    expiresAt: account.expires_at,
  });
  // The app reads the tab's session when it starts: start it again.
  await page.evaluate(() => (location.hash = '#/projects'));
  await page.reload();
  await page.waitForSelector('[data-test=page-projects]');
  await settled(page);
  return page;
}

/** Goes to a console route and waits for its page (`data-test` of its root). */
export async function go(page: Page, hash: string, test: string): Promise<void> {
  // The same route again is no hash change: load the page again so that it reads afresh.
  if ((await page.evaluate(() => location.hash)) === hash) await page.reload();
  else await page.evaluate((h) => (location.hash = h), hash);
  await page.waitForSelector(`[data-test=${test}]`);
  await settled(page);
}

/** Waits until no spinner is left (every first load done). */
export async function settled(page: Page, timeout = 20_000): Promise<void> {
  await page.waitForFunction(() => !document.querySelector('[data-test=busy]'), { timeout });
}

/** Sets an input's or textarea's value the way typing does (an `input` event), in one step. */
export async function fill(page: Page, selector: string, value: string): Promise<void> {
  await page.waitForSelector(selector);
  await page.$eval(
    selector,
    (el, v) => {
      const input = el as HTMLInputElement | HTMLTextAreaElement;
      const proto = input instanceof HTMLTextAreaElement ? HTMLTextAreaElement.prototype : HTMLInputElement.prototype;
      Object.getOwnPropertyDescriptor(proto, 'value')!.set!.call(input, v);
      input.dispatchEvent(new Event('input', { bubbles: true }));
    },
    value,
  );
}

export async function click(page: Page, selector: string): Promise<void> {
  const el = await page.waitForSelector(`${selector}:not([disabled])`);
  await el!.click();
}

/** Waits until the element's text matches `pattern`; answers the text. */
export async function textOf(page: Page, selector: string, pattern: RegExp, timeout = 20_000): Promise<string> {
  await page.waitForFunction(
    (sel, source, flags) => {
      const el = document.querySelector(sel);
      return !!el && new RegExp(source, flags).test(el.textContent ?? '');
    },
    { timeout },
    selector,
    pattern.source,
    pattern.flags,
  );
  return page.$eval(selector, (el) => el.textContent ?? '');
}

/** The texts of every element matching `selector`. */
export function textsOf(page: Page, selector: string): Promise<string[]> {
  return page.$$eval(selector, (els) => els.map((e) => (e.textContent ?? '').trim()));
}

/** The two widths every page is checked at: a desktop and a phone (390 px, an iPhone 12–15). */
export const WIDTHS = [1280, 390] as const;

export async function setWidth(page: Page, width: number): Promise<void> {
  await page.setViewport({ width, height: width > 500 ? 860 : 844, deviceScaleFactor: 1 });
}

/**
 * How far the page scrolls sideways: `document.documentElement.scrollWidth - innerWidth`, and the
 * widest element sticking out, to say what to fix. 0 or less: no horizontal scrolling.
 */
export async function sidewaysOverflow(page: Page): Promise<{ overflow: number; culprit: string | null }> {
  return page.evaluate(() => {
    const overflow = document.documentElement.scrollWidth - innerWidth;
    let culprit: string | null = null;
    if (overflow > 0) {
      let right = innerWidth;
      for (const el of document.querySelectorAll('body *')) {
        const r = el.getBoundingClientRect();
        if (r.right > right) {
          right = r.right;
          culprit = `${el.tagName.toLowerCase()}${el.className ? `.${String(el.className).replace(/ /g, '.')}` : ''}[${el.getAttribute('data-test') ?? ''}] right=${Math.round(r.right)}`;
        }
      }
    }
    return { overflow, culprit };
  });
}

/** Screenshot `<name>-<width>` under test-output/console/. */
export function shoot(page: Page, name: string, width: number): Promise<string> {
  return screenshot(page, `${name}-${width}`);
}

export async function waitFor(check: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 100));
  }
}
