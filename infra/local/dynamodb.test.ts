/**
 * DynamoDB Local listens on loopback only (docs/local-stack.md "DynamoDB Local"): the run's in-memory
 * instance (test/setup/global.ts) and a persisted one as `npm start` runs it. The listening sockets
 * are read from /proc/net/tcp and tcp6, what `ss -ltn` shows; a connection to another address of this
 * machine is refused.
 */
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { networkInterfaces, tmpdir } from 'node:os';
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { startDynamoLocal } from './dynamodb.ts';

/** The local addresses of every listening TCP socket on `port` (IPv4 and IPv6, IPv4-mapped shown as IPv4). */
function listeners(port: number): string[] {
  const found: string[] = [];
  for (const [file, v6] of [['/proc/net/tcp', false], ['/proc/net/tcp6', true]] as const) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields.length < 4 || fields[3] !== '0A') continue; // 0A: LISTEN
      const [addressHex, portHex] = fields[1]!.split(':') as [string, string];
      if (Number.parseInt(portHex, 16) !== port) continue;
      found.push(v6 ? ipv6(addressHex) : ipv4(addressHex));
    }
  }
  return found;
}

/** /proc/net/tcp writes an IPv4 address as one little-endian 32-bit word in hex. */
function ipv4(hex: string): string {
  return [6, 4, 2, 0].map((i) => Number.parseInt(hex.slice(i, i + 2), 16)).join('.');
}

/** /proc/net/tcp6 writes an IPv6 address as four little-endian 32-bit words in hex. */
function ipv6(hex: string): string {
  const bytes: number[] = [];
  for (let word = 0; word < 4; word++) {
    const chunk = hex.slice(word * 8, word * 8 + 8);
    for (const i of [6, 4, 2, 0]) bytes.push(Number.parseInt(chunk.slice(i, i + 2), 16));
  }
  if (bytes.slice(0, 10).every((b) => b === 0) && bytes[10] === 0xff && bytes[11] === 0xff) return bytes.slice(12).join('.');
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(((bytes[i]! << 8) | bytes[i + 1]!).toString(16));
  return groups.join(':').replace(/(^|:)0(:0)+(:|$)/, '::');
}

const loopback = (address: string) => /^127\./.test(address) || address === '::1' || address === '0:0:0:0:0:0:0:1';

/** A non-loopback IPv4 address of this machine, if it has one. */
function otherAddress(): string | null {
  for (const addresses of Object.values(networkInterfaces())) {
    for (const a of addresses ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  }
  return null;
}

/** Whether a TCP connection to host:port is accepted. */
function accepts(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port, timeout: 2000 });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
    socket.once('timeout', () => {
      socket.destroy();
      resolve(false);
    });
  });
}

async function expectLoopbackOnly(port: number): Promise<void> {
  const addresses = listeners(port);
  expect(addresses.length, `no listener on port ${port}`).toBeGreaterThan(0);
  expect(addresses.filter((a) => !loopback(a)), `listening on ${addresses.join(', ')}`).toEqual([]);
  expect(await accepts('127.0.0.1', port)).toBe(true);
  const other = otherAddress();
  if (other !== null) expect(await accepts(other, port), `reachable on ${other}`).toBe(false);
}

describe('DynamoDB Local', () => {
  it('of the test run listens on 127.0.0.1 only', async () => {
    await expectLoopbackOnly(Number(new URL(inject('dynamoEndpoint')).port));
  });

  it('persisted, as npm start runs it, listens on 127.0.0.1 only', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-dynamo-'));
    const dynamo = await startDynamoLocal({ dbPath: join(dir, 'db') });
    try {
      expect(new URL(dynamo.endpoint).hostname).toBe('127.0.0.1');
      await expectLoopbackOnly(dynamo.port);
      // It answers DynamoDB's protocol there (the launcher started the real server).
      const r = await fetch(dynamo.endpoint, {
        method: 'POST',
        headers: {
          'content-type': 'application/x-amz-json-1.0',
          'x-amz-target': 'DynamoDB_20120810.ListTables',
          authorization: 'AWS4-HMAC-SHA256 Credential=local/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=x',
        },
        body: '{}',
      });
      expect(r.status).toBe(200);
      expect(await r.json()).toEqual({ TableNames: [] });
    } finally {
      await dynamo.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
