/**
 * The root file system an instance sees: the host's programs read-only (`/usr` and the merged-usr
 * links), an `/etc` made for instances (built once per server run from an allow list of harmless
 * host entries plus generated users, hosts and resolver files: never the host's shadow, ssh keys,
 * TLS private keys or service configs), and the instance's own writable home, /tmp, /var/tmp and
 * /dev/shm from its disk. Nothing else of the host exists inside: no /root, /home of other users,
 * /run (an empty directory), /var/lib, /srv, /opt, /mnt, the data dir or other instances.
 *
 * The rest is read-only, bubblewrap's own root and /dev included: both are tmpfs mounts the size
 * of half the host's memory that the instance's user owns, so a writable root would be a second,
 * unbounded disk outside its quota (and, at a level without memory limits, the host's memory).
 * Nothing an instance runs needs to write there: Chromium, Xvfb, the desktop, bash, Jupyter and
 * the toolbox write to home, /tmp and /dev/shm (test/integration/sandbox/rootfs-writes.test.ts).
 */
import {
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readlinkSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';

/** The instance's user inside (uid and gid), and its home. */
export const SANDBOX_UID = 1000;
export const SANDBOX_HOME = '/home/user';
export const SANDBOX_HOSTNAME = 'burrow';
/** PATH inside an instance. */
export const SANDBOX_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/**
 * Host /etc entries copied into an instance's /etc: what programs need to run (dynamic linker
 * cache, alternatives links, fonts, CA certificates, locale and MIME data, shell defaults,
 * Python and Jupyter and Chromium system configs, X11). Anything not listed does not exist.
 */
const ETC_ALLOW = [
  'alternatives',
  'bash.bashrc',
  'ca-certificates',
  'ca-certificates.conf',
  'chromium',
  'chromium.d',
  'debian_version',
  'dconf',
  'fonts',
  'gai.conf',
  'gtk-3.0',
  'host.conf',
  'ImageMagick-6',
  'inputrc',
  'issue',
  'jupyter',
  'ld.so.cache',
  'ld.so.conf',
  'ld.so.conf.d',
  'locale.alias',
  'locale.gen',
  'localtime',
  'magic',
  'magic.mime',
  'mailcap',
  'matplotlibrc',
  'mime.types',
  'nanorc',
  'os-release',
  'papersize',
  'profile',
  'profile.d',
  'protocols',
  'python3',
  'python3.11',
  'python3.12',
  'python3.13',
  'rpc',
  'services',
  'shells',
  'skel',
  'ssl/certs',
  'ssl/openssl.cnf',
  'terminfo',
  'timezone',
  'vim',
  'X11',
  'xdg',
];

const GENERATED: Record<string, string> = {
  passwd: [
    'root:x:0:0:root:/root:/bin/bash',
    `user:x:${SANDBOX_UID}:${SANDBOX_UID}:user:${SANDBOX_HOME}:/bin/bash`,
    'nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin',
    '',
  ].join('\n'),
  group: ['root:x:0:', `user:x:${SANDBOX_UID}:`, 'nogroup:x:65534:', ''].join('\n'),
  hostname: `${SANDBOX_HOSTNAME}\n`,
  hosts: [
    '127.0.0.1\tlocalhost',
    `127.0.1.1\t${SANDBOX_HOSTNAME}`,
    '::1\tlocalhost ip6-localhost ip6-loopback',
    '',
  ].join('\n'),
  // No DNS server is reachable from an instance: names are resolved by burrow's egress proxy
  // (HTTP_PROXY / --proxy-server), which also enforces blocked_domains.
  'resolv.conf': 'nameserver 127.0.0.1\noptions timeout:1 attempts:1\n',
  'nsswitch.conf': [
    'passwd: files',
    'group: files',
    'shadow: files',
    'hosts: files dns',
    'networks: files',
    'protocols: files',
    'services: files',
    '',
  ].join('\n'),
};

/**
 * Build the instances' /etc under `dir` (replaced if it exists). Read-only for instances: the
 * directory is root-owned and bound read-only.
 */
export async function buildEtc(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true, mode: 0o755 });
  for (const entry of ETC_ALLOW) {
    const src = join('/etc', entry);
    if (!existsSync(src) && !isLink(src)) continue;
    const dest = join(dir, entry);
    mkdirSync(dirname(dest), { recursive: true, mode: 0o755 });
    // links stay links (alternatives, os-release → /usr/lib/os-release resolve inside too)
    cpSync(src, dest, { recursive: true, verbatimSymlinks: true, dereference: false });
  }
  for (const [name, text] of Object.entries(GENERATED)) {
    writeFileSync(join(dir, name), text, { mode: 0o644 });
  }
  writeFileSync(join(dir, 'machine-id'), `${randomHex(32)}\n`, { mode: 0o644 });
  symlinkSync('../proc/self/mounts', join(dir, 'mtab'));
}

function isLink(path: string): boolean {
  try {
    return lstatSync(path).isSymbolicLink();
  } catch {
    return false;
  }
}

/** A real directory (not a link to one). */
function isDirectory(path: string): boolean {
  try {
    return lstatSync(path).isDirectory();
  } catch {
    return false;
  }
}

function randomHex(n: number): string {
  let s = '';
  while (s.length < n) s += Math.floor(Math.random() * 16).toString(16);
  return s;
}

const FONT_CACHE = '/var/cache/fontconfig';

/** The instance's directories bubblewrap binds by descriptor (opened by the server per process). */
export type InstanceDir = 'etc' | 'home' | 'tmp' | 'shm';

/** The fds bubblewrap binds: each an open directory, numbered as the child sees it. */
export type RootfsFds = Record<InstanceDir, number>;

/**
 * One step of the file system bubblewrap builds for a process, in order. Host paths are resolved
 * when the step list is made (once per server: plan.ts); the instance's own directories are named
 * by `InstanceDir` and become descriptors only when a process is started.
 */
export type MountStep =
  /** A host path read-only at `dest`. */
  | { kind: 'ro-bind'; src: string; dest: string }
  /** A host device node at `dest` (pid 1's /dev/null). */
  | { kind: 'dev-bind'; src: string; dest: string }
  /** A symbolic link `at` → `target`. */
  | { kind: 'symlink'; target: string; at: string }
  /** An instance directory at `dest`, read-only (`/etc`) or writable. */
  | { kind: 'dir-fd'; dir: InstanceDir; dest: string; readOnly: boolean }
  /** A fresh /proc of the process's pid namespace. */
  | { kind: 'proc'; dest: string }
  /** bubblewrap's minimal /dev. */
  | { kind: 'dev'; dest: string }
  /** An empty directory (in the root, so read-only once the root is). */
  | { kind: 'dir'; dest: string }
  /**
   * The mount at `dest` made read-only (that mount alone: what is mounted below it keeps its
   * own flags). Comes after every step that adds something to it.
   */
  | { kind: 'remount-ro'; dest: string }
  /** A host directory hidden: an empty read-only tmpfs over it. */
  | { kind: 'mask'; dest: string };

/**
 * What under `/usr` is the host's own and not programs: `/usr/local/etc` holds the local
 * configuration of programs installed by hand (an `npmrc` with a registry token, a tool's
 * credentials), none of the allow list `/etc` is built from applies to it. The rest of
 * `/usr/local` is programs, libraries and their data, like `/usr`; its `share/ca-certificates`
 * are public certificates the instance's `/etc/ssl/certs` already holds (never keys).
 */
const HOST_PRIVATE = ['/usr/local/etc'];

/**
 * Which of the host's private directories under `/usr` exist now, as a key: a plan made before
 * one was created (an operator installs something later) is made again, so that it is masked
 * from the next instance on (host.ts).
 */
export const hostPrivateNow = (): string =>
  HOST_PRIVATE.filter((dir) => isDirectory(dir)).join('\0');

/** The host's programs, read-only: `/usr` and the merged-usr links (as the host has them now). */
function programSteps(): MountStep[] {
  const steps: MountStep[] = [{ kind: 'ro-bind', src: '/usr', dest: '/usr' }];
  for (const dir of HOST_PRIVATE) if (isDirectory(dir)) steps.push({ kind: 'mask', dest: dir });
  for (const top of ['/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32']) {
    if (isLink(top)) steps.push({ kind: 'symlink', target: readlinkSync(top), at: top });
    else if (existsSync(top)) steps.push({ kind: 'ro-bind', src: top, dest: top });
  }
  return steps;
}

/**
 * The view of an instance's pid 1, which only runs a shell that reaps: the programs and
 * `/dev/null`, nothing of the instance's disk. (No `--dev`: a devpts mount would make bubblewrap
 * nest a second user namespace, and the instance's other processes join the first one.)
 */
export function initMounts(): MountStep[] {
  return [
    ...programSteps(),
    { kind: 'dev-bind', src: '/dev/null', dest: '/dev/null' },
    { kind: 'remount-ro', dest: '/' },
  ];
}

/**
 * The view of every other process of an instance. The writable directories and /etc are bound
 * by file descriptor (opened by the server), so the unprivileged bubblewrap never walks host
 * paths it could not read (the data dir is usually under /root).
 */
export function instanceMounts(): MountStep[] {
  const steps = programSteps();
  // the system font cache (without it fontconfig rescans every font at each program start:
  // ~400 ms for each Chromium launch); read-only, it holds nothing but font metadata
  if (existsSync(FONT_CACHE)) steps.push({ kind: 'ro-bind', src: FONT_CACHE, dest: FONT_CACHE });
  // Node for the sandbox's own helpers, when it is not installed under /usr
  const nodePrefix = dirname(dirname(process.execPath));
  if (!nodePrefix.startsWith('/usr/') && nodePrefix !== '/usr') {
    steps.push({ kind: 'ro-bind', src: nodePrefix, dest: nodePrefix });
  }
  steps.push(
    { kind: 'dir-fd', dir: 'etc', dest: '/etc', readOnly: true },
    { kind: 'proc', dest: '/proc' },
    { kind: 'dev', dest: '/dev' },
    { kind: 'dir-fd', dir: 'shm', dest: '/dev/shm', readOnly: false },
    { kind: 'dir-fd', dir: 'home', dest: SANDBOX_HOME, readOnly: false },
    { kind: 'dir-fd', dir: 'tmp', dest: '/tmp', readOnly: false },
    { kind: 'symlink', target: '/tmp', at: '/var/tmp' },
    { kind: 'dir', dest: '/run' },
    // bubblewrap's root and its /dev are tmpfs mounts the size of half the host's memory, which
    // the instance's user owns: read-only, so that every byte it writes is on its disk
    { kind: 'remount-ro', dest: '/dev' },
    { kind: 'remount-ro', dest: '/' },
  );
  return steps;
}

/** Whether `steps` bind any instance directory (then `mountArgs` needs its descriptors). */
export function bindsInstanceDirs(steps: readonly MountStep[]): boolean {
  return steps.some((s) => s.kind === 'dir-fd');
}

/** bubblewrap options for `steps`; `fds` numbers the instance directories the steps bind. */
export function mountArgs(steps: readonly MountStep[], fds?: RootfsFds): string[] {
  const args: string[] = [];
  for (const step of steps) {
    switch (step.kind) {
      case 'ro-bind':
      case 'dev-bind':
        args.push(`--${step.kind}`, step.src, step.dest);
        break;
      case 'symlink':
        args.push('--symlink', step.target, step.at);
        break;
      case 'dir-fd': {
        const fd = fds?.[step.dir];
        if (fd === undefined) throw new Error(`mountArgs: no descriptor for ${step.dir}`);
        args.push(step.readOnly ? '--ro-bind-fd' : '--bind-fd', String(fd), step.dest);
        break;
      }
      case 'proc':
      case 'dev':
      case 'dir':
      case 'remount-ro':
        args.push(`--${step.kind}`, step.dest);
        break;
      case 'mask':
        args.push('--tmpfs', step.dest, '--remount-ro', step.dest);
        break;
    }
  }
  return args;
}
