/**
 * The egress filter of function runtimes (docs/functions.md "Egress"). A runtime's network namespace
 * has no way out; its isolates' `fetch` goes to workerd's `egress` service, an HTTP forward proxy on a
 * unix socket the agent serves for that runtime. Here every request is checked before a connection is
 * made:
 *
 * - the scheme is `http` or `https`, the port any;
 * - `SVCD_FUNCTION_EGRESS`: `public` (the default) lets any host through, `none` none, a list of host
 *   names (`api.example.com,*.stripe.com`) only those;
 * - every address the host name resolves to must be public: loopback, private, link-local (the
 *   metadata endpoint 169.254.169.254 among them), shared, multicast, documentation and other
 *   special-purpose ranges of IPv4 and IPv6 are refused, IPv4-mapped and NAT64 forms by the address
 *   they embed; so are this host's own addresses, public ones included (a host reaches its own
 *   listeners through them). The check runs inside the connection's own lookup, so the address
 *   checked is the address connected to (no second resolution a rebinding DNS server could answer
 *   differently);
 * - `SVCD_FUNCTION_EGRESS_UNSAFE_ALLOW` names `host:port` pairs let through whatever their address:
 *   a development and test setting, warned about at every start.
 *
 * A refusal is answered `403` with `x-svc-egress-refused` and a sentence saying why, so the function's
 * `fetch` resolves with it; raw TCP (`connect()` of `cloudflare:sockets`, an HTTP CONNECT) is refused.
 * Redirects are not followed here: workerd follows them itself, each new request checked again.
 */
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { BlockList, isIP, type Socket } from 'node:net';
import { networkInterfaces } from 'node:os';
import { Agent, type Dispatcher } from 'undici';
import { connectionTokens, isHopByHop } from '../../shared/http/hop-by-hop.ts';

/** Ranges that are not public (RFC 6890 and the IANA special-purpose registries). */
const NOT_PUBLIC: ReadonlyArray<readonly [string, number, 'ipv4' | 'ipv6', string]> = [
  ['0.0.0.0', 8, 'ipv4', 'this-network'],
  ['10.0.0.0', 8, 'ipv4', 'private'],
  ['100.64.0.0', 10, 'ipv4', 'shared (carrier-grade NAT)'],
  ['127.0.0.0', 8, 'ipv4', 'loopback'],
  ['169.254.0.0', 16, 'ipv4', 'link-local'],
  ['172.16.0.0', 12, 'ipv4', 'private'],
  ['192.0.0.0', 24, 'ipv4', 'special-purpose'],
  ['192.0.2.0', 24, 'ipv4', 'documentation'],
  ['192.88.99.0', 24, 'ipv4', 'special-purpose'],
  ['192.168.0.0', 16, 'ipv4', 'private'],
  ['198.18.0.0', 15, 'ipv4', 'benchmarking'],
  ['198.51.100.0', 24, 'ipv4', 'documentation'],
  ['203.0.113.0', 24, 'ipv4', 'documentation'],
  ['224.0.0.0', 4, 'ipv4', 'multicast'],
  ['240.0.0.0', 4, 'ipv4', 'reserved'],
  ['::', 128, 'ipv6', 'unspecified'],
  ['::1', 128, 'ipv6', 'loopback'],
  ['100::', 64, 'ipv6', 'discard'],
  ['2001::', 23, 'ipv6', 'special-purpose'],
  ['2001:db8::', 32, 'ipv6', 'documentation'],
  ['2002::', 16, 'ipv6', '6to4'],
  ['fc00::', 7, 'ipv6', 'private (unique local)'],
  ['fe80::', 10, 'ipv6', 'link-local'],
  ['fec0::', 10, 'ipv6', 'site-local'],
  ['64:ff9b:1::', 48, 'ipv6', 'local-use NAT64'],
  ['3fff::', 20, 'ipv6', 'documentation'],
  ['5f00::', 16, 'ipv6', 'segment routing'],
  ['ff00::', 8, 'ipv6', 'multicast'],
];

const ranges = NOT_PUBLIC.map(([network, prefix, type, kind]) => {
  const list = new BlockList();
  list.addSubnet(network, prefix, type);
  return { list, type, kind };
});

/** The IPv4 address an IPv6 address embeds (IPv4-mapped `::ffff:a.b.c.d`, NAT64 `64:ff9b::/96`), or null. */
function embeddedIpv4(address: string): string | null {
  const lower = address.toLowerCase();
  const mapped = /^(?:::ffff:|64:ff9b::)(?:(\d+\.\d+\.\d+\.\d+)|([0-9a-f]{1,4}):([0-9a-f]{1,4}))$/.exec(lower);
  if (!mapped) return null;
  if (mapped[1]) return mapped[1];
  const hi = parseInt(mapped[2]!, 16);
  const lo = parseInt(mapped[3]!, 16);
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
}

/**
 * The addresses of this host's own interfaces, canonical: a host with a public address reaches its
 * own listeners through it, so it is refused like loopback (read at each check: interfaces change).
 */
function ownAddresses(): Set<string> {
  const own = new Set<string>();
  for (const list of Object.values(networkInterfaces())) for (const a of list ?? []) own.add(canonical(a.address));
  return own;
}

/** An address in one spelling: IPv6 compressed and lowercase, IPv4-mapped as its IPv4 address. */
function canonical(address: string): string {
  const bare = address.startsWith('[') && address.endsWith(']') ? address.slice(1, -1) : address.split('%')[0]!;
  if (isIP(bare) !== 6) return bare;
  const compressed = new URL(`http://[${bare}]/`).hostname.slice(1, -1);
  return embeddedIpv4(compressed) ?? compressed;
}

/**
 * Why `address` may not be reached from functions: not public (`loopback`, `private`, …), or one of
 * this host's own addresses; null when it may. Not an address: `not an IP address`.
 */
export function refusedKind(address: string, own: ReadonlySet<string> = ownAddresses()): string | null {
  const kind = nonPublicKind(address);
  if (kind !== null) return kind;
  return isIP(canonical(address)) !== 0 && own.has(canonical(address)) ? "this host's own" : null;
}

/** Why `address` is not public (`loopback`, `private`, …), or null when it is. Not an address: `not an IP address`. */
export function nonPublicKind(address: string): string | null {
  const bare = address.startsWith('[') && address.endsWith(']') ? address.slice(1, -1) : address;
  const family = isIP(bare);
  if (family === 0) return 'not an IP address';
  if (family === 6) {
    // The canonical (compressed, lowercase) form, whatever way it was written.
    const v4 = embeddedIpv4(new URL(`http://[${bare}]/`).hostname.slice(1, -1));
    if (v4 !== null) return nonPublicKind(v4);
  }
  const type = family === 4 ? 'ipv4' : 'ipv6';
  for (const range of ranges) if (range.type === type && range.list.check(bare, type)) return range.kind;
  return null;
}

/** What the deployment lets functions reach. */
export interface EgressPolicy {
  /** `public`: any host at public addresses; `none`: nothing; a list: those host names only (at public addresses). */
  hosts: 'public' | 'none' | readonly string[];
  /** `host:port` pairs let through whatever their address (development and tests only). */
  unsafeAllow: ReadonlySet<string>;
}

/** The policy of `SVCD_FUNCTION_EGRESS` and `SVCD_FUNCTION_EGRESS_UNSAFE_ALLOW`. */
export function egressPolicy(egress: string, unsafeAllow: string | undefined): EgressPolicy {
  const trimmed = egress.trim().toLowerCase();
  const hosts = trimmed === 'public' || trimmed === 'none' ? trimmed : trimmed.split(',').map((h) => h.trim()).filter(Boolean);
  const unsafe = new Set((unsafeAllow ?? '').split(',').map((h) => h.trim().toLowerCase()).filter(Boolean));
  return { hosts, unsafeAllow: unsafe };
}

/** Whether the host name is on the policy's list (`*.example.com` matches any name below example.com). */
function listed(hosts: EgressPolicy['hosts'], host: string): boolean {
  if (hosts === 'public') return true;
  if (hosts === 'none') return false;
  return hosts.some((pattern) => (pattern.startsWith('*.') ? host.endsWith(pattern.slice(1)) && host.length > pattern.length - 1 : host === pattern));
}

/** A request refused before any connection was made. */
class Refused extends Error {}

/** The verdict on a destination before its addresses are known: null when it may go on to the lookup. */
export function refusal(policy: EgressPolicy, url: URL): string | null {
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return `the scheme ${url.protocol} is not reachable from functions`;
  const host = url.hostname.toLowerCase();
  if (policy.unsafeAllow.has(`${host}:${portOf(url)}`)) return null;
  const bare = host.startsWith('[') ? host.slice(1, -1) : host;
  if (!listed(policy.hosts, bare)) return policy.hosts === 'none' ? 'functions have no egress on this deployment (SVCD_FUNCTION_EGRESS=none)' : `${bare} is not on this deployment's egress list`;
  if (isIP(bare) !== 0) {
    const kind = refusedKind(bare);
    if (kind !== null) return `${bare} is a ${kind} address, not reachable from functions`;
  }
  return null;
}

function portOf(url: URL): string {
  return url.port || (url.protocol === 'https:' ? '443' : '80');
}

/**
 * The connection's lookup: resolves the name and keeps only public addresses; none left is a refusal
 * (as if the name did not exist, the way workerd's own network filter behaves).
 */
function publicLookup(hostname: string, options: object, callback: (err: Error | null, address: string | LookupAddress[], family?: number) => void): void {
  dnsLookup(hostname, { all: true }, (err, addresses) => {
    if (err) return callback(err, []);
    const own = ownAddresses();
    const kept = addresses.filter((a) => refusedKind(a.address, own) === null);
    if (kept.length === 0) {
      const kinds = [...new Set(addresses.map((a) => refusedKind(a.address, own)))].join(', ');
      return callback(new Refused(`${hostname} resolves only to addresses not reachable from functions (${kinds})`), []);
    }
    if ((options as { all?: boolean }).all) return callback(null, kept);
    callback(null, kept[0]!.address, kept[0]!.family);
  });
}

/** Request headers never passed on: hop-by-hop ones and the proxy's own. */
function passedHeaders(req: IncomingMessage): string[] {
  const listed = connectionTokens(req.headers.connection);
  const out: string[] = [];
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (isHopByHop(name, listed) || name.startsWith('proxy-')) continue;
    out.push(raw[i]!, raw[i + 1]!);
  }
  return out;
}

/** The egress filter of one agent: a proxy server per runtime, one pool of outbound connections. */
export class EgressFilter {
  readonly policy: EgressPolicy;
  readonly #checked: Agent;
  readonly #unchecked: Agent;
  readonly #log: (line: string) => void;
  /** Requests let through and refused, by all runtimes (tests, metrics). */
  readonly stats = { passed: 0, refused: 0 };

  constructor(policy: EgressPolicy, log: (line: string) => void) {
    this.policy = policy;
    this.#log = log;
    this.#checked = new Agent({ connect: { lookup: publicLookup as never, timeout: 10_000 }, headersTimeout: 60_000, bodyTimeout: 60_000 });
    this.#unchecked = new Agent({ connect: { timeout: 10_000 } });
  }

  /** A proxy server for the runtime of `who` (a project id, for the agent's log). */
  server(who: string): Server {
    const server = createServer({ requireHostHeader: false, maxHeaderSize: 64 * 1024 }, (req, res) => {
      this.#handle(who, req, res).catch((err: unknown) => {
        this.#log(`agent: functions: egress of ${who} failed: ${(err as Error).message}`);
        if (!res.headersSent) this.#refuse(res, 502, 'the egress request failed');
        else res.destroy();
      });
    });
    // Raw TCP is not offered (docs/functions.md "Egress").
    server.on('connect', (_req: IncomingMessage, socket: Socket) => {
      this.stats.refused++;
      socket.end('HTTP/1.1 403 Forbidden\r\nx-svc-egress-refused: raw TCP is not reachable from functions\r\ncontent-length: 0\r\n\r\n');
    });
    return server;
  }

  /** Closes the outbound connections. */
  async close(): Promise<void> {
    await Promise.all([this.#checked.close(), this.#unchecked.close()]);
  }

  async #handle(who: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
    let url: URL;
    try {
      url = new URL(req.url ?? '');
    } catch {
      return this.#refuse(res, 400, 'the egress request has no absolute URL');
    }
    const why = refusal(this.policy, url);
    if (why !== null) {
      req.resume();
      return this.#refuse(res, 403, why);
    }
    const unsafe = this.policy.unsafeAllow.has(`${url.hostname.toLowerCase()}:${portOf(url)}`);
    const dispatcher: Dispatcher = unsafe ? this.#unchecked : this.#checked;
    const method = req.method ?? 'GET';
    const hasBody = req.headers['content-length'] !== undefined ? req.headers['content-length'] !== '0' : req.headers['transfer-encoding'] !== undefined;
    const ac = new AbortController();
    res.once('close', () => {
      if (!res.writableFinished) ac.abort();
    });
    let answer: Dispatcher.ResponseData;
    try {
      answer = await dispatcher.request({
        origin: url.origin,
        path: `${url.pathname}${url.search}`,
        method: method as Dispatcher.HttpMethod,
        headers: passedHeaders(req),
        body: hasBody ? req : null,
        signal: ac.signal,
      });
    } catch (err) {
      req.resume();
      if (err instanceof Refused || (err as { cause?: unknown }).cause instanceof Refused) {
        return this.#refuse(res, 403, (err instanceof Refused ? err : ((err as { cause: Refused }).cause)).message);
      }
      this.stats.passed++;
      return this.#refuse(res, 502, `${url.host} could not be reached (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`, false);
    }
    this.stats.passed++;
    const headers: string[] = [];
    for (const [name, value] of Object.entries(answer.headers)) {
      if (value === undefined || isHopByHop(name, connectionTokens(answer.headers.connection as string | undefined))) continue;
      for (const v of Array.isArray(value) ? value : [value]) headers.push(name, v);
    }
    res.writeHead(answer.statusCode, headers);
    answer.body.on('error', () => res.destroy());
    answer.body.pipe(res);
    if (unsafe) this.#log(`agent: functions: egress of ${who} to ${url.host} let through by SVCD_FUNCTION_EGRESS_UNSAFE_ALLOW`);
  }

  #refuse(res: ServerResponse, status: number, why: string, counted = true): void {
    if (counted) this.stats.refused++;
    const body = `egress refused: ${why} (docs/functions.md "Egress")\n`;
    res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(body), 'x-svc-egress-refused': why.replace(/[^\x20-\x7e]/g, '?') });
    res.end(body);
  }
}
