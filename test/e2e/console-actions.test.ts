/**
 * What the console does beyond the journey of browser.test.ts (docs/console.md "Tests"), in
 * headless Chromium against the local stack with the built bundle, each result checked over HTTP:
 * renaming a project (list and overview) and deleting one after typing its name; the overview's
 * head as fields and its automation settings; a realtime publish to a channel the feed did not
 * listen to, seen in the feed; storage folders and breadcrumbs, text and image previews, a
 * drag-and-drop upload (a drop event with a DataTransfer), a pending row removed, a bucket
 * force-deleted after typing its name, and a resumable upload that goes on after network errors
 * (requests cut by interception): by itself, then with **Resume**.
 *
 * Needs dist/ (`npm test` builds it first).
 */
import { createHash, randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { crc32, deflateSync } from 'node:zlib';
import { join } from 'node:path';
import type { ElementHandle, HTTPRequest, Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { screenshot } from '../helpers/browser.ts';
import { tempDir } from '../helpers/env.ts';
import { callJson } from '../helpers/http.ts';
import { click, fill, go, settled, signUp, signedInPage, startRig, textOf, textsOf, waitFor, type Account, type ConsoleRig } from './console-helpers.ts';

let rig: ConsoleRig;
let account: Account;
let url: string;
let page: Page;
const problems: string[] = [];
const files = tempDir('svc-console-files-');

/** A PNG of `width` × `height` (RGB, a gradient), written by hand: signature, IHDR, IDAT, IEND (RFC 2083). */
function png(width: number, height: number): Buffer {
  const chunk = (type: string, data: Buffer) => {
    const body = Buffer.concat([Buffer.from(type, 'latin1'), data]);
    const out = Buffer.alloc(12 + data.length);
    out.writeUInt32BE(data.length, 0);
    body.copy(out, 4);
    out.writeUInt32BE(crc32(body), 8 + data.length);
    return out;
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header.set([8, 2, 0, 0, 0], 8);
  const rows = Buffer.alloc(height * (1 + width * 3));
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) rows.set([47 + ((160 * x) / width) | 0, 111, 237 - ((120 * y) / height) | 0], y * (1 + width * 3) + 1 + x * 3);
  }
  return Buffer.concat([Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]), chunk('IHDR', header), chunk('IDAT', deflateSync(rows)), chunk('IEND', Buffer.alloc(0))]);
}

const PNG_WIDTH = 240;
const PNG = png(PNG_WIDTH, 120);

beforeAll(async () => {
  rig = await startRig('svc-console-actions-');
  url = rig.stack.url;
  account = await signUp(url);
  page = await signedInPage(rig.browser, url, account, problems);
}, 120_000);

afterAll(async () => {
  await rig?.stop();
  files.cleanup();
});

const api = (method: string, path: string, body?: unknown, status?: number) => callJson(url, method, path, account.token, body, status);

async function newProject(name: string): Promise<string> {
  return ((await api('POST', '/v0/projects', { name })) as { id: string }).id;
}

async function putObject(projectId: string, bucket: string, key: string, body: Buffer | string, type: string): Promise<void> {
  const r = await fetch(`${url}/v0/projects/${projectId}/storage/objects/${bucket}/${key}`, { method: 'PUT', headers: { authorization: `Bearer ${account.token}`, 'content-type': type }, body: typeof body === 'string' ? body : new Uint8Array(body) });
  expect(r.status).toBeLessThan(300);
}

async function objectBytes(projectId: string, bucket: string, key: string): Promise<Buffer> {
  const r = await fetch(`${url}/v0/projects/${projectId}/storage/objects/${bucket}/${key}`, { headers: { authorization: `Bearer ${account.token}` } });
  expect(r.status).toBe(200);
  return Buffer.from(await r.arrayBuffer());
}

async function keysOf(projectId: string, bucket: string): Promise<string[]> {
  const list = (await api('GET', `/v0/projects/${projectId}/storage/objects?bucket=${bucket}`)) as { objects: { key: string }[] };
  return list.objects.map((o) => o.key);
}

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

describe('projects: rename and delete', () => {
  it('renames from the list and the overview, and deletes only after the name is typed', async () => {
    const id = await newProject('first-name');
    await go(page, '#/projects', 'page-projects');
    await textOf(page, '[data-test=projects-table]', /first-name/);
    await click(page, '[data-test=rename-project]');
    await fill(page, '[data-test=rename-input]', 'second-name');
    await click(page, '[data-test=rename-save]');
    await textOf(page, '[data-test=project-link]', /^second-name$/);
    expect(((await api('GET', `/v0/projects/${id}`)) as { name: string }).name).toBe('second-name');

    await go(page, `#/projects/${id}`, 'page-overview');
    await fill(page, '[data-test=settings] [data-test=rename-input]', 'third-name');
    await click(page, '[data-test=settings] [data-test=rename-save]');
    await textOf(page, '[data-test=page-overview] h1', /third-name/);
    expect(((await api('GET', `/v0/projects/${id}`)) as { name: string }).name).toBe('third-name');

    // Deletion: the button stays disabled until the exact name is typed.
    await click(page, '[data-test=delete-project]');
    await page.waitForSelector('[data-test=confirm-dialog]');
    const ok = async () => page.$eval('[data-test=confirm-ok]', (b) => (b as HTMLButtonElement).disabled);
    expect(await ok()).toBe(true);
    await fill(page, '[data-test=confirm-text]', 'third-nam');
    expect(await ok()).toBe(true);
    await fill(page, '[data-test=confirm-text]', 'third-name');
    expect(await ok()).toBe(false);
    await screenshot(page, 'actions-delete-project');
    await click(page, '[data-test=confirm-ok]');
    await page.waitForSelector('[data-test=page-projects]', { timeout: 30_000 });
    await api('GET', `/v0/projects/${id}`, undefined, 404);
  }, 60_000);
});

describe('overview', () => {
  it('shows head as fields and sets automatic sleep and backups', async () => {
    const id = await newProject('settings');
    await api('POST', `/v0/projects/${id}/wakeup`);
    await go(page, `#/projects/${id}`, 'page-overview');
    await click(page, '[data-test=head]');
    await page.waitForSelector('[data-test=head-fields]');
    expect(await page.$eval('[data-test=head-fields] [data-field=source]', (e) => e.textContent)).toBe('live_probe');
    // The capabilities are the engine's JSON, not base64.
    expect(await page.$eval('[data-test=head-capabilities]', (e) => e.textContent)).toMatch(/sql/);
    expect(await page.$eval('[data-test=head-result]', (e) => e.textContent)).not.toMatch(/body_base64|U1ZDUlNQ/);
    expect(await page.$('[data-test=head-result] pre')).toBeNull();
    await textOf(page, '[data-test=last-backup]', /none/);

    await click(page, '[data-test=auto-sleep-on]');
    await fill(page, '[data-test=auto-sleep-minutes]', '10');
    await click(page, '[data-test=backup-on-sleep]');
    await fill(page, '[data-test=backup-keep]', '3');
    await click(page, '[data-test=automation-save]');
    await page.waitForSelector('[data-test=automation-saved]');
    const p = (await api('GET', `/v0/projects/${id}`)) as { auto_sleep_after_s: number | null; backup: unknown };
    expect(p.auto_sleep_after_s).toBe(600);
    expect(p.backup).toEqual({ on_sleep: true, keep: 3 });
    await screenshot(page, 'actions-overview-settings');
    // Off again.
    await click(page, '[data-test=auto-sleep-on]');
    await click(page, '[data-test=automation-save]');
    await waitFor(async () => ((await api('GET', `/v0/projects/${id}`)) as { auto_sleep_after_s: number | null }).auto_sleep_after_s === null);
  }, 60_000);
});

describe('realtime', () => {
  it('publishing to a channel the feed does not listen to subscribes it first, and the event shows', async () => {
    const id = await newProject('realtime');
    await go(page, `#/projects/${id}/realtime`, 'page-realtime');
    await fill(page, '[data-test=rt-publish-channel]', 'news');
    await textOf(page, '[data-test=rt-publish-note]', /does not listen to news/);
    await fill(page, 'textarea[name=publish_payload]', '{"headline": "first"}');
    await click(page, '[data-test=rt-publish]');
    await textOf(page, '[data-test=rt-status]', /live on system, news/);
    await textOf(page, '[data-test=rt-events]', /\[news\] message.*first/);
    await textOf(page, '[data-test=rt-publish-note]', /listens to news/);
    // Once listened to, the next publish goes straight out.
    await fill(page, 'textarea[name=publish_payload]', '{"headline": "second"}');
    await click(page, '[data-test=rt-publish]');
    await textOf(page, '[data-test=rt-events]', /second/);
    await screenshot(page, 'actions-realtime');
  }, 60_000);
});

describe('storage', () => {
  let id: string;
  let interceptor: ((r: HTTPRequest) => void) | null = null;

  beforeAll(async () => {
    id = await newProject('storage');
    await api('PUT', `/v0/projects/${id}/storage/buckets/files`);
    await putObject(id, 'files', 'top.txt', 'at the top', 'text/plain');
    await putObject(id, 'files', 'docs/readme.md', '# Read me\nplain words', 'text/markdown');
    await putObject(id, 'files', 'docs/deep/inner.json', '{"deep": true}', 'application/json');
    await putObject(id, 'files', 'img/dot.png', PNG, 'image/png');
    await page.setRequestInterception(true);
    page.on('request', (r) => {
      if (r.isInterceptResolutionHandled()) return;
      if (interceptor) interceptor(r);
      else void r.continue();
    });
  });

  it('browses folders with breadcrumbs and previews text and images', async () => {
    await go(page, `#/projects/${id}/storage`, 'page-storage');
    await textOf(page, '[data-test=objects-table]', /top\.txt/);
    expect(await textsOf(page, '[data-test=folder]')).toEqual(['docs/', 'img/']);
    expect(await textsOf(page, '[data-test=object-key]')).toEqual(['top.txt']);

    await click(page, '[data-test=folder]');
    await textOf(page, '[data-test=objects-table]', /readme\.md/);
    expect(await textsOf(page, '[data-test=folder]')).toEqual(['deep/']);
    expect(await textsOf(page, '[data-test=crumb]')).toEqual(['files', 'docs']);
    await click(page, '[data-test=folder]');
    await textOf(page, '[data-test=objects-table]', /inner\.json/);
    expect(await textsOf(page, '[data-test=crumb]')).toEqual(['files', 'docs', 'deep']);
    await click(page, '[data-test=preview-open]');
    expect(await textOf(page, '[data-test=preview-text]', /deep/)).toBe('{"deep": true}');
    // Back up two levels by the breadcrumbs.
    const crumbs = await page.$$('[data-test=crumb]');
    await crumbs[0]!.click();
    await textOf(page, '[data-test=objects-table]', /top\.txt/);
    expect(await page.$('[data-test=preview]')).toBeNull();

    await page.evaluate(() => [...document.querySelectorAll<HTMLButtonElement>('[data-test=folder]')].find((b) => b.textContent === 'img/')?.click());
    await textOf(page, '[data-test=objects-table]', /dot\.png/);
    await click(page, '[data-test=preview-open]');
    const img = await page.waitForSelector('[data-test=preview-image]');
    await page.waitForFunction((el, w) => (el as HTMLImageElement).complete && (el as HTMLImageElement).naturalWidth === w, {}, img, PNG_WIDTH);
    await screenshot(page, 'actions-storage-preview');
  }, 60_000);

  it('uploads what is dropped on the panel into the folder being browsed', async () => {
    await page.waitForSelector('[data-test=crumb]');
    await page.evaluate(() => [...document.querySelectorAll<HTMLButtonElement>('[data-test=crumb]')][0]!.click());
    await textOf(page, '[data-test=objects-table]', /top\.txt/);
    await page.evaluate(() => [...document.querySelectorAll<HTMLButtonElement>('[data-test=folder]')].find((b) => b.textContent === 'docs/')!.click());
    await textOf(page, '[data-test=objects-table]', /readme\.md/);
    await page.evaluate(() => {
      const dt = new DataTransfer();
      dt.items.add(new File(['dropped words'], 'dropped.txt', { type: 'text/plain' }));
      dt.items.add(new File([new Uint8Array([1, 2, 3])], 'second.bin', { type: '' }));
      const zone = document.querySelector('[data-test=drop-zone]')!;
      zone.dispatchEvent(new DragEvent('dragenter', { bubbles: true, cancelable: true, dataTransfer: dt }));
      zone.dispatchEvent(new DragEvent('dragover', { bubbles: true, cancelable: true, dataTransfer: dt }));
      zone.dispatchEvent(new DragEvent('drop', { bubbles: true, cancelable: true, dataTransfer: dt }));
    });
    await textOf(page, '[data-test=objects-table]', /dropped\.txt/);
    await textOf(page, '[data-test=objects-table]', /second\.bin/);
    expect((await objectBytes(id, 'files', 'docs/dropped.txt')).toString()).toBe('dropped words');
    expect([...(await objectBytes(id, 'files', 'docs/second.bin'))]).toEqual([1, 2, 3]);
    await screenshot(page, 'actions-storage-dropped');
  }, 60_000);

  it('removes a pending row, and force-deletes a bucket holding one after its name is typed', async () => {
    await api('POST', `/v0/projects/${id}/storage/uploads`, { bucket: 'files', key: 'docs/never.bin' });
    await page.evaluate(() => [...document.querySelectorAll<HTMLButtonElement>('[data-test=crumb]')].at(-1)!.click());
    await page.waitForSelector('[data-test=pending-row]');
    expect(await page.$eval('[data-test=pending-row] [data-test=object-key]', (e) => e.textContent)).toBe('never.bin');
    await screenshot(page, 'actions-storage-pending');
    await click(page, '[data-test=remove-pending]');
    await page.waitForSelector('[data-test=confirm-dialog]');
    await click(page, '[data-test=confirm-ok]');
    await page.waitForSelector('[data-test=pending-row]', { hidden: true });
    expect(await keysOf(id, 'files')).not.toContain('docs/never.bin');

    // A bucket that holds an object and a pending row: refused unless forced, and forced here.
    await api('PUT', `/v0/projects/${id}/storage/buckets/scratch`);
    await putObject(id, 'scratch', 'a.txt', 'a', 'text/plain');
    await api('POST', `/v0/projects/${id}/storage/uploads`, { bucket: 'scratch', key: 'pending.bin' });
    await go(page, `#/projects/${id}`, 'page-overview');
    await go(page, `#/projects/${id}/storage`, 'page-storage');
    // The bucket list arrives after the page: wait until it offers the new bucket.
    await waitFor(async () => (await page.$$eval('[data-test=bucket-select] option', (os) => os.map((o) => o.textContent))).includes('scratch'));
    await page.select('[data-test=bucket-select]', 'scratch');
    await textOf(page, '[data-test=objects-table]', /pending\.bin/);
    await click(page, '[data-test=delete-bucket]');
    await page.waitForSelector('[data-test=confirm-dialog]');
    expect(await page.$eval('[data-test=confirm-ok]', (b) => (b as HTMLButtonElement).disabled)).toBe(true);
    await fill(page, '[data-test=confirm-text]', 'scratch');
    await click(page, '[data-test=confirm-ok]');
    await waitFor(async () => !(await page.$$eval('[data-test=bucket-select] option', (os) => os.map((o) => o.textContent))).includes('scratch'));
    const buckets = (await api('GET', `/v0/projects/${id}/storage/buckets`)) as { buckets: { name: string }[] };
    expect(buckets.buckets.map((b) => b.name)).toEqual(['files']);
  }, 60_000);

  /** Uploads a file of `size` random bytes named `name` through the file field; answers its bytes. */
  async function chooseAndUpload(name: string, size: number): Promise<Buffer> {
    const bytes = randomBytes(size);
    const path = join(files.dir, name);
    writeFileSync(path, bytes);
    const input = (await page.waitForSelector('[data-test=upload-file]')) as ElementHandle<HTMLInputElement>;
    await input.uploadFile(path);
    await click(page, '[data-test=upload]');
    return bytes;
  }

  const isPatch = (r: HTTPRequest) => r.method() === 'PATCH' && r.url().includes('/storage/resumable/');

  it('uploads a large file resumably with a progress bar, going on after a network error by itself', async () => {
    await page.waitForSelector('[data-test=crumb]');
    await page.evaluate(() => [...document.querySelectorAll<HTMLButtonElement>('[data-test=crumb]')][0]!.click());
    await textOf(page, '[data-test=objects-table]', /top\.txt/);
    // The second piece's first attempt is cut; the upload sends it again.
    let patches = 0;
    let cut = 0;
    interceptor = (r) => {
      if (isPatch(r) && ++patches === 2) {
        cut++;
        void r.abort('connectionreset');
      } else void r.continue();
    };
    const bytes = await chooseAndUpload('big.bin', 20 * 1024 * 1024);
    await page.waitForSelector('[data-test=upload-item][data-via=resumable]');
    await page.waitForSelector('[data-test=upload-item][data-state=done]', { timeout: 60_000 });
    interceptor = null;
    expect(cut).toBe(1);
    expect(patches).toBeGreaterThanOrEqual(4);
    await textOf(page, '[data-test=objects-table]', /big\.bin/);
    expect(sha256(await objectBytes(id, 'files', 'big.bin'))).toBe(sha256(bytes));
    await screenshot(page, 'actions-storage-resumable');
  }, 90_000);

  it('keeps a resumable upload whose retries ran out, and Resume finishes it from where it stopped', async () => {
    let pass = 1;
    let patches = 0;
    const offsets: string[] = [];
    interceptor = (r) => {
      if (!isPatch(r)) return void r.continue();
      patches++;
      // The first piece goes through; every later one is cut until the test lets them pass.
      if (patches > 1 && pass === 1) return void r.abort('connectionreset');
      offsets.push(r.headers()['upload-offset'] ?? '?');
      void r.continue();
    };
    const bytes = await chooseAndUpload('resumed.bin', 18 * 1024 * 1024);
    await page.waitForSelector('[data-test=upload-resume]', { timeout: 60_000 });
    expect(await page.$eval('[data-test=upload-item][data-state=failed] [data-test=error-code]', (e) => e.textContent)).toBe('network_error');
    await screenshot(page, 'actions-storage-resume');
    pass = 2;
    await click(page, '[data-test=upload-resume]');
    await page.waitForSelector('[data-test=upload-item][data-state=done]', { timeout: 60_000 });
    interceptor = null;
    // It went on from the first piece's end, not from the start.
    expect(offsets[0]).toBe('0');
    expect(offsets[1]).toBe(String(8 * 1024 * 1024));
    expect(sha256(await objectBytes(id, 'files', 'resumed.bin'))).toBe(sha256(bytes));
    await settled(page);
    expect(problems.filter((p) => !/ERR_CONNECTION_RESET|net::/.test(p))).toEqual([]);
  }, 120_000);
});
