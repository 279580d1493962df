/**
 * An instance's way out: its network namespace has only a loopback interface, and burrow's egress
 * proxy (egress.ts) listens on 127.0.0.1:3128 in there. Every process of the instance is pointed
 * at it through the proxy environment variables, Chromium through `--proxy-server`; a process that
 * ignores them reaches nothing (no route, no DNS server).
 */
import { background } from '../../internal/background.js';
import type { Logger } from '../../internal/log.js';
import { Egress, type EgressRefusalCode } from './egress/egress.js';
import type { SandboxHost } from './host.js';
import { SANDBOX_HOSTNAME } from './rootfs.js';
import type { Sandbox } from './sandbox.js';

/** The egress proxy's port on the instance's own loopback. */
export const EGRESS_PORT = 3128;
export const EGRESS_PROXY = `http://127.0.0.1:${EGRESS_PORT}`;

/**
 * Proxy variables for the instance's processes (curl, pip, Python, Node honour some of them).
 * The instance's own loopback stays direct: a server started in bash is reached at localhost.
 */
export function proxyEnv(): Record<string, string> {
  const noProxy = 'localhost,127.0.0.1,::1';
  return {
    HTTP_PROXY: EGRESS_PROXY,
    HTTPS_PROXY: EGRESS_PROXY,
    http_proxy: EGRESS_PROXY,
    https_proxy: EGRESS_PROXY,
    NO_PROXY: noProxy,
    no_proxy: noProxy,
  };
}

/**
 * Chromium flags for the egress. `hostLoopback`: the browser's `localhost`/`127.0.0.1` is the
 * host's, reached through the egress where the operator allowed it (browser instances always:
 * nothing of their own listens; the ubuntu desktop browser when the operator allowed host
 * loopback ports, as test suites need). Otherwise loopback stays the instance's own. Either way
 * the instance's own servers answer at `http://burrow:PORT` (its host name, 127.0.1.1).
 */
export function chromiumProxyArgs(hostLoopback: boolean): string[] {
  return [
    `--proxy-server=${EGRESS_PROXY}`,
    `--proxy-bypass-list=${hostLoopback ? '<-loopback>;' : ''}${SANDBOX_HOSTNAME}`,
  ];
}

/** Whether the operator lets instances reach some host loopback port. */
export function hostLoopbackAllowed(host: SandboxHost): boolean {
  return host.allowHostLoopback || host.allowHostPorts.length > 0;
}

/**
 * How a navigation the egress would refuse fails instead, as the `Fetch.failRequest` reason
 * whose `net::ERR_*` a local Chromium gives for the same cause: a name that does not resolve
 * `ERR_NAME_NOT_RESOLVED`, a host port the operator did not open `ERR_CONNECTION_REFUSED` (as a
 * closed port would), a link-local address `ERR_ADDRESS_UNREACHABLE`, a blocked domain
 * `ERR_BLOCKED_BY_CLIENT` (the closest the DevTools protocol offers to Chromium's
 * `ERR_BLOCKED_BY_ADMINISTRATOR`). Anything else is left to the proxy's own answer.
 */
export type NavigationFailureReason =
  'NameNotResolved' | 'ConnectionRefused' | 'AddressUnreachable' | 'BlockedByClient';

export interface NavigationRefusal {
  reason: NavigationFailureReason;
  /** The egress's refusal, naming the operator's switch where there is one. */
  message: string;
}

const FAILURES: Partial<Record<EgressRefusalCode, NavigationFailureReason>> = {
  dns_failed: 'NameNotResolved',
  host_local: 'ConnectionRefused',
  protected_port: 'ConnectionRefused',
  link_local: 'AddressUnreachable',
  blocked_domain: 'BlockedByClient',
};

const DEFAULT_PORTS: Record<string, number> = {
  'http:': 80,
  'ws:': 80,
  'https:': 443,
  'wss:': 443,
};

export interface InstanceEgress {
  /** Enforce these blocked domains from now on. */
  setBlockedDomains(domains: readonly string[]): void;
  /**
   * Whether a browser navigation to `url` would be refused by the egress, and how it should
   * fail then; `undefined` for URLs the egress does not see or would let through.
   */
  checkNavigation(url: string): Promise<NavigationRefusal | undefined>;
  close(): void;
}

/**
 * Whether `url` names a loopback host (`localhost`, `*.localhost`, 127.0.0.0/8, `[::1]`): what
 * Chromium sends direct, not to its proxy, unless told `<-loopback>` (chromiumProxyArgs).
 */
export function isLoopbackUrl(url: string): boolean {
  let host: string;
  try {
    host = new URL(url).hostname.toLowerCase().replace(/\.$/, '');
  } catch {
    return false;
  }
  return (
    host === 'localhost' ||
    host.endsWith('.localhost') ||
    host === '[::1]' ||
    /^127\.\d+\.\d+\.\d+$/.test(host)
  );
}

/** The `host`, `port` an egress would be asked for to load `url`, if it goes through one. */
export function egressTarget(url: string): { host: string; port: number } | undefined {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return undefined;
  }
  const fallback = DEFAULT_PORTS[u.protocol];
  if (fallback === undefined) return undefined;
  const host = u.hostname.replace(/^\[(.*)\]$/, '$1');
  // the instance's own host name is never proxied (chromiumProxyArgs' bypass list)
  if (host === '' || host.toLowerCase() === SANDBOX_HOSTNAME) return undefined;
  return { host, port: u.port === '' ? fallback : Number(u.port) };
}

/** Open the egress listener inside `sandbox` and serve it with the host's policy. */
export async function openEgress(
  sandbox: Sandbox,
  host: SandboxHost,
  blockedDomains: readonly string[],
  log: Logger,
): Promise<InstanceEgress> {
  const listener = await sandbox.listen(EGRESS_PORT);
  const egress = new Egress(
    {
      blockedDomains,
      allowHostLoopback: host.allowHostLoopback,
      allowHostPorts: host.allowHostPorts,
      protectedPorts: () => host.protectedPorts(),
    },
    log,
  );
  listener.on('connection', (socket) => egress.handle(background(socket)));
  listener.on('error', (err) => log.warn({ err }, 'egress listener failed'));
  return {
    setBlockedDomains: (domains) => egress.setBlockedDomains(domains),
    async checkNavigation(url) {
      const target = egressTarget(url);
      if (target === undefined) return undefined;
      const verdict = await egress.check(target.host, target.port);
      const reason = verdict && FAILURES[verdict.code];
      return reason && { reason, message: verdict.message };
    },
    close() {
      listener.close();
      egress.close();
    },
  };
}
