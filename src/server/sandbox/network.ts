/**
 * An instance's way out: its network namespace has only a loopback interface, and burrow's egress
 * proxy (egress.ts) listens on 127.0.0.1:3128 in there. Every process of the instance is pointed
 * at it through the proxy environment variables, Chromium through `--proxy-server`; a process that
 * ignores them reaches nothing (no route, no DNS server).
 */
import { lookup } from 'node:dns/promises';
import net from 'node:net';
import tls from 'node:tls';
import { background } from '../../internal/background.js';
import type { Logger } from '../../internal/log.js';
import { Egress, type EgressRefusalCode } from './egress/egress.js';
import { checkAddresses, hostAddresses } from './egress/policy.js';
import {
  socksCredentialsCheck,
  UpstreamFailure,
  upstreamLabel,
  type UpstreamProxy,
} from './egress/upstream.js';
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
 * `ERR_BLOCKED_BY_ADMINISTRATOR`). A target that refuses or resets the connection, or never
 * answers, fails as it would locally too (`ERR_CONNECTION_REFUSED`, `ERR_CONNECTION_RESET`,
 * `ERR_TIMED_OUT`): the egress makes the navigation's connection while checking it.
 */
export type NavigationFailureReason =
  | 'NameNotResolved'
  | 'ConnectionRefused'
  | 'ConnectionReset'
  | 'TimedOut'
  | 'AddressUnreachable'
  | 'BlockedByClient'
  | 'ConnectionFailed'
  | 'AccessDenied';

export interface NavigationRefusal {
  reason: NavigationFailureReason;
  /** The egress's refusal, naming the operator's switch where there is one. */
  message: string;
}

const FAILURES: Partial<Record<EgressRefusalCode, NavigationFailureReason>> = {
  dns_failed: 'NameNotResolved',
  host_local: 'ConnectionRefused',
  protected_port: 'ConnectionRefused',
  cluster_endpoint: 'ConnectionRefused',
  link_local: 'AddressUnreachable',
  private_network: 'AddressUnreachable',
  blocked_domain: 'BlockedByClient',
  // the upstream proxy (`proxy` of the start request): the DevTools protocol has no
  // ERR_PROXY_* reasons, so the nearest ones: ERR_CONNECTION_FAILED for an upstream that cannot
  // be reached or does not reach the target, ERR_ACCESS_DENIED for refused credentials
  proxy_unreachable: 'ConnectionFailed',
  proxy_refused: 'ConnectionFailed',
  proxy_failed: 'ConnectionFailed',
  proxy_auth_failed: 'AccessDenied',
  // a target that does not answer within the egress's connect deadline
  timeout: 'TimedOut',
};

/** How a target that could not be connected to fails a navigation, by the error's code. */
function connectFailure(message: string): NavigationFailureReason {
  if (/ECONNREFUSED/.test(message)) return 'ConnectionRefused';
  if (/ECONNRESET/.test(message)) return 'ConnectionReset';
  if (/EHOSTUNREACH|ENETUNREACH/.test(message)) return 'AddressUnreachable';
  return 'ConnectionFailed';
}

const DEFAULT_PORTS: Record<string, number> = {
  'http:': 80,
  'ws:': 80,
  'https:': 443,
  'wss:': 443,
};

export interface InstanceEgress {
  /** Enforce these blocked domains from now on. */
  setBlockedDomains(domains: readonly string[]): void;
  /** Chain to this upstream proxy from now on (`undefined`: connect directly). */
  setUpstream(upstream: UpstreamProxy | undefined): void;
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
  upstream?: UpstreamProxy,
  onEvent?: (type: string, message: string) => void,
): Promise<InstanceEgress> {
  const listener = await sandbox.listen(EGRESS_PORT);
  const egress = new Egress(
    {
      ...(onEvent && { onEvent }),
      blockedDomains,
      allowHostLoopback: host.allowHostLoopback,
      allowHostPorts: host.allowHostPorts,
      allowNetworks: host.allowNetworks,
      protectedPorts: () => host.protectedPorts(),
      refusedEndpoints: () => host.refusedEndpoints(),
      upstream,
    },
    log,
  );
  listener.on('connection', (socket) => egress.handle(background(socket)));
  listener.on('error', (err) => log.warn({ err }, 'egress listener failed'));
  return {
    setBlockedDomains: (domains) => egress.setBlockedDomains(domains),
    setUpstream: (u) => egress.setUpstream(u),
    async checkNavigation(url) {
      const target = egressTarget(url);
      if (target === undefined) return undefined;
      const verdict = await egress.check(target.host, target.port);
      if (!verdict) return undefined;
      const reason =
        verdict.code === 'connect_failed'
          ? connectFailure(verdict.message)
          : FAILURES[verdict.code];
      return reason && { reason, message: verdict.message };
    },
    close() {
      listener.close();
      egress.close();
    },
  };
}

/** Why an upstream proxy cannot be used, from `probeUpstream`. */
export interface UpstreamProbeFailure {
  code: 'proxy_refused' | 'proxy_unreachable' | 'proxy_auth_failed';
  message: string;
}

/**
 * What the start of an instance checks of its `proxy`, before anything of the instance exists:
 * the upstream's address passes the egress's address rules (a host-local upstream only on a port
 * the operator opened, burrow's own ports and link-local addresses never), a TCP connection (and
 * TLS for `https://`) is made within `timeoutMs`, and a SOCKS5 upstream accepts the credentials.
 * An HTTP upstream's credentials are first tried by the instance's first connection (HTTP proxies
 * judge them per request). `undefined` when usable.
 */
export async function probeUpstream(
  host: SandboxHost,
  u: UpstreamProxy,
  timeoutMs = 10_000,
): Promise<UpstreamProbeFailure | undefined> {
  const name = upstreamLabel(u);
  let addresses: string[];
  try {
    const family = net.isIP(u.host);
    const lower = u.host.toLowerCase();
    addresses =
      family !== 0
        ? [u.host]
        : lower === 'localhost' || lower.endsWith('.localhost')
          ? ['127.0.0.1', '::1']
          : (await lookup(u.host, { all: true, verbatim: true })).map((a) => a.address);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'lookup failed';
    return {
      code: 'proxy_unreachable',
      message: `proxy ${name}: cannot resolve ${u.host} (${code})`,
    };
  }
  const refused = checkAddresses(
    {
      allowHostLoopback: host.allowHostLoopback,
      allowHostPorts: host.allowHostPorts,
      allowNetworks: host.allowNetworks,
      protectedPorts: host.protectedPorts(),
      refusedEndpoints: host.refusedEndpoints(),
    },
    addresses,
    u.port,
    hostAddresses(),
  );
  if (refused) {
    const hint =
      refused.code === 'host_local'
        ? `; burrow serve --allow-host-port ${u.port} lets instances use it`
        : '';
    return { code: 'proxy_refused', message: `proxy ${name}: ${refused.message}${hint}` };
  }
  let socket: net.Socket | undefined;
  const timer = setTimeout(
    () => socket?.destroy(new Error(`no answer within ${timeoutMs} ms`)),
    timeoutMs,
  );
  try {
    socket = background(net.connect({ host: addresses[0]!, port: u.port, noDelay: true }));
    socket.on('error', () => {});
    const open = socket;
    await new Promise<void>((resolve, reject) => {
      open.once('connect', resolve);
      open.once('error', reject);
      open.once('close', () => reject(new Error('closed')));
    });
    if (u.scheme === 'https') {
      const secure = tls.connect({
        socket: open,
        ...(net.isIP(u.host) === 0 && { servername: u.host }),
      });
      socket = secure;
      secure.on('error', () => {});
      await new Promise<void>((resolve, reject) => {
        secure.once('secureConnect', resolve);
        secure.once('error', reject);
        secure.once('close', () => reject(new Error('closed')));
      });
    }
    if (u.scheme === 'socks5') await socksCredentialsCheck(socket, u);
    return undefined;
  } catch (err) {
    if (err instanceof UpstreamFailure && err.code === 'proxy_auth_failed') {
      return { code: 'proxy_auth_failed', message: `proxy ${name}: ${err.message}` };
    }
    const e = err as NodeJS.ErrnoException;
    return {
      code: 'proxy_unreachable',
      message: `proxy ${name} cannot be reached (${e.code ?? e.message})`,
    };
  } finally {
    clearTimeout(timer);
    socket?.destroy();
  }
}
