/**
 * The service in a real browser (docs/console.md "Tests"): headless Chromium (Debian's package,
 * test/helpers/browser.ts) against the local stack with the built handlers bundle.
 *
 * 1. The console journey: sign up → create a project → wake it up → create a table and insert rows
 *    in the SQL editor → see `project.running` in the live view → upload a 5 MiB file and download it
 *    back → set a secret → snapshot after sleep → restore → deploy, invoke and read the logs of a
 *    function, with a screenshot of every page in test-output/console/.
 * 2. A page on another origin (a second local port) calls `/v0` and `/v2` and subscribes with a
 *    ticket through EventSource (docs/api.md "Browsers and CORS"; docs/realtime.md "Browsers: tickets").
 *
 * Needs dist/ (`npm test` builds it first).
 */
import { createHash, randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { readFileSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { Browser, Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stack } from '../../infra/local/stack.ts';
import { newPage, screenshot } from '../helpers/browser.ts';
import { tempDir } from '../helpers/env.ts';
import { callJson } from '../helpers/http.ts';
import { click, fill, startRig, textOf, waitFor, type ConsoleRig } from './console-helpers.ts';

let rig: ConsoleRig;
let stack: Stack;
let browser: Browser;

beforeAll(async () => {
  rig = await startRig('svc-browser-');
  ({ stack, browser } = rig);
}, 120_000);
afterAll(async () => {
  await rig?.stop();
});

async function tab(page: Page, name: string): Promise<void> {
  await click(page, `[data-test=tab-${name}]`);
  await page.waitForSelector(`[data-test=page-${name}]`);
}

describe('the console in headless Chromium', () => {
  it('takes a new user from sign-up to a restored snapshot', async () => {
    const problems: string[] = [];
    const page = await newPage(browser, problems);
    const downloads = tempDir('svc-browser-dl-');
    const cdp = await page.createCDPSession();
    await cdp.send('Browser.setDownloadBehavior', { behavior: 'allow', downloadPath: downloads.dir });

    // Sign up: the secret is shown once, the session kept in the tab.
    await page.goto(`${stack.url}/console`);
    await page.waitForSelector('[data-test=page-signin]');
    await screenshot(page, '01-signin');
    await click(page, '[data-test=to-signup]');
    await fill(page, 'input[name=name]', 'Ada');
    await screenshot(page, '02-signup');
    await click(page, '[data-test=signup-submit]');
    const accountId = await textOf(page, '[data-test=account-id]', /^acct_[0-9a-f]{16}$/);
    const accountSecret = await textOf(page, '[data-test=account-secret]', /^acs_/);
    expect(accountSecret).toMatch(/^acs_[0-9a-f]{64}$/);
    await screenshot(page, '03-signed-up');
    await click(page, '[data-test=signup-continue]');

    // Projects: none yet; create one. The session is the tab's: a reload keeps it.
    await page.waitForSelector('[data-test=page-projects]');
    await page.reload();
    await page.waitForSelector('[data-test=page-projects]');
    expect(await textOf(page, '[data-test=who]', /acct_/)).toBe(accountId);
    await fill(page, 'input[name=project_name]', 'journey');
    await click(page, '[data-test=create-project]');
    await page.waitForSelector('[data-test=page-overview]');
    const projectId = await textOf(page, '[data-test=project-id]', /^prj_/);
    expect(await textOf(page, '[data-test=project-state]', /./)).toBe('stopped');

    // The live view listens to `system` while the project wakes up on the overview.
    await tab(page, 'realtime');
    await fill(page, '[data-test=rt-channels]', 'system, chat');
    await click(page, '[data-test=rt-connect]');
    await textOf(page, '[data-test=rt-status]', /live on system, chat/);
    await tab(page, 'overview');
    await click(page, '[data-test=wakeup]');
    await textOf(page, '[data-test=project-state]', /^running$/);
    await click(page, '[data-test=head]');
    await textOf(page, '[data-test=head-result]', /live_probe/);
    await screenshot(page, '04-overview');

    // Keys: a new key shown once, then revoked after a confirmation.
    await tab(page, 'keys');
    await fill(page, 'input[name=key_label]', 'ci');
    await click(page, '[data-test=create-key]');
    expect(await textOf(page, '[data-test=new-key-value]', /^svc1_/)).toMatch(/^svc1_[0-9a-f]{32}_[0-9a-f]{64}$/);
    await screenshot(page, '05-keys');
    await click(page, '[data-test=dismiss-key]');
    await click(page, '[data-test=revoke-key]');
    await page.waitForSelector('[data-test=confirm-dialog]');
    await screenshot(page, '06-keys-revoke');
    await click(page, '[data-test=confirm-ok]');
    await textOf(page, '[data-test=keys-table]', /revoked/);

    // SQL editor: a key for the tab, a table, rows, a result table, and the engine's own error.
    await tab(page, 'sql');
    await click(page, '[data-test=sql-create-key]');
    await fill(page, '[data-test=sql-input]', "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT);\nINSERT INTO notes (body) VALUES ('hello'), ('world');\nSELECT id, body FROM notes ORDER BY id;");
    await click(page, '[data-test=sql-run]');
    await textOf(page, '[data-test=sql-results]', /3 statements/);
    expect(await page.$$eval('[data-test=sql-table] tbody tr', (rows) => rows.map((r) => r.textContent))).toEqual(['1hello', '2world']);
    expect(await page.$$eval('[data-test=sql-affected]', (els) => els.map((e) => e.textContent))).toEqual(['OK · 0 rows affected', 'OK · 2 rows affected · last rowid 2']);
    await screenshot(page, '07-sql');
    await fill(page, '[data-test=sql-input]', 'SELECT * FROM missing_table');
    await click(page, '[data-test=sql-run]');
    expect(await textOf(page, '[data-test=error-code]', /./)).toBe('sql_error');
    expect(await textOf(page, '[data-test=error-message]', /missing_table/)).toContain('no such table');

    // The live view saw the wake-up; a published event arrives too.
    await tab(page, 'realtime');
    await textOf(page, '[data-test=rt-events]', /project\.running/);
    await click(page, '[data-test=rt-publish]');
    await textOf(page, '[data-test=rt-events]', /\[chat\] message/);
    await screenshot(page, '08-realtime');

    // Storage: a bucket, a 5 MiB upload with its progress bar, and the same bytes downloaded back.
    await tab(page, 'storage');
    await fill(page, 'input[name=bucket_name]', 'files');
    await click(page, '[data-test=create-bucket]');
    await page.waitForSelector('[data-test=objects]');
    const bytes = randomBytes(5 * 1024 * 1024);
    const sha256 = createHash('sha256').update(bytes).digest('hex');
    const file = join(downloads.dir, 'upload.bin');
    writeFileSync(file, bytes);
    const input = await page.waitForSelector('[data-test=upload-file]');
    await (input as unknown as { uploadFile(path: string): Promise<void> }).uploadFile(file);
    await fill(page, 'input[name=object_key]', 'big/five.bin');
    await click(page, '[data-test=upload]');
    await page.waitForSelector('[data-test=progress]');
    // The upload went into the folder big/, which the listing then shows.
    await textOf(page, '[data-test=object-key]', /five\.bin/);
    await screenshot(page, '09-storage');
    await click(page, '[data-test=download]');
    expect(await textOf(page, '[data-test=downloaded-sha256]', /^[0-9a-f]{64}$/)).toBe(sha256);
    await textOf(page, '[data-test=downloaded]', /matches the stored checksum/);
    const saved = join(downloads.dir, 'five.bin');
    await waitFor(() => {
      try {
        return createHash('sha256').update(readFileSync(saved)).digest('hex') === sha256;
      } catch {
        return false;
      }
    });

    // Secrets: set one; its value is never on the page.
    await tab(page, 'secrets');
    const value = `sk_live_${randomBytes(12).toString('hex')}`;
    await fill(page, 'input[name=secret_name]', 'STRIPE_KEY');
    await fill(page, 'input[name=secret_value]', value);
    await click(page, '[data-test=set-secret]');
    await textOf(page, '[data-test=secret-saved]', /STRIPE_KEY created/);
    expect(await textOf(page, '[data-test=secret-name]', /./)).toBe('STRIPE_KEY');
    expect(await page.content()).not.toContain(value);
    await screenshot(page, '10-secrets');

    // Snapshots: refused while running (its code shown), taken after sleep, then restored.
    await tab(page, 'snapshots');
    await click(page, '[data-test=create-snapshot]');
    expect(await textOf(page, '[data-test=error-code]', /./)).toBe('tenant_running');
    await click(page, '[data-test=snapshots-sleep]');
    await page.waitForSelector('[data-test=snapshots-sleep]', { hidden: true, timeout: 20_000 });
    await fill(page, 'input[name=snapshot_label]', 'two notes');
    await click(page, '[data-test=create-snapshot]');
    const snapshotId = await textOf(page, '[data-test=snapshot-id]', /^snap_/);
    await screenshot(page, '11-snapshots');
    // A third note after the snapshot, which the restore takes back.
    await tab(page, 'overview');
    await click(page, '[data-test=wakeup]');
    await textOf(page, '[data-test=project-state]', /^running$/);
    await tab(page, 'sql');
    await fill(page, '[data-test=sql-input]', "INSERT INTO notes (body) VALUES ('after the snapshot')");
    await click(page, '[data-test=sql-run]');
    await textOf(page, '[data-test=sql-affected]', /1 row affected/);
    await tab(page, 'snapshots');
    await click(page, '[data-test=snapshots-sleep]');
    await page.waitForSelector('[data-test=snapshots-sleep]', { hidden: true, timeout: 20_000 });
    await click(page, '[data-test=restore-snapshot]');
    await page.waitForSelector('[data-test=confirm-dialog]');
    await screenshot(page, '12-restore-confirm');
    await click(page, '[data-test=confirm-ok]');
    expect(await textOf(page, '[data-test=restored]', /Restored snapshot/)).toContain(snapshotId);
    await screenshot(page, '13-restored');
    await tab(page, 'overview');
    await click(page, '[data-test=wakeup]');
    await textOf(page, '[data-test=project-state]', /^running$/);
    await tab(page, 'sql');
    await fill(page, '[data-test=sql-input]', 'SELECT count(*) AS notes FROM notes');
    await click(page, '[data-test=sql-run]');
    await textOf(page, '[data-test=sql-row-count]', /^1 row$/);
    expect(await page.$$eval('[data-test=sql-table] tbody tr', (rows) => rows.map((r) => r.textContent))).toEqual(['2']);

    // Functions: deploy a module file, invoke it (it sees the secret), read what it logged.
    await tab(page, 'functions');
    const module = join(downloads.dir, 'hello.mjs');
    writeFileSync(
      module,
      "export default { async fetch(request, env) { console.log('hello called'); return new Response(`hi from ${env.FUNCTION_NAME}, STRIPE_KEY ${env.STRIPE_KEY ? 'set' : 'missing'}`); } };\n",
    );
    await fill(page, 'input[name=function_name]', 'hello');
    const moduleInput = await page.waitForSelector('[data-test=function-file]');
    await (moduleInput as unknown as { uploadFile(path: string): Promise<void> }).uploadFile(module);
    await click(page, '[data-test=deploy-function]');
    await textOf(page, '[data-test=function-name]', /^hello$/);
    await click(page, '[data-test=function-invoke]');
    await click(page, '[data-test=invoke-run]');
    expect(await textOf(page, '[data-test=invoke-answer]', /^200/)).toContain('hi from hello, STRIPE_KEY set');
    await waitFor(async () => {
      await click(page, '[data-test=function-logs]');
      return /hello called/.test(await page.$eval('body', (b) => b.textContent ?? ''));
    });
    await screenshot(page, '14-functions');

    // Receipts of what the journey changed.
    await tab(page, 'receipts');
    await textOf(page, '[data-test=receipts-table]', /secret\.put/);
    expect(await page.$$eval('[data-test=receipt-op]', (els) => els.map((e) => e.textContent))).toEqual(expect.arrayContaining(['object.put', 'secret.put']));
    await screenshot(page, '15-receipts');
    await click(page, '[data-test=nav-projects]');
    await textOf(page, '[data-test=projects-table]', /journey/);
    await screenshot(page, '16-projects');

    // Sign out, and back in with the account id and secret shown at sign-up.
    await click(page, '[data-test=sign-out]');
    await page.waitForSelector('[data-test=page-signin]');
    await fill(page, 'input[name=account_id]', accountId);
    await fill(page, 'input[name=account_secret]', accountSecret);
    await click(page, '[data-test=signin-submit]');
    await textOf(page, '[data-test=projects-table]', /journey/);

    expect(problems).toEqual([]);
    expect(projectId).toMatch(/^prj_[0-9a-f]{16}$/);
    await page.close();
    downloads.cleanup();
  }, 120_000);
});

describe('a page on another origin', () => {
  let other: Server;
  let origin: string;

  beforeAll(async () => {
    // The page is the test's own, served from a second local port: another origin than the stack's.
    other = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end('<!doctype html><title>another origin</title><p>an app on another origin</p>');
    });
    await new Promise<void>((r) => other.listen(0, '127.0.0.1', () => r()));
    origin = `http://127.0.0.1:${(other.address() as AddressInfo).port}`;
  });
  // The browser keeps its connections alive: close them, or close() waits for them.
  afterAll(
    () =>
      new Promise<void>((r) => {
        other.close(() => r());
        other.closeAllConnections();
      }),
  );

  it('calls /v0 and /v2, reads errors and headers, and subscribes with a ticket', async () => {
    // Setup over HTTP from the test: an account, a running project and a key.
    const { token } = (await callJson(stack.url, 'POST', '/v0/signup', undefined, {})) as { token: string };
    const { id: project } = (await callJson(stack.url, 'POST', '/v0/projects', token, { name: 'cors' })) as { id: string };
    await callJson(stack.url, 'POST', `/v0/projects/${project}/wakeup`, token);
    const { key } = (await callJson(stack.url, 'POST', `/v0/projects/${project}/keys`, token, {})) as { key: string };

    const problems: string[] = [];
    const page = await newPage(browser, problems);
    await page.goto(origin);
    const result = await page.evaluate(
      async (base, token, key, project) => {
        const auth = { authorization: `Bearer ${token}` };
        const out: Record<string, unknown> = { origin: location.origin };
        // /v0 with a session: a preflighted GET, the answer and its request id readable.
        const got = await fetch(`${base}/v0/projects/${project}`, { headers: auth });
        out.project = { status: got.status, state: ((await got.json()) as { state: string }).state, requestId: got.headers.get('x-request-id') };
        // An error answer is readable too: the envelope, the challenge and the request id.
        const denied = await fetch(`${base}/v0/projects/${project}`, { headers: { authorization: 'Bearer nope' } });
        out.denied = { status: denied.status, body: await denied.json(), challenge: denied.headers.get('www-authenticate'), requestId: denied.headers.get('x-request-id') };
        // An unknown route: its preflight passes, its 404 envelope is readable.
        const unknown = await fetch(`${base}/v0/nowhere`, { method: 'DELETE', headers: auth });
        out.unknown = { status: unknown.status, body: await unknown.json() };
        // /v2 with a key: the engine's envelope and its headers.
        const sql = await fetch(`${base}/v2/sql`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'x-svc-protocol-minor': '3', 'content-type': 'application/json' },
          body: JSON.stringify({ sql: 'SELECT 41 + 1 AS answer' }),
        });
        const bytes = new Uint8Array(await sql.arrayBuffer());
        out.sql = {
          status: sql.status,
          magic: new TextDecoder().decode(bytes.slice(0, 8)),
          body: new TextDecoder().decode(bytes.slice(12)),
          engineRequestId: sql.headers.get('x-svc-request-id'),
          minor: sql.headers.get('x-svc-protocol-minor'),
        };
        const v2denied = await fetch(`${base}/v2/sql`, { method: 'POST', headers: { 'x-svc-protocol-minor': '3' }, body: '{}' });
        out.v2denied = { status: v2denied.status, body: await v2denied.json() };
        // Subscribe: a ticket, then EventSource (which cannot send Authorization) with it in the URL.
        const ticketAnswer = await fetch(`${base}/v0/projects/${project}/realtime/tickets`, {
          method: 'POST',
          headers: { ...auth, 'content-type': 'application/json' },
          body: JSON.stringify({ channels: ['cors'] }),
        });
        const ticket = (await ticketAnswer.json()) as { subscribe_url: string };
        out.event = await new Promise((resolve, reject) => {
          const source = new EventSource(`${base}${ticket.subscribe_url}`);
          const timer = setTimeout(() => reject(new Error('no event within 10 s')), 10_000);
          source.addEventListener('hello', (e) => {
            clearTimeout(timer);
            source.close();
            resolve(JSON.parse((e as MessageEvent<string>).data));
          });
          source.onopen = () =>
            void fetch(`${base}/v0/projects/${project}/realtime/publish`, {
              method: 'POST',
              headers: { ...auth, 'content-type': 'application/json' },
              body: JSON.stringify({ channel: 'cors', event: 'hello', payload: { from: location.origin } }),
            });
          source.onerror = () => {
            clearTimeout(timer);
            source.close();
            reject(new Error('the event stream failed'));
          };
        });
        // The used ticket opens nothing again.
        const again = await fetch(`${base}${ticket.subscribe_url}`);
        out.again = { status: again.status, body: await again.json() };
        return out;
      },
      stack.url,
      token,
      key,
      project,
    );

    expect(result.origin).toBe(origin);
    expect(result.project).toMatchObject({ status: 200, state: 'running' });
    expect((result.project as { requestId: string }).requestId).toMatch(/^req_/);
    expect(result.denied).toMatchObject({ status: 401, body: { error: { code: 'authentication_required' } }, challenge: 'Bearer realm="svc-cloud"' });
    expect((result.denied as { requestId: string }).requestId).toMatch(/^req_/);
    expect(result.unknown).toMatchObject({ status: 404, body: { error: { code: 'not_found' } } });
    expect(result.sql).toMatchObject({ status: 200, magic: 'SVCRSP01', minor: '3' });
    expect((result.sql as { body: string }).body).toContain('42');
    expect((result.sql as { engineRequestId: string }).engineRequestId).toBeTruthy();
    expect(result.v2denied).toMatchObject({ status: 401, body: { error: { code: 'authentication_required' } } });
    expect(result.event).toMatchObject({ channel: 'cors', event: 'hello', payload: { from: origin } });
    expect(result.again).toMatchObject({ status: 401, body: { error: { code: 'authentication_required' } } });
    expect(problems).toEqual([]);
    await page.close();
  }, 60_000);
});
