/**
 * Helpers of the lifecycle suites: projects through the public API, direct engine SQL, fake
 * engine binaries (tests point `SVCD_ENGINE_BIN` at them), and process probes.
 */
import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import { REPO } from './env.ts';
import { decodeEnvelope } from './envelope.ts';
import type { TestService } from './service.ts';

/** The real engine shim. */
export const ENGINE = join(REPO, 'bin/svc-engine');

/** Anything with the public API's request function (in-process app or the child-agent harness). */
export interface Api {
  request: TestService['request'];
}

/** Creates a project and answers its id. */
export async function createProject(api: Api, token: string, name = 'lifecycle'): Promise<string> {
  const r = await api.request('POST', '/v0/projects', { token, body: { name } });
  expect(r.status, await r.clone().text()).toBe(201);
  return ((await r.json()) as { id: string }).id;
}

/** Calls a route and answers status and parsed JSON body. */
export async function call(api: Api, method: string, path: string, token: string, body?: unknown): Promise<{ status: number; body: any }> {
  const r = await api.request(method, path, { token, body });
  const text = await r.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // Left as text.
  }
  return { status: r.status, body: parsed };
}

/** POST wakeup, expecting 200 running. */
export async function wake(api: Api, token: string, id: string): Promise<any> {
  const r = await call(api, 'POST', `/v0/projects/${id}/wakeup`, token);
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  expect(r.body.state).toBe('running');
  return r.body;
}

/** POST sleep, expecting 200 sleeping. */
export async function sleep(api: Api, token: string, id: string): Promise<any> {
  const r = await call(api, 'POST', `/v0/projects/${id}/sleep`, token);
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  expect(r.body.state).toBe('sleeping');
  return r.body;
}

/** Creates a project, wakes it and fills its table `t` with `rows`; answers its id (left running). */
export async function newProjectWithRows(api: Api, token: string, rows: string[], name = 'crash'): Promise<string> {
  const id = await createProject(api, token, name);
  await wake(api, token, id);
  const address = (await call(api, 'GET', `/v0/projects/${id}/head`, token)).body.endpoint.address;
  await engineSql(address, 'CREATE TABLE t (v TEXT)');
  for (const v of rows) await engineSql(address, 'INSERT INTO t VALUES (?)', [v]);
  return id;
}

/** Wakes the project and answers the rows of its table `t`, proving its data directory intact (left running). */
export async function rowsOf(api: Api, token: string, id: string): Promise<string[]> {
  await wake(api, token, id);
  const address = (await call(api, 'GET', `/v0/projects/${id}/head`, token)).body.endpoint.address;
  const read = await engineSql(address, 'SELECT v FROM t ORDER BY rowid');
  expect(read.status, JSON.stringify(read.body)).toBe(200);
  return read.body.results[0].rows.map((row: string[]) => row[0]);
}

/** Runs SQL directly against an engine listening on `address` (host:port), answering the decoded body. */
export async function engineSql(address: string, sql: string, params: unknown[] = []): Promise<{ status: number; body: any }> {
  const r = await fetch(`http://${address}/v2/sql`, {
    method: 'POST',
    headers: { 'x-svc-protocol-minor': '3', 'content-type': 'application/json' },
    body: JSON.stringify({ sql, params }),
  });
  return { status: r.status, body: decodeEnvelope(new Uint8Array(await r.arrayBuffer())) };
}

/** True while `pid` exists. */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Polls `check` until it is truthy or `ms` passed; answers the last value. */
export async function waitFor<T>(check: () => T | Promise<T>, ms = 5000, every = 10): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value || Date.now() > until) return value;
    await new Promise((r) => setTimeout(r, every));
  }
}

/**
 * Writes an executable fake engine into `dir`: `version` answers `version` and `protocolMinor`
 * (default the pin), each command named in `commands` first runs its shell (which may `exec` to take
 * over), and everything else is delegated to the real engine. Rewriting the same path swaps the fake
 * under a running agent.
 */
export function fakeEngine(
  dir: string,
  name: string,
  options: { version?: string; protocolMinor?: number; commands?: Record<string, string>; serve?: string },
): string {
  const path = join(dir, name);
  const version = options.version ?? '3.0.0';
  const commands = { ...options.commands, ...(options.serve === undefined ? {} : { serve: options.serve }) };
  const branches = Object.entries(commands)
    .map(([command, shell]) => `if [ "$1" = ${command} ]; then\n${shell}\nfi\n`)
    .join('');
  const script = `#!/bin/sh
if [ "$1" = version ]; then echo '{"engine_version":"${version}","protocol_minor":${options.protocolMinor ?? 3}}'; exit 0; fi
${branches}exec "${ENGINE}" "$@"
`;
  writeFileSync(path, script);
  chmodSync(path, 0o755);
  // A root agent runs engines as their own user (docs/lifecycle.md "Engine isolation"): it must reach the fake.
  chmodSync(dir, 0o755);
  return path;
}
