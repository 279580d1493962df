/**
 * One address model for every destination an instance can name: the egress's targets, the
 * upstream proxy's own address, the cluster's database and nodes. An address is read the way the
 * kernel will connect to it before any rule looks at it, so two spellings of one destination are
 * one destination to every rule:
 * - every numeric spelling of IPv4 the resolver accepts (`0`, `127.1`, `0x7f.1`, `2130706433`,
 *   `017700000001`) is read with WHATWG host parsing, which agrees with it;
 * - IPv6 carrying an IPv4 address (mapped `::ffff:a.b.c.d`, the deprecated compatible `::a.b.c.d`,
 *   NAT64's `64:ff9b::/96`) is that IPv4 address;
 * - the unspecified addresses (`0.0.0.0/8`, `::`) are this host: connecting there reaches it;
 * - 6to4 (`2002:AABB:CCDD::/48`) and Teredo (`2001:0::/32`, its server's IPv4 and its client's,
 *   inverted) stay IPv6, but where the host routes them a relay carries the packets on to the
 *   IPv4 address they embed: they are classed by that address too (`tunnelled`).
 *
 * Then one class per address: this host (loopback, unspecified, the host's own interfaces),
 * link-local (cloud metadata, `169.254.169.254` and EC2's `fd00:ec2::254`, counted with it),
 * private (RFC 1918, shared 100.64/10, unique-local fc00::/7 and the old site-local fec0::/10:
 * the operator's networks, the container host, a cluster's services) or remote.
 * Private networks are reached only where the operator allowed them by CIDR
 * (`--allow-network 10.0.0.0/8`): `networkMatcher`.
 */
import { BlockList, isIP } from 'node:net';
import { networkInterfaces } from 'node:os';
import { domainToASCII } from 'node:url';
import { type RoutedNetwork, routedNetworks } from './host-routes.js';

/** An IP address as numbers: IPv4 as one unsigned 32-bit value, IPv6 as eight 16-bit words. */
type ParsedIp = { family: 4; value: number } | { family: 6; words: number[] };

// Both read a spelling `net.isIP` has accepted (parseLiteral), so neither checks it again.
function parseIpv4(s: string): number {
  return s.split('.').reduce((value, part) => value * 256 + Number(part), 0);
}

function parseIpv6(s: string): number[] {
  let text = s;
  const tail: number[] = [];
  // An embedded dotted IPv4 tail (`::ffff:127.0.0.1`) is the last two words.
  const lastColon = text.lastIndexOf(':');
  const last = text.slice(lastColon + 1);
  if (last.includes('.')) {
    const v4 = parseIpv4(last);
    tail.push(v4 >>> 16, v4 & 0xffff);
    text = text.slice(0, lastColon + 1);
    if (!text.endsWith('::')) text = text.slice(0, -1);
  }
  const halves = text.split('::');
  const words = (part: string | undefined) =>
    part === undefined || part === '' ? [] : part.split(':').map((w) => parseInt(w, 16));
  const head = words(halves[0]);
  const back = [...words(halves[1]), ...tail];
  return [...head, ...new Array<number>(8 - head.length - back.length).fill(0), ...back];
}

/** A literal address in standard spelling (what `net.isIP` accepts, a zone id allowed). */
function parseLiteral(address: string): ParsedIp | undefined {
  const bare = address.replace(/%.*$/, ''); // zone id: `fe80::1%eth0`
  switch (isIP(bare)) {
    case 4:
      return { family: 4, value: parseIpv4(bare) };
    case 6: {
      const words = parseIpv6(bare.toLowerCase());
      // IPv4-mapped (::ffff:a.b.c.d), the deprecated IPv4-compatible (::a.b.c.d) and NAT64's
      // well-known prefix (64:ff9b::a.b.c.d) are judged as the IPv4 address they carry.
      const zeros = (from: number, to: number) => words.slice(from, to).every((w) => w === 0);
      const w5 = words[5]!;
      const v4 = ((words[6]! << 16) + words[7]!) >>> 0;
      if (zeros(0, 5) && (w5 === 0xffff || (w5 === 0 && v4 > 1))) return { family: 4, value: v4 };
      if (words[0] === 0x64 && words[1] === 0xff9b && zeros(2, 6)) return { family: 4, value: v4 };
      return { family: 6, words };
    }
    default:
      return undefined;
  }
}

/**
 * An address in any spelling the kernel's resolver would connect to: a literal, bracketed IPv6,
 * or a numeric IPv4 shorthand (`0`, `127.1`, `0x7f.1`, `2130706433`, `017700000001`).
 */
function parseIp(spelling: string): ParsedIp | undefined {
  let s = spelling.trim();
  if (s.startsWith('[') && s.endsWith(']')) s = s.slice(1, -1);
  const literal = parseLiteral(s);
  if (literal !== undefined || !/^[0-9a-fA-FxX.]+$/.test(s)) return literal;
  // WHATWG host parsing reads numeric hosts as inet_aton does: one to four parts, each decimal,
  // octal (leading 0) or hex (0x), the last filling the remaining bytes
  const ascii = domainToASCII(s);
  return isIP(ascii) === 4 ? parseLiteral(ascii) : undefined;
}

function spell(ip: ParsedIp): string {
  if (ip.family === 6) return ip.words.map((w) => w.toString(16)).join(':');
  const v = ip.value;
  return [v >>> 24, (v >>> 16) & 255, (v >>> 8) & 255, v & 255].join('.');
}

/**
 * One spelling per literal address, so `::ffff:10.0.0.1`, `::FFFF:a00:1` and `10.0.0.1` compare
 * equal; `undefined` for anything that is not a literal IP address.
 */
export function canonicalIp(address: string): string | undefined {
  const ip = parseLiteral(address);
  return ip && spell(ip);
}

/**
 * The destination the kernel connects to for `spelling`, in `canonicalIp` spelling: numeric
 * shorthands and brackets too (`0x7f.1` → `127.0.0.1`, `[::ffff:a00:1]` → `10.0.0.1`, `0` →
 * `0.0.0.0`). `undefined` when it is no address (a name, to be resolved first).
 */
export function kernelAddress(spelling: string): string | undefined {
  const ip = parseIp(spelling);
  return ip && spell(ip);
}

/**
 * - `loopback`: 127.0.0.0/8, ::1
 * - `unspecified`: 0.0.0.0/8, :: (connecting there reaches the host)
 * - `host`: one of the host's own interface addresses
 * - `link-local`: 169.254.0.0/16, fe80::/10 (cloud metadata lives here), and fd00:ec2::254
 * - `private`: 10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7, fec0::/10, the special-purpose
 *   ranges no one routes on the internet (documentation, benchmarking, reserved, multicast,
 *   local NAT64), the networks the host's interfaces are on or it routes to other than by its
 *   default route, and a 6to4, Teredo or NAT64 address embedding an IPv4 address that is not
 *   remote (link-local embedded: `link-local`); such an address is reached only if the operator
 *   allowed its network by CIDR
 * - `remote`: anything else
 */
export type AddressKind = 'loopback' | 'unspecified' | 'host' | 'link-local' | 'private' | 'remote';

/** The kinds that are this host: whatever their spelling, one machine with one set of ports. */
export const THIS_HOST: readonly AddressKind[] = ['loopback', 'unspecified', 'host'];

const PRIVATE = new BlockList();
PRIVATE.addSubnet('10.0.0.0', 8, 'ipv4');
PRIVATE.addSubnet('172.16.0.0', 12, 'ipv4');
PRIVATE.addSubnet('192.168.0.0', 16, 'ipv4');
PRIVATE.addSubnet('100.64.0.0', 10, 'ipv4');
PRIVATE.addSubnet('fc00::', 7, 'ipv6');
PRIVATE.addSubnet('fec0::', 10, 'ipv6');
// special-purpose ranges that are not reachable on the internet (the IANA registries): an
// operator's lab, benchmark or documentation networks, and addresses no one routes, live there
PRIVATE.addSubnet('192.0.0.0', 24, 'ipv4'); // IETF protocol assignments
PRIVATE.addSubnet('192.0.2.0', 24, 'ipv4'); // documentation (TEST-NET-1)
PRIVATE.addSubnet('198.51.100.0', 24, 'ipv4'); // documentation (TEST-NET-2)
PRIVATE.addSubnet('203.0.113.0', 24, 'ipv4'); // documentation (TEST-NET-3)
PRIVATE.addSubnet('198.18.0.0', 15, 'ipv4'); // benchmarking
PRIVATE.addSubnet('224.0.0.0', 4, 'ipv4'); // multicast
PRIVATE.addSubnet('240.0.0.0', 4, 'ipv4'); // reserved, and the broadcast address
PRIVATE.addSubnet('64:ff9b:1::', 48, 'ipv6'); // local-use NAT64
PRIVATE.addSubnet('100::', 64, 'ipv6'); // discard-only
PRIVATE.addSubnet('2001:2::', 48, 'ipv6'); // benchmarking
PRIVATE.addSubnet('2001:db8::', 32, 'ipv6'); // documentation
PRIVATE.addSubnet('3fff::', 20, 'ipv6'); // documentation
PRIVATE.addSubnet('ff00::', 8, 'ipv6'); // multicast

/** The host's own addresses, and the networks it is on or routes to (`hostAddresses()`). */
export interface HostAddresses extends ReadonlySet<string> {
  /** Whether an address (`canonicalIp` spelling) is on one of the host's networks. */
  readonly onHostNetwork?: (canonical: string, family: 'ipv4' | 'ipv6') => boolean;
}

/** EC2's IPv6 metadata service: inside fc00::/7, but refused like link-local whatever is allowed. */
const METADATA_V6 = 'fd00:ec2:0:0:0:0:0:254';

/**
 * Classify an address in any spelling (`kernelAddress`). `hostAddrs` holds `canonicalIp`
 * spellings of the host's own addresses (see `hostAddresses()`). Anything that does not parse is
 * `unspecified`: refused like the host, never waved through.
 */
export function classifyAddress(address: string, hostAddrs: HostAddresses): AddressKind {
  const ip = parseIp(address);
  if (ip === undefined) return 'unspecified';
  if (ip.family === 4) {
    const first = ip.value >>> 24;
    if (first === 127) return 'loopback';
    if (first === 0) return 'unspecified';
  } else {
    if (ip.words.every((w) => w === 0)) return 'unspecified';
    if (ip.words.slice(0, 7).every((w) => w === 0) && ip.words[7] === 1) return 'loopback';
  }
  const canonical = spell(ip);
  if (hostAddrs.has(canonical)) return 'host';
  const tunnelled = ip.family === 6 ? tunnelledKind(ip.words, hostAddrs) : 'remote';
  if (tunnelled !== 'remote') return tunnelled;
  if (ip.family === 4 ? ip.value >>> 16 === 0xa9fe : (ip.words[0]! & 0xffc0) === 0xfe80) {
    return 'link-local';
  }
  if (canonical === METADATA_V6) return 'link-local';
  const family = ip.family === 4 ? 'ipv4' : 'ipv6';
  if (PRIVATE.check(canonical, family)) return 'private';
  // the networks the host is on are the operator's, whatever their addresses look like
  if (hostAddrs.onHostNetwork?.(canonical, family)) return 'private';
  return 'remote';
}

/**
 * The class of what a 6to4 or Teredo address carries on to: `remote` when every IPv4 address it
 * embeds is remote (or it is neither), `link-local` when one is link-local, else `private`. A
 * relay, not this host, delivers them, so this host's own addresses there are `private` too.
 * (NAT64's `64:ff9b::/96` never comes here: parseLiteral reads it as its IPv4 address.)
 */
function tunnelledKind(words: readonly number[], hostAddrs: HostAddresses): AddressKind {
  const v4 = (hi: number, lo: number) => ((hi << 16) + lo) >>> 0;
  let embedded: number[] = [];
  if (words[0] === 0x2002) embedded = [v4(words[1]!, words[2]!)];
  else if (words[0] === 0x2001 && words[1] === 0) {
    embedded = [v4(words[2]!, words[3]!), v4(words[6]! ^ 0xffff, words[7]! ^ 0xffff)];
  }
  const kinds = embedded.map((value) => classifyAddress(spell({ family: 4, value }), hostAddrs));
  if (kinds.includes('link-local')) return 'link-local';
  return kinds.every((k) => k === 'remote') ? 'remote' : 'private';
}

/**
 * The host's own addresses right now (interfaces come and go), in `canonicalIp` spelling, with
 * the networks its interfaces other than loopback are on and those it routes to other than by its
 * default route (`host-routes.ts`: a network behind a next hop, a point-to-point peer; `routes`
 * are the kernel's, read at most a second ago, unless given).
 */
export function hostAddresses(routes: readonly RoutedNetwork[] = routedNetworks()): HostAddresses {
  const out = new Set<string>();
  const networks = new BlockList();
  for (const list of Object.values(networkInterfaces())) {
    for (const info of list ?? []) {
      const c = canonicalIp(info.address);
      if (c !== undefined) out.add(c);
      const net = !info.internal && info.cidr !== null ? parseCidr(info.cidr) : undefined;
      // a /0 would be every address; a host route (/32, /128) is the address itself
      if (net && net.prefix > 0) {
        networks.addSubnet(net.address, net.prefix, net.family === 4 ? 'ipv4' : 'ipv6');
      }
    }
  }
  for (const net of routes) {
    networks.addSubnet(net.address, net.prefix, net.family === 4 ? 'ipv4' : 'ipv6');
  }
  return Object.assign(out, {
    onHostNetwork: (canonical: string, family: 'ipv4' | 'ipv6') =>
      networks.check(canonical, family),
  });
}

/** A CIDR (`10.0.0.0/8`, `fd00::/8`; a bare address is its own /32 or /128), or `undefined`. */
export function parseCidr(
  cidr: string,
): { address: string; prefix: number; family: 4 | 6 } | undefined {
  const m = /^([^/]+?)(?:\/(\d{1,3}))?$/.exec(cidr.trim());
  if (!m) return undefined;
  const ip = parseLiteral(m[1]!.replace(/^\[(.*)\]$/, '$1'));
  if (ip === undefined) return undefined;
  const max = ip.family === 4 ? 32 : 128;
  const prefix = m[2] === undefined ? max : Number(m[2]);
  if (prefix > max) return undefined;
  return { address: spell(ip), prefix, family: ip.family };
}

/** Whether an address (any spelling) falls in one of `cidrs`; entries that are no CIDR are ignored. */
export function networkMatcher(cidrs: readonly string[]): (address: string) => boolean {
  const list = new BlockList();
  for (const c of cidrs) {
    const n = parseCidr(c);
    if (n) list.addSubnet(n.address, n.prefix, n.family === 4 ? 'ipv4' : 'ipv6');
  }
  return (address) => {
    const ip = parseIp(address);
    return ip !== undefined && list.check(spell(ip), ip.family === 4 ? 'ipv4' : 'ipv6');
  };
}

/**
 * The client a connection from `address` (a socket's peer) counts as, for the caps per client:
 * IPv4, IPv4-mapped IPv6 with it, by its address; all of 127.0.0.0/8 and `::1` as one client,
 * `this host` (any local user may bind any of sixteen million loopback addresses); IPv6 by its
 * /64 (a host picks any address of its /64 at will: SLAAC, privacy addresses). Anything that is
 * no address stays as it is.
 */
export function clientKey(address: string): string {
  const ip = parseLiteral(address);
  if (ip === undefined) return address;
  if (ip.family === 4) return ip.value >>> 24 === 127 ? 'this host' : spell(ip);
  const w = ip.words;
  if (w.slice(0, 7).every((x) => x === 0) && w[7] === 1) return 'this host';
  return `${w
    .slice(0, 4)
    .map((x) => x.toString(16))
    .join(':')}::/64`;
}
