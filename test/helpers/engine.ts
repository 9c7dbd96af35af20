/**
 * Test helpers for the reference engine: run it only as a program (bin/svc-engine), the way the host
 * agent does, and read its answers from the wire. Nothing here imports engine code, so the envelope
 * and the CLI documents are checked against the contract, not against the engine's own encoder.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { decodeEnvelope } from './envelope.ts';

export const ENGINE_BIN = fileURLToPath(new URL('../../bin/svc-engine', import.meta.url));
export const PROTOCOL = { 'x-svc-protocol-minor': '3' } as const;
export const CONTENT_TYPE = 'application/vnd.svc.product-v1';
export const REQUEST_ID = /^req_[0-9a-f]{16}$/;

/** What a finished CLI command printed and returned. */
export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  json: any;
  stdout: string;
  stderr: string;
}

const children = new Set<ChildProcess>();
const dirs = new Set<string>();

/** A fresh directory under the OS temp dir, removed by {@link cleanup}. */
export async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'svc-engine-test-'));
  dirs.add(dir);
  return dir;
}

/** Kills every engine still running (SIGKILL) and removes every temp dir; call in afterAll. */
export async function cleanup(): Promise<void> {
  await Promise.all(
    [...children].map(
      (child) =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) return resolve();
          child.once('exit', () => resolve());
          child.kill('SIGKILL');
        }),
    ),
  );
  children.clear();
  await Promise.all([...dirs].map((d) => rm(d, { recursive: true, force: true })));
  dirs.clear();
}

function track(child: ChildProcess): void {
  children.add(child);
  child.once('exit', () => children.delete(child));
}

/**
 * Runs `svc-engine args...` to completion. The contract: stdout holds exactly one line, a JSON
 * document; this parses it (and fails loudly when there is not exactly one).
 */
export function cli(args: string[]): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(ENGINE_BIN, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    track(child);
    let stdout = '';
    let stderr = '';
    child.stdout?.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr?.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code, signal) => {
      const lines = stdout.split('\n').filter((l) => l !== '');
      if (lines.length !== 1) {
        reject(new Error(`expected one JSON line on stdout from ${args.join(' ')}, got ${JSON.stringify(stdout)}; stderr ${stderr}`));
        return;
      }
      let json: unknown;
      try {
        json = JSON.parse(lines[0] as string);
      } catch {
        reject(new Error(`stdout is not JSON: ${stdout}`));
        return;
      }
      resolve({ code, signal, json, stdout, stderr });
    });
  });
}

/** A running `svc-engine serve`. */
export interface Engine {
  proc: ChildProcess;
  port: number;
  base: string;
  dataDir: string;
  ready: any;
  /** Resolves with how the process ended. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stderr(): string;
}

/** What a serve that refused to start printed. */
export class ServeRefused extends Error {
  readonly code: number | null;
  readonly json: any;

  constructor(code: number | null, json: any) {
    super(`serve exited ${code}: ${JSON.stringify(json)}`);
    this.code = code;
    this.json = json;
  }
}

/** Starts `serve --listen 127.0.0.1:0` and resolves after its ready line; rejects if it exits first. */
export function startEngine(dataDir: string, extra: string[] = []): Promise<Engine> {
  return new Promise((resolve, reject) => {
    const proc = spawn(ENGINE_BIN, ['serve', '--data-dir', dataDir, '--listen', '127.0.0.1:0', ...extra], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    track(proc);
    let stdout = '';
    let stderr = '';
    let settled = false;
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((res) =>
      proc.once('exit', (code, signal) => res({ code, signal })),
    );
    const timer = setTimeout(() => {
      if (settled) return;
      settled = true;
      proc.kill('SIGKILL');
      reject(new Error(`serve did not get ready in 10 s; stderr ${stderr}`));
    }, 10_000);
    proc.stderr?.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    proc.stdout?.setEncoding('utf8').on('data', (d: string) => {
      stdout += d;
      const nl = stdout.indexOf('\n');
      if (nl < 0 || settled) return;
      settled = true;
      clearTimeout(timer);
      const ready = JSON.parse(stdout.slice(0, nl));
      if (ready.ready !== true) {
        // A refusal is the one document serve prints; report it with the exit code.
        void exited.then(({ code }) => reject(new ServeRefused(code, ready)));
        return;
      }
      const port = Number(String(ready.listen).split(':').pop());
      resolve({ proc, port, base: `http://127.0.0.1:${port}`, dataDir, ready, exited, stderr: () => stderr });
    });
    void exited.then(({ code }) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      let json: unknown = null;
      try {
        json = JSON.parse(stdout.trim());
      } catch {
        json = stdout;
      }
      reject(new ServeRefused(code, json));
    });
  });
}

/** Sends a signal and waits for the process to end. */
export async function stopEngine(engine: Engine, signal: NodeJS.Signals = 'SIGTERM') {
  engine.proc.kill(signal);
  return engine.exited;
}

/** `init` into a fresh temp dir; returns the data dir and init's output. */
export async function initDataDir(): Promise<{ dataDir: string; init: CliResult }> {
  const dataDir = join(await tempDir(), 'data');
  const init = await cli(['init', '--data-dir', dataDir, '--json']);
  if (init.code !== 0) throw new Error(`init failed: ${init.stdout}`);
  return { dataDir, init };
}

/** A decoded `/v2` answer. */
export interface Answer {
  status: number;
  headers: Headers;
  body: any;
}

/** Calls the engine over HTTP and decodes the envelope (every answer must be one, errors included). */
export async function call(
  engine: Engine,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = PROTOCOL,
): Promise<Answer> {
  const init: RequestInit = { method, headers: { ...headers } };
  if (body !== undefined) init.body = typeof body === 'string' ? body : JSON.stringify(body);
  const res = await fetch(`${engine.base}${path}`, init);
  const raw = Buffer.from(await res.arrayBuffer());
  return { status: res.status, headers: res.headers, body: decodeEnvelope(raw) };
}

/** POST /v2/sql expecting 200; returns the decoded body. */
export async function sql(engine: Engine, body: unknown): Promise<any> {
  const answer = await call(engine, 'POST', '/v2/sql', body);
  if (answer.status !== 200) throw new Error(`sql ${JSON.stringify(body)} → ${answer.status} ${JSON.stringify(answer.body)}`);
  return answer.body;
}

/** SHA-256 hex of a file. */
export async function sha256File(path: string): Promise<string> {
  return createHash('sha256').update(await readFile(path)).digest('hex');
}
