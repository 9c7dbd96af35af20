/**
 * Headless Chromium for the browser suites (docs/console.md "Tests"): Debian's `chromium` package
 * (`.ci/run` installs it when missing), driven by puppeteer-core, which downloads no browser. The
 * binary is `SVC_CHROMIUM` when set, else the first of the usual names on PATH.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { REPO } from './deployment-env.ts';

/** Where the browser suites write their screenshots (gitignored). */
export const SCREENSHOTS = join(REPO, 'test-output/console');

/** The Chromium binary, or an error saying how to install it. */
export function chromiumPath(): string {
  const fromEnv = process.env.SVC_CHROMIUM;
  if (fromEnv) {
    if (!existsSync(fromEnv)) throw new Error(`SVC_CHROMIUM=${fromEnv} does not exist`);
    return fromEnv;
  }
  for (const name of ['chromium', 'chromium-browser', 'google-chrome-stable', 'google-chrome']) {
    try {
      const path = execFileSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' }).trim();
      if (path) return path;
    } catch {
      // not this one
    }
  }
  throw new Error('no Chromium found: install Debian\'s chromium package (apt-get install -y chromium; .ci/run does) or set SVC_CHROMIUM');
}

/** Starts headless Chromium. Root (CI, containers) cannot use Chromium's sandbox. */
export async function launchBrowser(): Promise<Browser> {
  return puppeteer.launch({
    executablePath: chromiumPath(),
    headless: true,
    args: [
      ...(process.getuid?.() === 0 ? ['--no-sandbox'] : []),
      '--disable-dev-shm-usage',
      '--disable-gpu',
      '--no-first-run',
      '--no-default-browser-check',
      '--disable-extensions',
    ],
  });
}

/**
 * A new page of `browser` whose script errors and failed requests are collected in `problems`, so
 * a suite can assert the page had none.
 */
export async function newPage(browser: Browser, problems: string[]): Promise<Page> {
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 860 });
  page.on('pageerror', (err) => problems.push(`page error: ${(err as Error).message}`));
  page.on('console', (m) => {
    // An error answer the page asked for and shows is not a problem of the page; its own errors are.
    if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) problems.push(`console error: ${m.text()}`);
  });
  return page;
}

/** Saves a screenshot of `page` as `<name>.png` under SCREENSHOTS. */
export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  const path = join(SCREENSHOTS, `${name}.png`);
  await page.screenshot({ path: path as `${string}.png`, fullPage: true });
  return path;
}
