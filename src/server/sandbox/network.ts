/**
 * An instance's way out: its network namespace has only a loopback interface, and burrow's egress
 * proxy (egress.ts) listens on 127.0.0.1:3128 in there. Every process of the instance is pointed
 * at it through the proxy environment variables, Chromium through `--proxy-server`; a process that
 * ignores them reaches nothing (no route, no DNS server).
 */
import type { Logger } from '../runtime.js';
import { Egress } from './egress.js';
import type { SandboxHost } from './host.js';
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
 * Chromium flags for the egress. `hostLoopback`: the browser's loopback is the host's (a `browser`
 * instance, where test suites load pages they serve on the host; the egress decides which ports),
 * instead of the instance's own (the ubuntu desktop browser, next to the instance's servers).
 */
export function chromiumProxyArgs(hostLoopback: boolean): string[] {
  return [
    `--proxy-server=${EGRESS_PROXY}`,
    ...(hostLoopback ? ['--proxy-bypass-list=<-loopback>'] : []),
  ];
}

export interface InstanceEgress {
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
  listener.on('connection', (socket) => egress.handle(socket));
  listener.on('error', (err) => log.warn({ err }, 'egress listener failed'));
  return {
    close() {
      listener.close();
      egress.close();
    },
  };
}
