/**
 * The networks this host reaches by a route of its own: an operator's network behind a next hop
 * on one of the host's links, or the peer of a point-to-point interface (a /32 or /128 host
 * route). Their addresses can look like anyone's (`11.1.0.0/24`), but the host only routes them
 * somewhere other than its default route because the operator put them there, so the egress
 * counts them with the networks of the host's own interfaces (`address.ts`: `private`).
 *
 * The kernel's tables are read as text from `/proc/net/route` (IPv4, the main table, with each
 * route's device), `/proc/net/fib_trie` (IPv4, for the tables that policy routing adds beside the
 * main one: WireGuard's `wg-quick`, Tailscale's table 52, an operator's `ip rule … table N`) and
 * `/proc/net/ipv6_route` (IPv6, every table); the parsing is pure so that it can be tested on
 * tables this machine does not have. Left out, each because it would say nothing about the
 * operator's networks:
 * - the default route, and routes too wide to be anyone's network: a VPN client replaces the
 *   default by `0.0.0.0/1` + `128.0.0.0/1` (or `::/1` + `8000::/1`, `2000::/3`). No operator's
 *   network is wider than a /8 (10/8 itself, the old class A blocks) or a /16 in IPv6 (a large
 *   LIR's allocation is a /19 to /32), so anything wider is a default in disguise;
 * - routes on `lo`: addresses of this host, classed as this host already;
 * - IPv6 link-local (`fe80::/10`) and multicast (`ff00::/8`), which every interface gets and which
 *   are classed (link-local, private) by their address already.
 * A route the operator adds that a VPN or a split-tunnel list also adds (a narrower one) is then
 * refused like the rest: the refusal is what `--allow-network` lifts.
 */
import { readFileSync } from 'node:fs';
import { endianness } from 'node:os';

/** A destination network the host routes: `address` is dotted IPv4 or eight hex IPv6 words. */
export interface RoutedNetwork {
  readonly address: string;
  readonly prefix: number;
  readonly family: 4 | 6;
}

/** Narrower than these (a longer prefix, or as long) is a network; wider is a default. */
const WIDEST_IPV4 = 8;
const WIDEST_IPV6 = 16;

/** The bytes of a `/proc/net/route` hex field, first octet first (the kernel prints host order). */
function ipv4Bytes(hex: string, order: 'LE' | 'BE'): number[] {
  const bytes = hex.match(/../g)!.map((b) => parseInt(b, 16));
  return order === 'LE' ? bytes.reverse() : bytes;
}

/**
 * The routed networks in the text of `/proc/net/route`: a header line, then `Iface Destination
 * Gateway Flags RefCnt Use Metric Mask …`, destination and mask as 8 hex digits in the host's
 * byte order (`order`, little-endian on x86 and arm). Lines that do not read so are skipped.
 */
export function parseIpv4Routes(text: string, order: 'LE' | 'BE' = 'LE'): RoutedNetwork[] {
  const out: RoutedNetwork[] = [];
  for (const line of text.split('\n').slice(1)) {
    const [iface, destination, , , , , , mask] = line.trim().split(/\s+/);
    if (iface === 'lo') continue;
    if (!/^[0-9a-f]{8}$/i.test(destination ?? '') || !/^[0-9a-f]{8}$/i.test(mask ?? '')) continue;
    // a route's mask is contiguous: its length is its number of one bits
    const ones = ipv4Bytes(mask!, order).map((b) => b.toString(2).replace(/0/g, ''));
    const prefix = ones.join('').length;
    if (prefix < WIDEST_IPV4) continue;
    out.push({ address: ipv4Bytes(destination!, order).join('.'), prefix, family: 4 });
  }
  return out;
}

/**
 * The routed networks of the IPv4 tables other than `Main` and `Local`, in the text of
 * `/proc/net/fib_trie`: a table's name on a line of its own (`Id 100:`), then its tree, each
 * leaf `|-- A.B.C.D` followed by one line per route to it, `/N scope TYPE`. Only `UNICAST` routes
 * lead somewhere (`BLACKHOLE`, `UNREACHABLE`, `PROHIBIT` refuse, `LOCAL` and `BROADCAST` are the
 * host's own). The main table is read from `/proc/net/route`, which names each route's device;
 * `Local` holds the host's own addresses, classed as this host already.
 */
export function parseIpv4RuleTables(text: string): RoutedNetwork[] {
  const out: RoutedNetwork[] = [];
  let table: string | undefined;
  let leaf: string | undefined;
  for (const line of text.split('\n')) {
    if (/^\S.*:$/.test(line)) {
      table = line.slice(0, -1);
      leaf = undefined;
      continue;
    }
    if (table === undefined || table === 'Main' || table === 'Local') continue;
    const address = /^\s*\|-- (\d{1,3}(?:\.\d{1,3}){3})$/.exec(line)?.[1];
    if (address !== undefined) {
      leaf = address;
      continue;
    }
    const route = /^\s*\/(\d{1,2}) \S+ UNICAST$/.exec(line);
    if (!route || leaf === undefined) continue;
    const prefix = Number(route[1]);
    if (prefix < WIDEST_IPV4 || prefix > 32) continue;
    out.push({ address: leaf, prefix, family: 4 });
  }
  return out;
}

/**
 * The routed networks in the text of `/proc/net/ipv6_route`: per line the destination (32 hex
 * digits, network order), its prefix length (2 hex digits), source, source prefix, next hop,
 * metric, reference count, use, flags and the device. Lines that do not read so are skipped.
 */
export function parseIpv6Routes(text: string): RoutedNetwork[] {
  const out: RoutedNetwork[] = [];
  for (const line of text.split('\n')) {
    const fields = line.trim().split(/\s+/);
    const [destination, prefixHex] = fields;
    if (fields.length !== 10 || fields[9] === 'lo') continue;
    if (!/^[0-9a-f]{32}$/i.test(destination!) || !/^[0-9a-f]{2}$/i.test(prefixHex!)) continue;
    const prefix = parseInt(prefixHex!, 16);
    const words = destination!.match(/.{4}/g)!.map((w) => parseInt(w, 16));
    const first = words[0]!;
    if (prefix < WIDEST_IPV6 || prefix > 128) continue;
    if ((first & 0xffc0) === 0xfe80 || first >>> 8 === 0xff) continue;
    out.push({ address: words.map((w) => w.toString(16)).join(':'), prefix, family: 6 });
  }
  return out;
}

/**
 * The file's text, or nothing where it is absent (a kernel without IPv6, not Linux). Any other
 * failure is thrown: the egress then refuses the connection rather than judge it without routes.
 */
export function readTable(path: string): string {
  try {
    return readFileSync(path, 'latin1');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return '';
    throw err;
  }
}

/**
 * How long a reading of the tables is used. Every connection an instance opens asks (through
 * `hostAddresses()`); reading and parsing both files costs about as much again as the rest of the
 * decision (some 70 µs here), while routes change when an operator or a VPN changes them: a route
 * added is counted within this time.
 */
export const ROUTES_FRESH_MS = 1_000;

let last: { at: number; routes: readonly RoutedNetwork[] } | undefined;

/** The networks this host routes, from the kernel's tables as read at most `ROUTES_FRESH_MS` ago. */
export function routedNetworks(now = performance.now()): readonly RoutedNetwork[] {
  if (last === undefined || now - last.at >= ROUTES_FRESH_MS || now < last.at) {
    const routes = [
      ...parseIpv4Routes(readTable('/proc/net/route'), endianness()),
      ...parseIpv4RuleTables(readTable('/proc/net/fib_trie')),
      ...parseIpv6Routes(readTable('/proc/net/ipv6_route')),
    ];
    last = { at: now, routes };
  }
  return last.routes;
}
