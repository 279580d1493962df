/**
 * An instance's way out: its network namespace has only a loopback interface, and burrow's egress
 * proxy (egress.ts) listens on 127.0.0.1:3128 in there. Every process of the instance is pointed
 * at it through the proxy environment variables, Chromium through `--proxy-server`; a process that
 * ignores them reaches nothing (no route, no DNS server).
 */
import { background } from '../../internal/background.js';
import type { Logger } from '../../internal/log.js';
import { Egress } from './egress/egress.js';
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

export interface InstanceEgress {
  /** Enforce these blocked domains from now on. */
  setBlockedDomains(domains: readonly string[]): void;
  close(): void;
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
    close() {
      listener.close();
      egress.close();
    },
  };
}
