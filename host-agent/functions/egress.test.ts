/**
 * The egress filter of function runtimes (./egress.ts): which addresses are public, what a policy
 * refuses before any lookup, and the proxy itself against listeners on this machine (a refused
 * request never connects; one let through by SVCD_FUNCTION_EGRESS_UNSAFE_ALLOW does; raw TCP never).
 */
import { once } from 'node:events';
import { createServer, request as httpRequest, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EgressFilter, egressPolicy, nonPublicKind, refusal, refusedKind } from './egress.ts';

describe('nonPublicKind', () => {
  it('names every special-purpose IPv4 range, at both ends', () => {
    const cases: [string, string][] = [
      ['0.0.0.0', 'this-network'],
      ['0.255.255.255', 'this-network'],
      ['10.0.0.0', 'private'],
      ['10.255.255.255', 'private'],
      ['100.64.0.0', 'shared (carrier-grade NAT)'],
      ['100.127.255.255', 'shared (carrier-grade NAT)'],
      ['127.0.0.1', 'loopback'],
      ['127.255.255.254', 'loopback'],
      ['169.254.0.1', 'link-local'],
      ['169.254.169.254', 'link-local'],
      ['172.16.0.0', 'private'],
      ['172.31.255.255', 'private'],
      ['192.0.0.8', 'special-purpose'],
      ['192.0.2.1', 'documentation'],
      ['192.88.99.1', 'special-purpose'],
      ['192.168.0.1', 'private'],
      ['192.168.255.255', 'private'],
      ['198.18.0.1', 'benchmarking'],
      ['198.19.255.255', 'benchmarking'],
      ['198.51.100.7', 'documentation'],
      ['203.0.113.9', 'documentation'],
      ['224.0.0.1', 'multicast'],
      ['239.255.255.255', 'multicast'],
      ['240.0.0.1', 'reserved'],
      ['255.255.255.255', 'reserved'],
    ];
    for (const [address, kind] of cases) expect(nonPublicKind(address), address).toBe(kind);
  });

  it('answers null for public IPv4 addresses, just outside each range', () => {
    for (const address of ['1.1.1.1', '8.8.8.8', '9.255.255.255', '11.0.0.0', '100.63.255.255', '100.128.0.0', '126.255.255.255', '128.0.0.0', '169.253.255.255', '169.255.0.0', '172.15.255.255', '172.32.0.0', '192.167.255.255', '192.169.0.0', '198.17.255.255', '198.20.0.0', '223.255.255.255']) {
      expect(nonPublicKind(address), address).toBeNull();
    }
  });

  it('names the special-purpose IPv6 ranges, whatever the spelling', () => {
    const cases: [string, string][] = [
      ['::', 'unspecified'],
      ['::1', 'loopback'],
      ['0:0:0:0:0:0:0:1', 'loopback'],
      ['0000:0000:0000:0000:0000:0000:0000:0001', 'loopback'],
      ['[::1]', 'loopback'],
      ['100::1', 'discard'],
      ['2001::1', 'special-purpose'],
      ['2001:db8::1', 'documentation'],
      ['2002:7f00:1::', '6to4'],
      ['fc00::1', 'private (unique local)'],
      ['fd12:3456::1', 'private (unique local)'],
      ['FD00::1', 'private (unique local)'],
      ['fe80::1', 'link-local'],
      ['febf:ffff::1', 'link-local'],
      ['fec0::1', 'site-local'],
      ['ff02::1', 'multicast'],
    ];
    for (const [address, kind] of cases) expect(nonPublicKind(address), address).toBe(kind);
  });

  it('answers null for public IPv6 addresses', () => {
    for (const address of ['2606:4700:4700::1111', '2001:4860:4860::8888', '2a00:1450:4001::1', '[2606:4700::1]']) expect(nonPublicKind(address), address).toBeNull();
  });

  it('judges an IPv4-mapped address by the address it embeds, in every spelling', () => {
    const cases: [string, string | null][] = [
      ['::ffff:127.0.0.1', 'loopback'],
      ['::ffff:7f00:1', 'loopback'],
      ['::FFFF:7F00:0001', 'loopback'],
      ['[::ffff:127.0.0.1]', 'loopback'],
      ['::ffff:10.1.2.3', 'private'],
      ['::ffff:a9fe:a9fe', 'link-local'],
      ['::ffff:169.254.169.254', 'link-local'],
      ['0:0:0:0:0:ffff:127.0.0.1', 'loopback'],
      ['0:0:0:0:0:ffff:7f00:1', 'loopback'],
      ['0000:0000:0000:0000:0000:ffff:7f00:0001', 'loopback'],
      ['::0:ffff:127.0.0.1', 'loopback'],
      ['::ffff:8.8.8.8', null],
      ['::ffff:808:808', null],
    ];
    for (const [address, kind] of cases) expect(nonPublicKind(address), address).toBe(kind);
  });

  it('judges a NAT64 address (64:ff9b::/96) by the address it embeds, in every spelling', () => {
    const cases: [string, string | null][] = [
      ['64:ff9b::127.0.0.1', 'loopback'],
      ['64:ff9b::7f00:1', 'loopback'],
      ['64:ff9b::a00:1', 'private'],
      ['64:ff9b::169.254.169.254', 'link-local'],
      ['64:ff9b:0:0:0:0:7f00:1', 'loopback'],
      ['0064:ff9b:0000:0000:0000:0000:7f00:0001', 'loopback'],
      ['64:ff9b::8.8.8.8', null],
      ['64:ff9b::808:808', null],
    ];
    for (const [address, kind] of cases) expect(nonPublicKind(address), address).toBe(kind);
  });

  it('refuses what is not an address', () => {
    for (const text of ['', 'localhost', 'example.com', '127.0.0.1.nip.io', '1.2.3', '::g', '[::1']) expect(nonPublicKind(text), text).toBe('not an IP address');
  });
});

describe('refusedKind', () => {
  it("refuses this host's own addresses, public ones included, in any spelling", () => {
    const own = new Set(['8.8.8.8', '2606:4700::1111']);
    expect(refusedKind('8.8.8.8', own)).toBe("this host's own");
    expect(refusedKind('::ffff:8.8.8.8', own)).toBe("this host's own");
    expect(refusedKind('2606:4700:0:0:0:0:0:1111', own)).toBe("this host's own");
    expect(refusedKind('[2606:4700::1111]', own)).toBe("this host's own");
    expect(refusedKind('8.8.4.4', own)).toBeNull();
    expect(refusedKind('127.0.0.1', own)).toBe('loopback');
  });

  it("reads the host's interfaces when given none: its loopback and every address it has", async () => {
    const { networkInterfaces } = await import('node:os');
    for (const list of Object.values(networkInterfaces())) for (const a of list ?? []) expect(refusedKind(a.address.split('%')[0]!)).not.toBeNull();
  });
});

describe('egressPolicy', () => {
  it('reads public, none and host lists, whatever the case and spacing', () => {
    expect(egressPolicy('public', undefined)).toEqual({ hosts: 'public', unsafeAllow: new Set() });
    expect(egressPolicy(' PUBLIC ', undefined).hosts).toBe('public');
    expect(egressPolicy('None', undefined).hosts).toBe('none');
    expect(egressPolicy('api.example.com, *.Stripe.com,,', undefined).hosts).toEqual(['api.example.com', '*.stripe.com']);
  });

  it('reads the unsafe list as lowercase host:port pairs', () => {
    expect([...egressPolicy('public', '127.0.0.1:8080, LocalHost:9000 ,[::1]:80').unsafeAllow]).toEqual(['127.0.0.1:8080', 'localhost:9000', '[::1]:80']);
    expect(egressPolicy('public', '').unsafeAllow.size).toBe(0);
  });
});

describe('refusal', () => {
  const pub = egressPolicy('public', undefined);
  const url = (u: string) => new URL(u);

  it('lets public names and addresses on to the lookup, any port', () => {
    for (const u of ['https://example.com/', 'http://example.com:8080/x', 'https://8.8.8.8/', 'http://[2606:4700::1111]:81/']) expect(refusal(pub, url(u)), u).toBeNull();
  });

  it('refuses other schemes', () => {
    for (const u of ['ftp://example.com/', 'ws://example.com/', 'file:///etc/passwd', 'data:text/plain,x', 'gopher://example.com/']) expect(refusal(pub, url(u)), u).toMatch(/^the scheme [a-z]+: is not reachable from functions$/);
  });

  it('refuses address literals that are not public, in every form a URL can spell them', () => {
    const cases: [string, RegExp][] = [
      ['http://127.0.0.1/', /^127\.0\.0\.1 is a loopback address/],
      ['http://2130706433/', /^127\.0\.0\.1 is a loopback address/],
      ['http://0x7f.1/', /^127\.0\.0\.1 is a loopback address/],
      ['http://017700000001/', /^127\.0\.0\.1 is a loopback address/],
      ['http://[::1]:8080/', /^::1 is a loopback address/],
      ['http://[::ffff:127.0.0.1]/', /loopback/],
      ['http://[0:0:0:0:0:ffff:7f00:1]/', /loopback/],
      ['http://[64:ff9b::7f00:1]/', /loopback/],
      ['http://169.254.169.254/latest/meta-data/', /^169\.254\.169\.254 is a link-local address/],
      ['http://[fe80::1]/', /link-local/],
      ['http://10.0.0.1/', /private/],
      ['http://[fd00::1]/', /private/],
      ['http://0.0.0.0:80/', /this-network/],
      ['http://[::]/', /unspecified/],
    ];
    for (const [u, why] of cases) expect(refusal(pub, url(u)), u).toMatch(why);
  });

  it('leaves names to the lookup (which checks every address they resolve to)', () => {
    expect(refusal(pub, url('http://localhost:8080/'))).toBeNull();
    expect(refusal(pub, url('http://metadata.google.internal/'))).toBeNull();
  });

  it('with none refuses everything, named or not', () => {
    const none = egressPolicy('none', undefined);
    for (const u of ['https://example.com/', 'https://8.8.8.8/']) expect(refusal(none, url(u)), u).toBe('functions have no egress on this deployment (SVCD_FUNCTION_EGRESS=none)');
  });

  it('with a list lets only those names through, a wildcard matching names below it and not itself', () => {
    const listed = egressPolicy('api.example.com,*.stripe.com', undefined);
    expect(refusal(listed, url('https://api.example.com/v1'))).toBeNull();
    expect(refusal(listed, url('https://API.EXAMPLE.COM/v1'))).toBeNull();
    expect(refusal(listed, url('https://a.stripe.com/'))).toBeNull();
    expect(refusal(listed, url('https://a.b.stripe.com/'))).toBeNull();
    for (const u of ['https://stripe.com/', 'https://evilstripe.com/', 'https://example.com/', 'https://api.example.com.evil.test/', 'https://8.8.8.8/']) {
      expect(refusal(listed, url(u)), u).toMatch(/is not on this deployment's egress list$/);
    }
  });

  it('with a list still refuses a listed name spelled as an address that is not public', () => {
    const listed = egressPolicy('127.0.0.1', undefined);
    expect(refusal(listed, url('http://127.0.0.1/'))).toMatch(/loopback/);
  });

  it('lets exactly the unsafe host:port pairs through, default ports included', () => {
    const unsafe = egressPolicy('none', '127.0.0.1:8080,localhost:80,[::1]:443');
    expect(refusal(unsafe, url('http://127.0.0.1:8080/x'))).toBeNull();
    expect(refusal(unsafe, url('http://LOCALHOST/'))).toBeNull();
    expect(refusal(unsafe, url('https://[::1]/'))).toBeNull();
    expect(refusal(unsafe, url('http://127.0.0.1:8081/'))).not.toBeNull();
    expect(refusal(unsafe, url('http://127.0.0.1/'))).not.toBeNull();
    expect(refusal(unsafe, url('https://localhost/'))).not.toBeNull();
    expect(refusal(unsafe, url('http://[::1]/'))).not.toBeNull();
    expect(refusal(unsafe, url('ftp://127.0.0.1:8080/'))).toMatch(/scheme/);
  });
});

describe('EgressFilter', () => {
  let dir: string;
  let target: Server;
  let targetPort: number;
  let hits = 0;
  const lines: string[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'svc-egress-'));
    target = createServer((req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (c: string) => (body += c));
      req.on('end', () => res.end(JSON.stringify({ method: req.method, url: req.url, body, proxyAuth: req.headers['proxy-authorization'] ?? null })));
    });
    target.on('connection', () => hits++);
    await new Promise<void>((r) => target.listen(0, '127.0.0.1', r));
    targetPort = (target.address() as AddressInfo).port;
  });
  afterAll(() => {
    target?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** A filter serving one runtime's proxy socket; `send` makes a proxy-style request through it. */
  async function filterOf(policy: ReturnType<typeof egressPolicy>) {
    const filter = new EgressFilter(policy, (l) => lines.push(l));
    const server = filter.server('prj_test');
    const socketPath = join(dir, `egress-${Math.random().toString(16).slice(2)}.sock`);
    await new Promise<void>((r) => server.listen(socketPath, r));
    const send = (absolute: string, init: { method?: string; body?: string; headers?: Record<string, string> } = {}) =>
      new Promise<{ status: number; refused: string | undefined; body: string }>((resolve, reject) => {
        const req = httpRequest({ socketPath, method: init.method ?? 'GET', path: absolute, headers: { host: new URL(absolute).host, ...init.headers } }, (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (body += c));
          res.on('end', () => resolve({ status: res.statusCode!, refused: res.headers['x-svc-egress-refused'] as string | undefined, body }));
        });
        req.on('error', reject);
        req.end(init.body);
      });
    const close = async () => {
      server.close();
      server.closeAllConnections();
      await filter.close();
    };
    return { filter, send, socketPath, close };
  }

  it('refuses a loopback destination, by address or by name, before any connection; counts it', async () => {
    const { filter, send, close } = await filterOf(egressPolicy('public', undefined));
    try {
      const before = hits;
      for (const u of [`http://127.0.0.1:${targetPort}/`, `http://localhost:${targetPort}/`, `http://[::ffff:127.0.0.1]:${targetPort}/`]) {
        const r = await send(u);
        expect(r.status, u).toBe(403);
        expect(r.refused, u).toMatch(/not reachable from functions/);
        expect(r.body, u).toMatch(/^egress refused: .*\(docs\/functions\.md "Egress"\)\n$/);
      }
      expect(hits).toBe(before);
      expect(filter.stats).toEqual({ passed: 0, refused: 3 });
    } finally {
      await close();
    }
  });

  it('refuses a request without an absolute URL (400), and raw TCP through CONNECT (403)', async () => {
    const { filter, send, socketPath, close } = await filterOf(egressPolicy('public', undefined));
    try {
      const before = hits;
      const relative = await new Promise<number>((resolve, reject) => {
        const req = httpRequest({ socketPath, path: '/relative' }, (res) => {
          res.resume();
          resolve(res.statusCode!);
        });
        req.on('error', reject);
        req.end();
      });
      expect(relative).toBe(400);
      const socket = connect(socketPath);
      await once(socket, 'connect');
      socket.write(`CONNECT 127.0.0.1:${targetPort} HTTP/1.1\r\nhost: 127.0.0.1:${targetPort}\r\n\r\n`);
      let answer = '';
      socket.setEncoding('utf8');
      socket.on('data', (c: string) => (answer += c));
      await once(socket, 'close');
      expect(answer).toMatch(/^HTTP\/1\.1 403 /);
      expect(answer.toLowerCase()).toContain('x-svc-egress-refused: raw tcp is not reachable from functions');
      expect(hits).toBe(before);
      expect(filter.stats.refused).toBe(2);
    } finally {
      await close();
    }
  });

  it('lets an unsafe host:port through with its method and body, without the proxy\'s own headers, and logs it', async () => {
    const { filter, send, close } = await filterOf(egressPolicy('none', `127.0.0.1:${targetPort}`));
    try {
      const before = hits;
      const r = await send(`http://127.0.0.1:${targetPort}/path?q=1`, { method: 'POST', body: 'hello', headers: { 'proxy-authorization': 'Basic eA==', 'content-length': '5' } });
      expect(r.status).toBe(200);
      expect(r.refused).toBeUndefined();
      expect(JSON.parse(r.body)).toEqual({ method: 'POST', url: '/path?q=1', body: 'hello', proxyAuth: null });
      expect(hits).toBeGreaterThan(before);
      expect(filter.stats).toEqual({ passed: 1, refused: 0 });
      expect(lines.some((l) => l.includes(`egress of prj_test to 127.0.0.1:${targetPort} let through by SVCD_FUNCTION_EGRESS_UNSAFE_ALLOW`))).toBe(true);
      // The same listener by another name or port is not.
      expect((await send(`http://localhost:${targetPort}/`)).status).toBe(403);
      expect((await send(`http://127.0.0.1:${targetPort + 1}/`)).status).toBe(403);
    } finally {
      await close();
    }
  });
});
