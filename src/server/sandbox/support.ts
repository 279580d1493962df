/**
 * What this machine lets burrow guarantee, probed once: the tools the sandbox is built from, the
 * kernel features it relies on, and for each guarantee of the isolation model whether it holds
 * and what would fix it. `burrow doctor` prints this; `burrow serve` logs it at start; the
 * registry refuses to start instances when the core guarantees are missing (unless the operator
 * said `--insecure-no-isolation`).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { cgroupVersion, type CgroupVersion } from './cgroups.js';
import { quotaMissing } from './quota.js';
import { seccompSupported } from './seccomp.js';

export const TOOLS = {
  bwrap: ['/usr/bin/bwrap', '/bin/bwrap'],
  nsenter: ['/usr/bin/nsenter', '/bin/nsenter'],
  unshare: ['/usr/bin/unshare', '/bin/unshare'],
  setpriv: ['/usr/bin/setpriv', '/bin/setpriv'],
  ip: ['/usr/sbin/ip', '/sbin/ip', '/usr/bin/ip', '/bin/ip'],
  sh: ['/bin/sh', '/usr/bin/sh'],
  // Debian's perl-base (Essential): the first step of every spawn chain (sandbox.ts)
  perl: ['/usr/bin/perl', '/bin/perl'],
} as const;

export type Tool = keyof typeof TOOLS;

/**
 * Absolute path of a tool, or undefined. `bwrapPath` (the server's `bwrapPath`, `BURROW_BWRAP`:
 * src/server/config.ts) overrides bubblewrap's when that file exists.
 */
export function toolPath(tool: Tool, bwrapPath?: string): string | undefined {
  if (tool === 'bwrap' && bwrapPath && existsSync(bwrapPath)) return bwrapPath;
  return TOOLS[tool].find((p) => existsSync(p));
}

export interface Guarantee {
  /** Short name, e.g. `identity`. */
  name: string;
  /** What it promises. */
  what: string;
  ok: boolean;
  /** Why it does not hold and how to fix it (when `ok` is false). */
  fix?: string;
}

export interface HostSupport {
  root: boolean;
  /** The namespaces + unprivileged identity sandbox can be built. */
  sandbox: boolean;
  cgroups: CgroupVersion | undefined;
  quota: boolean;
  seccomp: boolean;
  guarantees: Guarantee[];
}

const APT: Partial<Record<Tool, string>> = {
  bwrap: 'bubblewrap',
  nsenter: 'util-linux',
  unshare: 'util-linux',
  setpriv: 'util-linux',
  ip: 'iproute2',
  perl: 'perl-base',
};

const cached = new Map<string, HostSupport>();

/** Probe the machine (cached for the process's life, per bubblewrap override). */
export function hostSupport(bwrapPath?: string): HostSupport {
  let found = cached.get(bwrapPath ?? '');
  if (!found) cached.set(bwrapPath ?? '', (found = probe(bwrapPath)));
  return found;
}

function probe(bwrapPath: string | undefined): HostSupport {
  const root = process.getuid?.() === 0;
  const missing = (Object.keys(APT) as Tool[]).filter((t) => !toolPath(t, bwrapPath));
  const userns = usernsWorks();
  const cgroups = cgroupVersion();
  const quotaWhy = quotaMissing();
  const seccomp = seccompSupported();
  const pkgs = [...new Set(missing.map((t) => APT[t]))].join(' ');
  const installFix = missing.length ? `apt-get install -y ${pkgs}` : undefined;
  const sandboxWhy = !root
    ? 'the server is not root: it needs root to give each instance its own host uid and network (it drops to that uid for everything the instance runs); start it as root'
    : installFix
      ? `missing tools: ${missing.join(', ')} (${installFix})`
      : !userns
        ? 'user namespaces are disabled (sysctl user.max_user_namespaces=0 or kernel.unprivileged_userns_clone=0); enable them'
        : undefined;
  const sandbox = !sandboxWhy;
  const g = (name: string, what: string, ok: boolean, fix?: string): Guarantee =>
    ok ? { name, what, ok } : { name, what, ok, ...(fix ? { fix } : {}) };
  const guarantees = [
    g(
      'identity',
      'each instance runs as its own unprivileged host uid in its own user, mount, pid, network, IPC and UTS namespaces, no capabilities, /proc/sys read-only',
      sandbox,
      sandboxWhy,
    ),
    g(
      'seccomp',
      'a seccomp filter refuses kernel modules, keyrings, mounts, ptrace, bpf, io_uring and the like',
      sandbox && seccomp,
      !seccomp ? `no filter table for architecture ${process.arch}` : sandboxWhy,
    ),
    g(
      'rootfs',
      'its own root file system: host programs read-only, an /etc made for it, nothing of the data dir, other instances or host secrets',
      sandbox,
      sandboxWhy,
    ),
    g(
      'limits',
      'memory, process-count and CPU limits (cgroups), and the freezer for pause',
      sandbox && cgroups !== undefined,
      !root
        ? 'needs a root server'
        : 'no usable cgroup v1 (memory, pids, cpu, freezer) or v2 hierarchy',
    ),
    g(
      'disk-quota',
      'a disk quota on everything it can write (its own ext4 image)',
      sandbox && !quotaWhy,
      quotaWhy,
    ),
    g(
      'egress',
      "network only through burrow's egress proxy: blocked_domains enforced for every process, host loopback and the API never reachable unless allowed",
      sandbox,
      sandboxWhy,
    ),
    g(
      'devtools',
      "Chromium's DevTools reachable by the server alone (a pipe), clients only through the token-checked relay",
      true,
    ),
    g(
      'chromium-sandbox',
      "Chromium runs as the instance's unprivileged user with its own sandbox on",
      sandbox,
      sandboxWhy,
    ),
  ];
  return { root, sandbox, cgroups, quota: !quotaWhy, seccomp, guarantees };
}

/** Whether an unprivileged user namespace can be created here. */
function usernsWorks(): boolean {
  const unshare = toolPath('unshare');
  if (!unshare) return false;
  try {
    const max = Number(readFileSync('/proc/sys/user/max_user_namespaces', 'utf8'));
    if (max === 0) return false;
  } catch {
    /* not exposed */
  }
  const r = spawnSync(unshare, ['--user', '--map-root-user', '/bin/true'], {
    stdio: 'ignore',
    timeout: 5000,
  });
  return r.status === 0;
}

/** Lines for the start log and `burrow doctor`. */
export function describeSupport(s: HostSupport = hostSupport()): string[] {
  return s.guarantees.map((g) =>
    g.ok ? `ok       ${g.name}: ${g.what}` : `MISSING  ${g.name}: ${g.what} — ${g.fix ?? ''}`,
  );
}

/** The guarantees without which instances do not start (unless `--insecure-no-isolation`). */
export const CORE_GUARANTEES = ['identity', 'seccomp', 'egress', 'devtools', 'chromium-sandbox'];
