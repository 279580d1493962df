/**
 * What an instance's egress may reach, as pure functions over names, addresses and ports; the
 * proxy in `egress.ts` calls them for every connection it is asked to open.
 *
 * Two independent rules:
 * - **Names:** a blocked domain refuses itself and every subdomain, compared in the one spelling
 *   both sides are reduced to by `normalizeHost` (lower case, IDNA A-label, no trailing dot).
 * - **Addresses:** every address a name resolves to is read as the kernel will connect to it and
 *   classified (`address.ts`); anything that reaches the host itself (loopback, unspecified, the
 *   host's own interface addresses, in every spelling) is refused unless the operator allowed host
 *   loopback or that port (on loopback only, not on the host's other interface addresses),
 *   and burrow's own ports never. Link-local addresses (169.254.0.0/16 holds
 *   cloud metadata services with credentials; fe80::/10) are refused whatever the flags, unless
 *   the address is one of the host's own, since "host loopback" is what the operator flags name.
 *   Private networks (RFC 1918, 100.64/10, fc00::/7) are refused unless allowed by CIDR. The
 *   cluster's database and nodes are refused whatever was allowed, compared as the kernel sees
 *   them.
 */
import { isIP } from 'node:net';
import { domainToASCII } from 'node:url';
import {
  classifyAddress,
  type HostAddresses,
  kernelAddress,
  networkMatcher,
  THIS_HOST,
} from './address.js';

export {
  canonicalIp,
  classifyAddress,
  hostAddresses,
  kernelAddress,
  type AddressKind,
} from './address.js';

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

/** The operator's rules for reaching the host itself; see `EgressPolicy` in `egress.ts`. */
export interface HostAccess {
  readonly allowHostLoopback: boolean;
  readonly allowHostPorts: readonly number[];
  readonly protectedPorts: Iterable<number>;
  /**
   * Endpoints of burrow's own cluster (its database, its nodes), never reachable from an
   * instance wherever they are: an address with a port, or every port of it. One of this host's
   * addresses with a port stands for that port of every address of this host (`0.0.0.0:5432`
   * reaches a database listening on `127.0.0.1:5432`).
   */
  readonly refusedEndpoints?: Iterable<RefusedEndpoint>;
  /** Private networks instances may reach, as CIDRs (`--allow-network`). Default none. */
  readonly allowNetworks?: readonly string[];
}

/** An endpoint no instance reaches (`HostAccess.refusedEndpoints`); no port: every port. */
export interface RefusedEndpoint {
  address: string;
  port?: number;
}

export type AddressRefusalCode =
  'host_local' | 'protected_port' | 'link_local' | 'private_network' | 'cluster_endpoint';

export interface AddressRefusal {
  code: AddressRefusalCode;
  /** Short, for the refusal body; names the address and port, nothing else. */
  message: string;
}

/** One matcher per list of allowed networks (the host's list lives as long as the server). */
const matchers = new WeakMap<readonly string[], (address: string) => boolean>();
function allowedNetwork(cidrs: readonly string[], address: string): boolean {
  let match = matchers.get(cidrs);
  if (match === undefined) matchers.set(cidrs, (match = networkMatcher(cidrs)));
  return match(address);
}

/**
 * Whether `port` may be reached on every one of `addresses` (all of them are checked, since the
 * connection may land on any): `undefined` when allowed, else why not. Each address is read as
 * the kernel reads it (`kernelAddress`) before any rule: the cluster's endpoints, then link-local
 * and metadata (never), private networks (only those allowed), this host (only ports allowed,
 * burrow's own never).
 */
export function checkAddresses(
  access: HostAccess,
  addresses: readonly string[],
  port: number,
  hostAddrs: HostAddresses,
): AddressRefusal | undefined {
  const here = (address: string) => THIS_HOST.includes(classifyAddress(address, hostAddrs));
  const refused = [...(access.refusedEndpoints ?? [])].filter(
    (e) => e.port === undefined || e.port === port,
  );
  for (const address of addresses) {
    const canonical = kernelAddress(address) ?? address;
    const kind = classifyAddress(address, hostAddrs);
    const onThisHost = THIS_HOST.includes(kind);
    const hit = refused.find(
      (e) =>
        (kernelAddress(e.address) ?? e.address) === canonical ||
        (onThisHost && e.port !== undefined && here(e.address)),
    );
    if (hit) {
      return {
        code: 'cluster_endpoint',
        message: `${address}${hit.port === undefined ? '' : ` port ${port}`} belongs to this burrow cluster (its database or a node)`,
      };
    }
    if (kind === 'remote') continue;
    if (kind === 'link-local') {
      return { code: 'link_local', message: `${address} is link-local (never reachable)` };
    }
    if (kind === 'private') {
      if (allowedNetwork(access.allowNetworks ?? [], address)) continue;
      return {
        code: 'private_network',
        message: `${address} is in a private network; port ${port} is not allowed`,
      };
    }
    if ([...access.protectedPorts].includes(port)) {
      return { code: 'protected_port', message: `port ${port} of the host is burrow's own` };
    }
    // a port opened by `--allow-host-port` is a loopback port: `127.0.0.1`, `::1` and `0.0.0.0`
    // (which the kernel connects to loopback), never the host's other interface addresses
    const opened = access.allowHostPorts.includes(port);
    if (!access.allowHostLoopback && !(opened && kind !== 'host')) {
      const only = opened ? ' (opened on loopback only)' : '';
      return {
        code: 'host_local',
        message: `${address} is the host (${kind}); port ${port} is not allowed${only}`,
      };
    }
  }
  return undefined;
}
