/**
 * What the host itself shows of the processes a suite started, read from /proc by the test process
 * (so from outside any sandbox a tenant's code runs in): listening TCP sockets and their owners,
 * resident memory, CPU time, nice value and state of a process.
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { cmdline, descendants } from './procs.ts';

/** A listening TCP socket of the host's network namespace. */
export interface Listener {
  /** The local address as the kernel holds it: `127.0.0.1`, `0.0.0.0`, `::`, `::1`, `::ffff:127.0.0.1`, … */
  address: string;
  port: number;
  inode: number;
  /** The pids holding it (empty when no process of this host's /proc can be seen holding it). */
  pids: number[];
}

function ipv4(hex: string): string {
  // /proc/net/tcp holds the address as one little-endian 32-bit word.
  const b = Buffer.from(hex, 'hex');
  return `${b[3]}.${b[2]}.${b[1]}.${b[0]}`;
}

function ipv6(hex: string): string {
  // Four 32-bit words, each little-endian.
  const words: string[] = [];
  for (let i = 0; i < 4; i++) {
    const w = Buffer.from(hex.slice(i * 8, i * 8 + 8), 'hex').reverse().toString('hex');
    words.push(w.slice(0, 4), w.slice(4));
  }
  const groups = words.map((g) => g.replace(/^0+(?=.)/, ''));
  const full = groups.join(':');
  if (full === '0:0:0:0:0:0:0:0') return '::';
  if (full === '0:0:0:0:0:0:0:1') return '::1';
  if (full.startsWith('0:0:0:0:0:ffff:')) {
    const v4 = Buffer.from(words.slice(6).join(''), 'hex');
    return `::ffff:${v4[0]}.${v4[1]}.${v4[2]}.${v4[3]}`;
  }
  return full;
}

/** Socket inode → pids holding it, from every readable /proc/<pid>/fd. */
export function socketOwners(): Map<number, number[]> {
  const owners = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${entry}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      let target: string;
      try {
        target = readlinkSync(`/proc/${entry}/fd/${fd}`);
      } catch {
        continue;
      }
      const m = /^socket:\[(\d+)\]$/.exec(target);
      if (!m) continue;
      const inode = Number(m[1]);
      const list = owners.get(inode) ?? [];
      if (!list.includes(Number(entry))) list.push(Number(entry));
      owners.set(inode, list);
    }
  }
  return owners;
}

/** Every listening TCP socket (IPv4 and IPv6) of the host's network namespace, with its owners. */
export function listeners(): Listener[] {
  const owners = socketOwners();
  const out: Listener[] = [];
  for (const [file, decode] of [['/proc/net/tcp', ipv4], ['/proc/net/tcp6', ipv6]] as const) {
    let text = '';
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 10 || f[3] !== '0A') continue;
      const [addr, port] = f[1]!.split(':') as [string, string];
      const inode = Number(f[9]);
      out.push({ address: decode(addr), port: parseInt(port, 16), inode, pids: owners.get(inode) ?? [] });
    }
  }
  return out;
}

/** The fields of /proc/<pid>/stat after the command name: index 0 is field 3 (state). Null once gone. */
function statFields(pid: number): string[] | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).trim().split(' ');
  } catch {
    return null;
  }
}

/** The state letter of `pid` (`R`, `S`, `T` stopped, `Z`, …), or null once it is gone. */
export function stateOf(pid: number): string | null {
  return statFields(pid)?.[0] ?? null;
}

/** The nice value of `pid` (/proc/<pid>/stat field 19), or null once it is gone. */
export function niceOf(pid: number): number | null {
  const f = statFields(pid);
  return f ? Number(f[16]) : null;
}

/** User plus system CPU time of `pid` in clock ticks (fields 14 and 15), or null once it is gone. */
export function cpuTicks(pid: number): number | null {
  const f = statFields(pid);
  return f ? Number(f[11]) + Number(f[12]) : null;
}

/** Clock ticks per second of /proc's CPU times (USER_HZ, 100 on Linux). */
export const TICKS_PER_SECOND = 100;

/** Resident memory of `pid` in bytes (VmRSS), or 0 once it is gone. */
export function rssOf(pid: number): number {
  try {
    const m = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/** The pids of `roots` and all their live descendants. */
export function treeOf(roots: number[]): number[] {
  return [...new Set(roots.flatMap((r) => [r, ...descendants(r)]))];
}

/** Pids of every process of the host whose command line contains `text`. */
export function processesMentioning(text: string): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    if (cmdline(Number(entry)).includes(text)) out.push(Number(entry));
  }
  return out;
}

/**
 * Samples `pids()` every `everyMs` while `work` runs; answers the largest RSS any one process had and
 * its command line.
 */
export async function peakRss<T>(pids: () => number[], work: () => Promise<T>, everyMs = 40): Promise<{ result: T; peak: number; who: string }> {
  let peak = 0;
  let who = '';
  const sample = () => {
    for (const pid of pids()) {
      const rss = rssOf(pid);
      if (rss > peak) {
        peak = rss;
        who = `${pid} ${cmdline(pid).slice(0, 160)}`;
      }
    }
  };
  const timer = setInterval(sample, everyMs);
  try {
    const result = await work();
    sample();
    return { result, peak, who };
  } finally {
    clearInterval(timer);
  }
}

/** CPU each of `pids()` used over `ms`, in cores (1 = one core busy the whole time), busiest first. */
export async function cpuOver(pids: () => number[], ms: number): Promise<{ pid: number; cores: number; cmd: string }[]> {
  const before = new Map(pids().map((p) => [p, cpuTicks(p)] as const));
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, ms));
  const seconds = (performance.now() - t0) / 1000;
  const out: { pid: number; cores: number; cmd: string }[] = [];
  for (const [pid, ticks] of before) {
    const now = cpuTicks(pid);
    if (ticks === null || now === null) continue;
    out.push({ pid, cores: (now - ticks) / TICKS_PER_SECOND / seconds, cmd: cmdline(pid).slice(0, 160) });
  }
  return out.sort((a, b) => b.cores - a.cores);
}
