/**
 * What this machine lets burrow guarantee, probed once: the tools the sandbox is built from, the
 * kernel features it relies on, and for each guarantee of the isolation model whether it holds
 * and what would fix it. `burrow doctor` prints this; `burrow serve` logs it at start; the
 * registry refuses to start instances when the core guarantees are missing (unless the operator
 * said `--insecure-no-isolation`), and, on a server for others, when `limits` is (unless
 * `--allow-unlimited`: sandbox/host.ts).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { probeCgroups, type CgroupLayout } from './cgroups.js';
import { quotaMissing } from './quota.js';
import { seccompSupported } from './seccomp.js';
import { probeSubordinate, showRange, type IdRange } from './subids.js';

export const TOOLS = {
  bwrap: ['/usr/bin/bwrap', '/bin/bwrap'],
  nsenter: ['/usr/bin/nsenter', '/bin/nsenter'],
  unshare: ['/usr/bin/unshare', '/bin/unshare'],
  setpriv: ['/usr/bin/setpriv', '/bin/setpriv'],
  ip: ['/usr/sbin/ip', '/sbin/ip', '/usr/bin/ip', '/bin/ip'],
  sh: ['/bin/sh', '/usr/bin/sh'],
  // Debian's perl-base (Essential): the first step of every spawn chain (space/chain.ts)
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

/** How much of the machine the server may use, found by probing (never guessed from the uid). */
export type PrivilegeLevel =
  /** root with CAP_SYS_ADMIN: every guarantee of ISOLATION.md. */
  | 'root'
  /** root without CAP_SYS_ADMIN (an unprivileged container): what the container allows. */
  | 'container-root'
  /** a normal user: user namespaces it owns; a host uid per instance where it has a subordinate range. */
  | 'unprivileged';

export interface Guarantee {
  /** Short name, e.g. `namespaces`. */
  name: string;
  /** What it promises. */
  what: string;
  ok: boolean;
  /** `held` or `missing` (the same as `ok`, for the table). */
  status: 'held' | 'missing';
  /** Whether instances refuse to start without it (unless `--insecure-no-isolation`). */
  core: boolean;
  /** What the probe found: why it holds only in part, or why it does not hold. */
  why?: string;
  /** How to make it hold (when it does not). */
  fix?: string;
}

export interface HostSupport {
  level: PrivilegeLevel;
  root: boolean;
  /** The instances' namespaces can be built (user, pid, network, IPC, UTS, mount, cgroup). */
  sandbox: boolean;
  /** Where instance cgroups go, when creating one worked. */
  cgroups: CgroupLayout | undefined;
  /** Disk quotas: a loop-mounted ext4 image (root) or a size-limited tmpfs in the instance's mount namespace. */
  quota: boolean;
  quotaKind: 'loop' | 'tmpfs' | undefined;
  seccomp: boolean;
  /** Whether the server can give each instance a host uid of its own (`setpriv --reuid`). */
  ownUid: boolean;
  /**
   * A normal user's subordinate ranges, where mapping them worked (subids.ts): each instance gets
   * its host uid and gid from these instead (`ownUid` stays false: the server cannot setuid).
   */
  subids: { uid: IdRange; gid: IdRange } | undefined;
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

/** The guarantees without which instances do not start (unless `--insecure-no-isolation`). */
export const CORE_GUARANTEES = ['namespaces', 'seccomp', 'egress', 'devtools', 'chromium-sandbox'];

const cached = new Map<string, HostSupport>();

/** Probe the machine (cached for the process's life, per bubblewrap override). */
export function hostSupport(bwrapPath?: string): HostSupport {
  let found = cached.get(bwrapPath ?? '');
  if (!found) cached.set(bwrapPath ?? '', (found = probe(bwrapPath)));
  return found;
}

/** Effective capabilities of this process (bit numbers of capability(7)). */
function effectiveCaps(): bigint {
  try {
    const hex = /^CapEff:\s+([0-9a-f]+)/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1];
    return hex ? BigInt(`0x${hex}`) : 0n;
  } catch {
    return 0n;
  }
}
const CAP_SETUID = 7;
const CAP_SETGID = 6;
const CAP_SYS_ADMIN = 21;
const hasCap = (caps: bigint, n: number) => ((caps >> BigInt(n)) & 1n) === 1n;

function probe(bwrapPath: string | undefined): HostSupport {
  const root = process.getuid?.() === 0;
  const caps = effectiveCaps();
  const level: PrivilegeLevel = !root
    ? 'unprivileged'
    : hasCap(caps, CAP_SYS_ADMIN)
      ? 'root'
      : 'container-root';
  const missing = (Object.keys(APT) as Tool[]).filter((t) => !toolPath(t, bwrapPath));
  const pkgs = [...new Set(missing.map((t) => APT[t]))].join(' ');
  const installFix = missing.length ? `apt-get install -y ${pkgs}` : undefined;
  const userns = usernsProbe();
  const seccomp = seccompSupported();
  const cg = probeCgroups();
  const cgroups = 'layout' in cg ? cg.layout : undefined;
  // a host uid per instance: root drops to it; a container's root only with CAP_SETUID/SETGID
  const ownUid = level === 'root' || (hasCap(caps, CAP_SETUID) && hasCap(caps, CAP_SETGID));
  const sandboxWhy = installFix
    ? `missing tools: ${missing.join(', ')}`
    : userns.why
      ? userns.why
      : level === 'container-root' && !ownUid
        ? 'root without CAP_SETUID/CAP_SETGID cannot hand instances a uid of their own, and instances as host root are refused'
        : undefined;
  const sandboxFix =
    installFix ??
    userns.fix ??
    (sandboxWhy
      ? 'run the server as a normal user, or give the container CAP_SETUID and CAP_SETGID'
      : undefined);
  const sandbox = !sandboxWhy;
  // disk quota: root's loop-mounted ext4; else a tmpfs in the instance's own mount namespace
  const loopWhy =
    level === 'root' ? quotaMissing() : 'mounting a loop device needs CAP_SYS_ADMIN on the host';
  // (a container's root hands instances a uid of their own, and the files it writes as host root
  // could not exist on a tmpfs of the instance's user namespace, where uid 0 is not mapped)
  const tmpfsOk = sandbox && level === 'unprivileged' && tmpfsProbe();
  // a normal user's instances: a host uid each from its subordinate range, where mapping one works
  const sub =
    sandbox && level === 'unprivileged'
      ? probeSubordinate({
          unshare: toolPath('unshare'),
          sh: toolPath('sh'),
          perl: toolPath('perl'),
          setpriv: toolPath('setpriv'),
        })
      : undefined;
  const subids = sub?.ranges;
  const quotaKind =
    level === 'root' ? (loopWhy ? undefined : 'loop') : tmpfsOk ? 'tmpfs' : undefined;
  const g = (name: string, what: string, ok: boolean, why?: string, fix?: string): Guarantee => ({
    name,
    what,
    ok,
    status: ok ? 'held' : 'missing',
    core: CORE_GUARANTEES.includes(name),
    ...(why ? { why } : {}),
    ...(!ok && fix ? { fix } : {}),
  });
  const uidWhy = subids
    ? `a normal user's server: each instance runs as a host uid of its own from the user's subordinate range in /etc/subuid (${showRange(subids.uid)}, gids from ${showRange(subids.gid)} in /etc/subgid), mapped by newuidmap`
    : level === 'unprivileged'
      ? (sub?.why ??
        `the server is a normal user: every instance's processes run as its uid (${process.getuid?.()}), each instance in user, pid and mount namespaces of its own, so they cannot see or signal each other or the server`)
      : 'root without CAP_SETUID/CAP_SETGID';
  const guarantees = [
    g(
      'namespaces',
      'each instance runs in its own user, mount, pid, network, IPC, UTS and cgroup namespaces, no capabilities, no_new_privs, /proc/sys read-only',
      sandbox,
      sandboxWhy,
      sandboxFix,
    ),
    g(
      'identity',
      'each instance has a host uid of its own, owning nothing on the host but its disk',
      sandbox && (ownUid || subids !== undefined),
      ownUid ? undefined : uidWhy,
      level === 'unprivileged'
        ? `${sub?.fix ?? 'give the server user a range in /etc/subuid and /etc/subgid'}; or start the server as root`
        : 'give the container CAP_SETUID and CAP_SETGID',
    ),
    g(
      'seccomp',
      'a seccomp filter refuses kernel modules, keyrings, mounts, ptrace, bpf, io_uring and the like',
      sandbox && seccomp,
      !seccomp ? `no filter table for architecture ${process.arch}` : sandboxWhy,
      !seccomp ? 'run on x86_64 or arm64' : sandboxFix,
    ),
    g(
      'rootfs',
      'its own root file system, read-only but for its disk (home, /tmp, /dev/shm): host programs, an /etc made for it, nothing of the data dir, other instances or host secrets',
      sandbox,
      sandboxWhy,
      sandboxFix,
    ),
    g(
      'limits',
      'memory, process-count and CPU limits (cgroups), and the freezer for pause',
      sandbox && cgroups !== undefined,
      'why' in cg ? cg.why : undefined,
      level === 'unprivileged'
        ? "run the server where its cgroup v2 subtree is delegated to its user (systemd user@.service: systemd-run --user --scope -p Delegate=yes burrow serve; in a container: cgroup v2, --cgroupns=private and a /sys/fs/cgroup the server's user may write), or as root"
        : level === 'container-root'
          ? 'give the container a writable, delegated cgroup (podman/docker with cgroup v2 and --cgroupns=private), or run it --privileged'
          : 'mount cgroup v1 (memory, pids, cpu, freezer) or cgroup v2 with those controllers',
    ),
    g(
      'disk-quota',
      quotaKind === 'tmpfs'
        ? 'a size limit on every file it can write: home, /tmp and /dev/shm are a tmpfs of that size in its own mount namespace (memory, not disk), the rest of its root is read-only'
        : 'a disk quota on every file it can write: home, /tmp and /dev/shm are its own ext4 image, the rest of its root is read-only',
      sandbox && quotaKind !== undefined,
      quotaKind
        ? undefined
        : level === 'root'
          ? loopWhy
          : level === 'container-root'
            ? `${loopWhy}; and a tmpfs in the instance's user namespace cannot hold the files the server writes there as host root (uid 0 is not mapped in it)`
            : 'could not mount a size-limited tmpfs in a user namespace of its own',
      level === 'root'
        ? loopWhy
        : level === 'container-root'
          ? 'run the container --privileged (or with CAP_SYS_ADMIN and /dev/loop-control), or run burrow in it as a normal user'
          : 'enable unprivileged user namespaces',
    ),
    g(
      'egress',
      "network only through burrow's egress proxy: blocked_domains enforced for every process, host loopback and the API never reachable unless allowed",
      sandbox,
      sandboxWhy,
      sandboxFix,
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
      sandboxFix,
    ),
  ];
  return {
    level,
    root,
    sandbox,
    cgroups: sandbox ? cgroups : undefined,
    quota: sandbox && quotaKind !== undefined,
    quotaKind: sandbox ? quotaKind : undefined,
    seccomp,
    ownUid,
    subids: sandbox ? subids : undefined,
    guarantees,
  };
}

const APPARMOR_USERNS = '/proc/sys/kernel/apparmor_restrict_unprivileged_userns';

const HOSTNAME = ['/usr/bin/hostname', '/bin/hostname'].find((p) => existsSync(p));

/**
 * Open a user namespace with every other namespace an instance gets, once, and do in it what
 * bubblewrap does at every start: mount a `/proc` of the new pid namespace and name the host
 * (a normal user's own namespaces; root's too, as root's instances are built in one). A
 * container's default seccomp profile lets the namespaces open but refuses `sethostname`, and its
 * masked `/proc` paths refuse the mount: only doing both tells the truth there. Why it failed, and
 * the fix, where it did.
 */
function usernsProbe(): { why?: string; fix?: string } {
  const unshare = toolPath('unshare');
  if (!unshare) return { why: 'unshare is missing', fix: 'apt-get install -y util-linux' };
  const r = spawnSync(
    unshare,
    [
      '--user',
      '--map-root-user',
      '--mount',
      '--net',
      '--ipc',
      '--uts',
      '--cgroup',
      '--pid',
      '--fork',
      '--mount-proc',
      ...(HOSTNAME ? [HOSTNAME, 'burrow'] : ['/bin/true']),
    ],
    { stdio: ['ignore', 'ignore', 'pipe'], timeout: 5000 },
  );
  if (r.status === 0) return {};
  const err = String(r.stderr ?? '').trim();
  if (/mount \/proc|hostname/i.test(err)) {
    return {
      why: `a user namespace opens, but what the sandbox does in it is refused (${err}): a container's seccomp profile or masked /proc paths`,
      fix: 'run the container with --security-opt seccomp=unconfined --security-opt systempaths=unconfined (podman; docker: --security-opt seccomp=unconfined --security-opt systempaths=unconfined --security-opt apparmor=unconfined), or --privileged for the root level (docs/image.md)',
    };
  }
  let restricted = false;
  try {
    restricted = readFileSync(APPARMOR_USERNS, 'utf8').trim() === '1';
  } catch {
    /* no AppArmor switch: not Ubuntu 23.10+ */
  }
  if (restricted) {
    return {
      why: `AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns=1): ${err}`,
      fix: 'sysctl -w kernel.apparmor_restrict_unprivileged_userns=0 (persist it in /etc/sysctl.d/), or give bwrap and unshare an AppArmor profile with the `userns,` rule (/etc/apparmor.d/bwrap, as Ubuntu ships for bwrap-userns-restrict)',
    };
  }
  let max = '';
  try {
    max = readFileSync('/proc/sys/user/max_user_namespaces', 'utf8').trim();
  } catch {
    /* not exposed */
  }
  return {
    why: `could not open a user namespace${max === '0' ? ' (user.max_user_namespaces=0)' : ''}: ${err || `exit ${r.status}`}`,
    fix: 'sysctl -w user.max_user_namespaces=15000 (and kernel.unprivileged_userns_clone=1 where the kernel has it); in a container, allow unshare(CLONE_NEWUSER) in its seccomp profile',
  };
}

/** Mount a size-limited tmpfs in a user and mount namespace of our own, once. */
function tmpfsProbe(): boolean {
  const unshare = toolPath('unshare');
  if (!unshare) return false;
  const r = spawnSync(
    unshare,
    [
      '--user',
      '--map-root-user',
      '--mount',
      '/bin/sh',
      '-c',
      'mount -t tmpfs -o size=1m,nosuid,nodev tmpfs /tmp',
    ],
    { stdio: 'ignore', timeout: 5000 },
  );
  return r.status === 0;
}

/** Lines for the start log and `burrow doctor`: the level, then one line per guarantee. */
export function describeSupport(s: HostSupport = hostSupport()): string[] {
  return [
    `privilege level: ${s.level}`,
    ...s.guarantees.map((g) =>
      g.ok
        ? `held     ${g.name}: ${g.what}${g.why ? ` (${g.why})` : ''}`
        : `MISSING  ${g.name}${g.core ? ' (core)' : ''}: ${g.what}; why: ${g.why ?? 'unknown'}; fix: ${g.fix ?? 'see ISOLATION.md'}`,
    ),
  ];
}
