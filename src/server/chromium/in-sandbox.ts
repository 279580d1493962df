/**
 * A Chromium of an instance, as both instance types run one (the `browser` instance's, headless,
 * and the ubuntu desktop's, on its display): inside the instance's sandbox as its user, with
 * Chromium's own sandbox on; its profile, downloads and temp files on the instance's disk, made
 * from inside (no host-side `mkdir` follows a link planted there); its network through the egress,
 * where `localhost` pages of the host are allowed or not; a navigation the egress would refuse
 * failing as a local browser's would (issue 20).
 *
 * `chromiumInSandbox` is the one place where what the instance is (its context) becomes what the
 * Chromium layer takes (`ChromiumOptions`): the rest of this folder never sees an instance's
 * context. It is called at each launch, so a warm-pool claim's blocked domains and resolution and
 * a sandbox made after the runtime are what the next Chromium gets.
 */
import { join, posix } from 'node:path';
import type { InstanceIdentity, InstancePlan, InstanceServices } from '../instances/runtime.js';
import {
  chromiumProxyArgs,
  isLoopbackUrl,
  SANDBOX_PATH,
  type NavigationRefusal,
  type Sandbox,
  type SandboxSpawn,
} from '../sandbox/index.js';
import { CHROMIUM_DIR } from './profile-template.js';
import type { ChromiumOptions } from './session.js';
import { cdpRelayUrl } from './urls.js';

/** What a Chromium needs of the sandbox it runs in. */
export interface ChromiumSandbox {
  /**
   * Its processes are sandboxed: their network goes through the egress, they see the home at
   * `home` (the host has it at `hostHome`), and only the sandbox's members are its processes.
   * Otherwise (`--insecure-no-isolation`) they are plain processes of the host.
   */
  readonly isolated: boolean;
  /** HOME as the sandbox's processes see it, and on the host. */
  readonly home: string;
  readonly hostHome: string;
  /** Start a process in the sandbox: tracked, paused and killed with it. */
  spawn: SandboxSpawn;
  /** Run a command in the sandbox to completion. */
  exec(
    argv: string[],
    opts: { env: Record<string, string>; timeoutMs: number },
  ): Promise<{ code: number | null; stderr: Buffer }>;
  /** Every live process of the sandbox. */
  pids(): number[];
  /** Whether these directories (as seen inside) were made ahead on the fresh disk. */
  seeded?(paths: readonly string[]): boolean;
}

/** The instance as its Chromium needs to know it: who it is, what it may reach, how it is seen. */
export interface ChromiumInstance {
  readonly instance: Pick<InstanceIdentity, 'id' | 'token'>;
  readonly plan: Pick<InstancePlan, 'resolution' | 'blockedDomains' | 'identity'>;
  readonly services: Pick<
    InstanceServices,
    'publicUrl' | 'log' | 'chromiumPath' | 'programs' | 'artifacts'
  >;
}

/** What differs between the instance types' Chromiums. */
export interface InSandboxOptions {
  sandbox: ChromiumSandbox;
  /** Default true. A headful Chromium needs `DISPLAY` in `env`. */
  headless?: boolean;
  /** Added to Chromium's minimal environment (e.g. the display). */
  env?: Record<string, string>;
  /** Chromium flags of the type (extensions, window placement). */
  args?: readonly string[];
  /**
   * Loopback names go through the egress too, which allows the host's loopback ports the
   * operator opened and refuses the rest; false: they stay the instance's own (a desktop's own
   * servers), never reaching the egress.
   */
  loopbackViaEgress: boolean;
  /** How a navigation the instance's egress would refuse fails instead (sandbox/network.ts). */
  checkNavigation?: ((url: string) => Promise<NavigationRefusal | undefined>) | undefined;
}

/** How long making Chromium's directories inside may take, in ms. */
const MKDIR_TIMEOUT_MS = 10_000;

/** The options of an instance's Chromium in its sandbox (see the header). */
export function chromiumInSandbox(
  { instance, plan, services }: ChromiumInstance,
  opts: InSandboxOptions,
): ChromiumOptions {
  const box = opts.sandbox;
  const { loopbackViaEgress, checkNavigation } = opts;
  const downloads = services.artifacts;
  const downloadDir = downloads?.downloadDir;
  // isolated: everything goes out through the egress; otherwise root cannot run Chromium's own
  // sandbox, and this mode has no other
  const network = box.isolated
    ? chromiumProxyArgs(loopbackViaEgress)
    : process.getuid?.() === 0
      ? ['--no-sandbox']
      : [];
  return {
    executablePath: services.chromiumPath,
    operatorFlags: services.programs?.chromiumFlags ?? [],
    dir: join(box.hostHome, CHROMIUM_DIR),
    windowSize: plan.resolution,
    blockedDomains: plan.blockedDomains,
    headless: opts.headless ?? true,
    ...(opts.env && { env: opts.env }),
    args: [...network, ...(opts.args ?? [])],
    spawn: (argv, o) => box.spawn(argv, o),
    ...(box.isolated && {
      processDir: posix.join(box.home, CHROMIUM_DIR),
      members: () => box.pids(),
      mkdir: async (paths: string[]) => {
        if (box.seeded?.(paths)) return;
        const r = await box.exec(['mkdir', '-p', '--', ...paths], {
          env: { PATH: SANDBOX_PATH, HOME: box.home },
          timeoutMs: MKDIR_TIMEOUT_MS,
        });
        if (r.code !== 0) throw new Error(`mkdir failed: ${r.stderr.toString().trim()}`);
      },
    }),
    // loopback names that stay the instance's own never reach the egress: nothing to check
    ...(box.isolated &&
      checkNavigation && {
        checkNavigation: async (url: string) =>
          !loopbackViaEgress && isLoopbackUrl(url) ? undefined : checkNavigation(url),
      }),
    ...(plan.identity && { identity: plan.identity }),
    ...(downloads && downloadDir !== undefined && { downloads, extraDirs: [downloadDir] }),
    relayUrl: cdpRelayUrl(services.publicUrl, instance.id),
    token: instance.token,
    log: services.log,
  };
}

/** A `Sandbox` as its Chromium sees it. */
export function chromiumSandbox(sandbox: Sandbox): ChromiumSandbox {
  return {
    isolated: sandbox.mode === 'isolated',
    home: sandbox.home,
    hostHome: sandbox.hostHome,
    spawn: (argv, o) => sandbox.spawn(argv, o),
    exec: (argv, o) => sandbox.exec(argv, o),
    pids: () => sandbox.pids(),
    seeded: (paths) => sandbox.seeded(paths),
  };
}
