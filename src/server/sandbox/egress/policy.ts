/**
 * What an instance's egress may reach, as pure functions over names, addresses and ports; the
 * proxy in `egress.ts` calls them for every connection it is asked to open.
 *
 * Two independent rules:
 * - **Names:** a blocked domain refuses itself and every subdomain, compared in the one spelling
 *   both sides are reduced to by `normalizeHost` (lower case, IDNA A-label, no trailing dot).
 * - **Addresses:** every address a name resolves to is classified; anything that reaches the host
 *   itself (loopback, unspecified, the host's own interface addresses, in IPv4-mapped spelling
 *   too) is refused unless the operator allowed host loopback or that port, and burrow's own ports
 *   never. Link-local addresses (169.254.0.0/16 holds cloud metadata services with credentials;
 *   fe80::/10) are refused whatever the flags, unless the address is one of the host's own, since
 *   "host loopback" is what the operator flags name.
 */
import { isIP } from 'node:net';
import { networkInterfaces } from 'node:os';
import { domainToASCII } from 'node:url';

/**
 * One spelling of a host for matching and resolving: `Example.COM.` → `example.com`,
 * `[::1]` → `::1`, `bücher.de` → `xn--bcher-kva.de`, `0x7f.1` → `127.0.0.1` (WHATWG host parsing,
 * which agrees with how the resolver reads such numbers). `undefined` when it is no host at all.
 */
export function normalizeHost(host: string): string | undefined {
  let h = host.trim();
  if (h.startsWith('[') && h.endsWith(']')) h = h.slice(1, -1);
  if (isIP(h) === 6) return h.toLowerCase();
  // ASCII beyond letters, digits, `.`, `-`, `_` is no host; `domainToASCII` would read `a/b` as `a`.
  if (h === '' || h.length > 255 || /[^A-Za-z0-9._\-\u0080-\u{10ffff}]/u.test(h)) return undefined;
  const ascii = domainToASCII(h).replace(/\.+$/, '');
  if (ascii === '' || ascii.startsWith('.') || ascii.includes('..')) return undefined;
  return ascii;
}

/**
 * A matcher for `blocked_domains`: returns the blocked domain that `host` falls under (itself or a
 * subdomain of it), else `undefined`. Entries that are not host names are ignored (the API
 * validates them before they get here).
 */
export function blockedDomainMatcher(
  domains: readonly string[],
): (host: string) => string | undefined {
  const blocked = new Set<string>();
  for (const d of domains) {
    const n = normalizeHost(d.replace(/^\.+/, ''));
    if (n !== undefined) blocked.add(n);
  }
  return (host) => {
    if (blocked.size === 0) return undefined;
    let h = normalizeHost(host);
    // Walk up the labels: `a.b.example.com` is checked as itself, `b.example.com`, `example.com`, `com`.
    while (h !== undefined) {
      if (blocked.has(h)) return h;
      const dot = h.indexOf('.');
      h = dot < 0 ? undefined : h.slice(dot + 1);
    }
    return undefined;
  };
}

/** An IP address as numbers: IPv4 as one unsigned 32-bit value, IPv6 as eight 16-bit words. */
type ParsedIp = { family: 4; value: number } | { family: 6; words: number[] };

function parseIpv4(s: string): number | undefined {
  const parts = s.split('.');
  if (parts.length !== 4) return undefined;
  let value = 0;
  for (const p of parts) {
    if (!/^\d{1,3}$/.test(p) || Number(p) > 255) return undefined;
    value = value * 256 + Number(p);
  }
  return value;
}

function parseIpv6(s: string): number[] | undefined {
  let text = s;
  const tail: number[] = [];
  // An embedded dotted IPv4 tail (`::ffff:127.0.0.1`) is the last two words.
  const lastColon = text.lastIndexOf(':');
  const last = text.slice(lastColon + 1);
  if (last.includes('.')) {
    const v4 = parseIpv4(last);
    if (v4 === undefined) return undefined;
    tail.push(v4 >>> 16, v4 & 0xffff);
    text = text.slice(0, lastColon + 1);
    if (!text.endsWith('::')) text = text.slice(0, -1);
  }
  const halves = text.split('::');
  if (halves.length > 2) return undefined;
  const words = (part: string | undefined) =>
    part === undefined || part === '' ? [] : part.split(':').map((w) => parseInt(w, 16));
  const head = words(halves[0]);
  const back = [...words(halves[1]), ...tail];
  const missing = 8 - head.length - back.length;
  if (halves.length === 1 ? missing !== 0 : missing < 1) return undefined;
  const all = [...head, ...new Array<number>(Math.max(0, missing)).fill(0), ...back];
  return all.every((w) => Number.isInteger(w) && w >= 0 && w <= 0xffff) ? all : undefined;
}

function parseIp(address: string): ParsedIp | undefined {
  const bare = address.replace(/%.*$/, ''); // zone id: `fe80::1%eth0`
  switch (isIP(bare)) {
    case 4: {
      const value = parseIpv4(bare);
      return value === undefined ? undefined : { family: 4, value };
    }
    case 6: {
      const words = parseIpv6(bare.toLowerCase());
      if (words === undefined) return undefined;
      // IPv4-mapped (::ffff:a.b.c.d) and the deprecated IPv4-compatible (::a.b.c.d) forms are
      // judged as the IPv4 address they carry.
      const high = words.slice(0, 5).every((w) => w === 0);
      const w5 = words[5]!;
      const v4 = (words[6]! << 16) + words[7]!;
      if (high && (w5 === 0xffff || (w5 === 0 && v4 > 1))) return { family: 4, value: v4 >>> 0 };
      return { family: 6, words };
    }
    default:
      return undefined;
  }
}

/**
 * One spelling per address, so `::ffff:10.0.0.1`, `::FFFF:a00:1` and `10.0.0.1` compare equal;
 * `undefined` for anything that is not an IP address.
 */
export function canonicalIp(address: string): string | undefined {
  const ip = parseIp(address);
  if (ip === undefined) return undefined;
  if (ip.family === 4) {
    const v = ip.value;
    return [v >>> 24, (v >>> 16) & 255, (v >>> 8) & 255, v & 255].join('.');
  }
  return ip.words.map((w) => w.toString(16)).join(':');
}

/**
 * - `loopback`: 127.0.0.0/8, ::1
 * - `unspecified`: 0.0.0.0/8, :: (connecting there reaches the host)
 * - `host`: one of the host's own interface addresses
 * - `link-local`: 169.254.0.0/16, fe80::/10 (cloud metadata lives here)
 * - `remote`: anything else (LAN and private ranges included)
 */
export type AddressKind = 'loopback' | 'unspecified' | 'host' | 'link-local' | 'remote';

/**
 * Classify a resolved address. `hostAddresses` holds `canonicalIp` spellings of the host's own
 * addresses (see `hostAddresses()`). Anything that does not parse is `unspecified`: refused like
 * the host, never waved through.
 */
export function classifyAddress(address: string, hostAddrs: ReadonlySet<string>): AddressKind {
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
  if (hostAddrs.has(canonicalIp(address)!)) return 'host';
  if (ip.family === 4 ? ip.value >>> 16 === 0xa9fe : (ip.words[0]! & 0xffc0) === 0xfe80) {
    return 'link-local';
  }
  return 'remote';
}

/** The host's own addresses right now (interfaces come and go), in `canonicalIp` spelling. */
export function hostAddresses(): Set<string> {
  const out = new Set<string>();
  for (const list of Object.values(networkInterfaces())) {
    for (const info of list ?? []) {
      const c = canonicalIp(info.address);
      if (c !== undefined) out.add(c);
    }
  }
  return out;
}

/** The operator's rules for reaching the host itself; see `EgressPolicy` in `egress.ts`. */
export interface HostAccess {
  readonly allowHostLoopback: boolean;
  readonly allowHostPorts: readonly number[];
  readonly protectedPorts: Iterable<number>;
  /**
   * Endpoints of burrow's own cluster (its database, its nodes), never reachable from an
   * instance wherever they are: `address` (canonical) with a port, or every port of it.
   */
  readonly refusedEndpoints?: Iterable<RefusedEndpoint>;
}

/** An endpoint no instance reaches (`HostAccess.refusedEndpoints`); no port: every port. */
export interface RefusedEndpoint {
  address: string;
  port?: number;
}

export type AddressRefusalCode =
  'host_local' | 'protected_port' | 'link_local' | 'cluster_endpoint';

export interface AddressRefusal {
  code: AddressRefusalCode;
  /** Short, for the refusal body; names the address and port, nothing else. */
  message: string;
}

/**
 * Whether `port` may be reached on every one of `addresses` (all of them are checked, since the
 * connection may land on any): `undefined` when allowed, else why not.
 */
export function checkAddresses(
  access: HostAccess,
  addresses: readonly string[],
  port: number,
  hostAddrs: ReadonlySet<string>,
): AddressRefusal | undefined {
  const refused = [...(access.refusedEndpoints ?? [])];
  for (const address of addresses) {
    const canonical = canonicalIp(address) ?? address;
    const hit = refused.find(
      (e) => e.address === canonical && (e.port === undefined || e.port === port),
    );
    if (hit) {
      return {
        code: 'cluster_endpoint',
        message: `${address}${hit.port === undefined ? '' : ` port ${port}`} belongs to this burrow cluster (its database or a node)`,
      };
    }
    const kind = classifyAddress(address, hostAddrs);
    if (kind === 'remote') continue;
    if (kind === 'link-local') {
      return { code: 'link_local', message: `${address} is link-local (never reachable)` };
    }
    if ([...access.protectedPorts].includes(port)) {
      return { code: 'protected_port', message: `port ${port} of the host is burrow's own` };
    }
    if (!access.allowHostLoopback && !access.allowHostPorts.includes(port)) {
      return {
        code: 'host_local',
        message: `${address} is the host (${kind}); port ${port} is not allowed`,
      };
    }
  }
  return undefined;
}
