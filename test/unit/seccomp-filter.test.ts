/**
 * The seccomp filter, checked without loading it: every name in its per-architecture tables is
 * the kernel's number for that syscall (from the uapi headers where this machine has them, and a
 * list copied from the kernel's tables that the headers check), and the program itself, run by a
 * classic BPF interpreter, answers what the deny list and the argument rules say.
 */
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  buildSeccompFilter,
  CHECKED_SYSCALLS,
  DENIED_SYSCALLS,
  EAFNOSUPPORT,
  EPERM,
  EPROTONOSUPPORT,
  RET_ALLOW,
  RET_ERRNO,
  RET_KILL_PROCESS,
  SECCOMP_ARCHES,
  seccompSupported,
} from '../../src/server/sandbox/seccomp.js';
import { runSeccomp } from '../helpers/cbpf.js';

/**
 * Kernel syscall numbers (arch/x86/entry/syscalls/syscall_64.tbl; asm-generic/unistd.h, which
 * arm64 uses). A name missing from an architecture does not exist there.
 */
// prettier-ignore
const KERNEL: Record<'x64' | 'arm64', Record<string, number>> = {
  x64: {
    init_module: 175, finit_module: 313, delete_module: 176, kexec_load: 246, kexec_file_load: 320,
    add_key: 248, request_key: 249, keyctl: 250, mount: 165, umount2: 166, pivot_root: 155,
    open_tree: 428, open_tree_attr: 467, move_mount: 429, fsopen: 430, fsconfig: 431, fsmount: 432,
    fspick: 433, mount_setattr: 442, ptrace: 101, process_vm_readv: 310, process_vm_writev: 311,
    pidfd_getfd: 438, swapon: 167, swapoff: 168, reboot: 169, acct: 163, syslog: 103,
    quotactl: 179, quotactl_fd: 443, lookup_dcookie: 212, perf_event_open: 298, bpf: 321,
    userfaultfd: 323, name_to_handle_at: 303, open_by_handle_at: 304, settimeofday: 164,
    clock_settime: 227, clock_adjtime: 305, adjtimex: 159, vhangup: 153, nfsservctl: 180,
    fanotify_init: 300, io_uring_setup: 425, io_uring_enter: 426, io_uring_register: 427,
    io_setup: 206, io_submit: 209, iopl: 172, ioperm: 173, modify_ldt: 154, uselib: 134, socket: 41, socketpair: 53,
    setsockopt: 54, getsockopt: 55, ioctl: 16, read: 0, write: 1, openat: 257, clone: 56,
    clone3: 435, unshare: 272, setns: 308, chroot: 161, seccomp: 317, kcmp: 312, pidfd_open: 434,
    connect: 42, bind: 49, getpid: 39, mmap: 9, mprotect: 10, execve: 59, prctl: 157,
  },
  arm64: {
    init_module: 105, finit_module: 273, delete_module: 106, kexec_load: 104, kexec_file_load: 294,
    add_key: 217, request_key: 218, keyctl: 219, mount: 40, umount2: 39, pivot_root: 41,
    open_tree: 428, open_tree_attr: 467, move_mount: 429, fsopen: 430, fsconfig: 431, fsmount: 432,
    fspick: 433, mount_setattr: 442, ptrace: 117, process_vm_readv: 270, process_vm_writev: 271,
    pidfd_getfd: 438, swapon: 224, swapoff: 225, reboot: 142, acct: 89, syslog: 116, quotactl: 60,
    quotactl_fd: 443, lookup_dcookie: 18, perf_event_open: 241, bpf: 280, userfaultfd: 282,
    name_to_handle_at: 264, open_by_handle_at: 265, settimeofday: 170, clock_settime: 112,
    clock_adjtime: 266, adjtimex: 171, vhangup: 58, nfsservctl: 42, fanotify_init: 262,
    io_uring_setup: 425, io_uring_enter: 426, io_uring_register: 427, io_setup: 0, io_submit: 2,
    socket: 198, socketpair: 199,
    setsockopt: 208, getsockopt: 209, ioctl: 29, read: 63, write: 64, openat: 56, clone: 220,
    clone3: 435, unshare: 97, setns: 268, chroot: 51, seccomp: 277, kcmp: 272, pidfd_open: 434,
    connect: 203, bind: 200, getpid: 172, mmap: 222, mprotect: 226, execve: 221, prctl: 167,
  },
};

/** The uapi header of each architecture, where this machine has it. */
const HEADERS: Record<'x64' | 'arm64', string[]> = {
  x64: ['/usr/include/x86_64-linux-gnu/asm/unistd_64.h', '/usr/include/asm/unistd_64.h'],
  arm64: ['/usr/include/asm-generic/unistd.h'],
};

function headerNumbers(arch: 'x64' | 'arm64'): Map<string, number> | undefined {
  const file = HEADERS[arch].find((f) => existsSync(f));
  if (!file) return undefined;
  const text = readFileSync(file, 'utf8');
  const out = new Map<string, number>();
  // `#define __NR_name 123`, and asm-generic's `#define __NR3264_name 123`
  for (const m of text.matchAll(/^#define __NR(?:3264)?_(\w+)\s+(\d+)\s*$/gm)) {
    out.set(m[1]!, Number(m[2]));
  }
  return out;
}

const ARCHES = ['x64', 'arm64'] as const;
const AUDIT = { x64: 0xc000003e, arm64: 0xc00000b7 };
const ERR = (e: number) => (RET_ERRNO | e) >>> 0;
const AF = { UNIX: 1, INET: 2, INET6: 10, NETLINK: 16, PACKET: 17, VSOCK: 40, ALG: 38 };
const SOCK = { STREAM: 1, DGRAM: 2, RAW: 3, PACKET: 10, NONBLOCK: 0o4000, CLOEXEC: 0o2000000 };
const NETLINK = { ROUTE: 0, SOCK_DIAG: 4, XFRM: 6, AUDIT: 9, NETFILTER: 12, UEVENT: 15 };
const HIGH = 0xdead_beef_0000_0000n; // garbage the caller can put above an int argument

/** What the threat model (ISOLATION.md) says no instance may call: the list may grow, not shrink. */
const REQUIRED_DENIALS = [
  'init_module',
  'finit_module',
  'kexec_load',
  'kexec_file_load',
  'add_key',
  'keyctl',
  'request_key',
  'mount',
  'umount2',
  'pivot_root',
  'open_tree',
  'open_tree_attr',
  'move_mount',
  'fsopen',
  'fsconfig',
  'fsmount',
  'fspick',
  'mount_setattr',
  'ptrace',
  'process_vm_readv',
  'process_vm_writev',
  'pidfd_getfd',
  'bpf',
  'perf_event_open',
  'userfaultfd',
  'io_uring_setup',
  'io_uring_enter',
  'io_uring_register',
  'io_setup',
  'io_submit',
  'name_to_handle_at',
  'open_by_handle_at',
  'swapon',
  'reboot',
  'settimeofday',
  'clock_settime',
  'fanotify_init',
];

it('denies everything the threat model names', () => {
  for (const name of REQUIRED_DENIALS) expect(DENIED_SYSCALLS, name).toContain(name);
});

it('has no filter for other architectures, nor for names every object has', () => {
  for (const arch of ['ia32', 'arm', 'riscv64', 'toString', '__proto__', 'constructor']) {
    expect(seccompSupported(arch), arch).toBe(false);
    expect(() => buildSeccompFilter(arch), arch).toThrow(/no seccomp filter for architecture/);
  }
});

describe.each(ARCHES)('the %s table', (arch) => {
  const table = SECCOMP_ARCHES[arch]!.numbers as Record<string, number | undefined>;
  const kernel = KERNEL[arch];

  it('has the audit architecture the kernel reports', () => {
    expect(SECCOMP_ARCHES[arch]!.audit).toBe(AUDIT[arch]);
  });

  it("gives every denied and checked syscall the kernel's number, and none that does not exist", () => {
    for (const name of [...DENIED_SYSCALLS, ...CHECKED_SYSCALLS]) {
      expect(table[name], name).toBe(kernel[name]);
    }
    // names that exist on x86_64 must exist in its table: only arm64 may lack some
    if (arch === 'x64') for (const name of DENIED_SYSCALLS) expect(table[name], name).toBeDefined();
    for (const name of CHECKED_SYSCALLS) expect(table[name], name).toBeDefined();
  });

  const header = headerNumbers(arch);
  it.skipIf(!header)(
    "agrees with this machine's uapi header (where the header knows the name)",
    () => {
      let compared = 0;
      for (const [name, nr] of Object.entries(kernel)) {
        const h = header!.get(name);
        if (h === undefined) continue; // a syscall newer than these headers
        expect(nr, name).toBe(h);
        compared++;
      }
      expect(compared).toBeGreaterThan(60);
      // a denied name the table leaves out must not exist on this architecture
      for (const name of DENIED_SYSCALLS) {
        if (table[name] === undefined) expect(header!.has(name), name).toBe(false);
      }
    },
  );
});

describe.each(ARCHES)('the %s program, interpreted', (arch) => {
  const prog = buildSeccompFilter(arch);
  const k = KERNEL[arch];
  const run = (nr: number, args: bigint[] = [], a = AUDIT[arch]) =>
    runSeccomp(prog, { nr, arch: a, args });
  const sys = (name: string) => {
    const nr = k[name];
    if (nr === undefined) throw new Error(`no ${name} on ${arch}`);
    return nr;
  };

  it('fits the kernel limit', () => {
    expect(prog.length / 8).toBeLessThanOrEqual(4096);
  });

  it('refuses every denied syscall with EPERM, whatever the arguments', () => {
    let n = 0;
    for (const name of DENIED_SYSCALLS) {
      if (k[name] === undefined) continue;
      expect(run(sys(name)), name).toBe(ERR(EPERM));
      expect(run(sys(name), [1n, 2n, 3n, 4n, 5n, 6n]), name).toBe(ERR(EPERM));
      n++;
    }
    expect(n).toBeGreaterThan(45);
  });

  it('allows what an instance needs: files, processes, namespaces, its own seccomp', () => {
    for (const name of [
      'read',
      'write',
      'openat',
      'clone',
      'clone3',
      'unshare',
      'setns',
      'chroot',
      'seccomp',
      'pidfd_open',
      'connect',
      'bind',
      'getpid',
      'mmap',
      'mprotect',
      'execve',
      'prctl',
      'kcmp',
    ]) {
      expect(run(sys(name), [0n, 0n, 0n]), name).toBe(RET_ALLOW);
    }
  });

  it('kills any other ABI: a foreign audit architecture, and on x86_64 x32 numbers', () => {
    for (const foreign of [0x40000003 /* i386 */, 0x40000028 /* arm */, 0, 0xffffffff]) {
      expect(run(sys('getpid'), [], foreign)).toBe(RET_KILL_PROCESS);
      expect(run(20, [], foreign)).toBe(RET_KILL_PROCESS);
    }
    if (arch === 'x64') {
      for (const nr of [0, 39, 101, 165, 0x1ff, 0xffff]) {
        expect(run(0x40000000 + nr)).toBe(RET_KILL_PROCESS);
      }
      expect(run(0x3fffffff)).toBe(RET_ALLOW);
    }
  });

  it('creates sockets of the Unix, IP and netlink families only, whatever the flags', () => {
    for (const name of ['socket', 'socketpair']) {
      const nr = sys(name);
      for (let family = 0; family < 64; family++) {
        for (const type of [SOCK.STREAM, SOCK.DGRAM | SOCK.CLOEXEC, SOCK.RAW | SOCK.NONBLOCK]) {
          const allowed = [AF.UNIX, AF.INET, AF.INET6].includes(family);
          const want = allowed || family === AF.NETLINK ? RET_ALLOW : ERR(EAFNOSUPPORT);
          expect(run(nr, [BigInt(family), BigInt(type), 0n]), `${name} ${family}/${type}`).toBe(
            want,
          );
          // the kernel reads an int: bits above it must not change the answer
          expect(run(nr, [HIGH | BigInt(family), HIGH | BigInt(type), HIGH])).toBe(want);
        }
      }
      for (const family of [AF.VSOCK, AF.PACKET, AF.ALG]) {
        expect(
          run(nr, [BigInt(family), BigInt(SOCK.STREAM | SOCK.NONBLOCK | SOCK.CLOEXEC), 0n]),
        ).toBe(ERR(EAFNOSUPPORT));
      }
    }
  });

  it('refuses SOCK_PACKET, the AF_PACKET socket the kernel makes from AF_INET, with any flags', () => {
    for (const family of [AF.INET, AF.INET6, AF.UNIX]) {
      for (const flags of [0, SOCK.NONBLOCK, SOCK.CLOEXEC, SOCK.NONBLOCK | SOCK.CLOEXEC]) {
        expect(run(sys('socket'), [BigInt(family), BigInt(SOCK.PACKET | flags), 3n])).toBe(
          ERR(EAFNOSUPPORT),
        );
        expect(run(sys('socket'), [BigInt(family), HIGH | BigInt(SOCK.PACKET | flags), 0n])).toBe(
          ERR(EAFNOSUPPORT),
        );
      }
      // raw IP sockets stay (they need CAP_NET_RAW, which only a nested namespace gives)
      expect(run(sys('socket'), [BigInt(family), BigInt(SOCK.RAW | SOCK.CLOEXEC), 1n])).toBe(
        RET_ALLOW,
      );
    }
  });

  it('opens netlink for route, diag, audit, uevent and generic only: never netfilter', () => {
    const allowed = [0, 4, 9, 15, 16];
    for (let proto = 0; proto < 32; proto++) {
      for (const type of [SOCK.RAW, SOCK.DGRAM | SOCK.CLOEXEC | SOCK.NONBLOCK]) {
        const want = allowed.includes(proto) ? RET_ALLOW : ERR(EPROTONOSUPPORT);
        const args = [BigInt(AF.NETLINK), BigInt(type), BigInt(proto)];
        expect(run(sys('socket'), args), `netlink ${proto}`).toBe(want);
        expect(
          run(
            sys('socket'),
            args.map((a) => a | HIGH),
          ),
        ).toBe(want);
      }
    }
    for (const proto of [NETLINK.NETFILTER, NETLINK.XFRM]) {
      expect(run(sys('socket'), [BigInt(AF.NETLINK), BigInt(SOCK.RAW), BigInt(proto)])).toBe(
        ERR(EPROTONOSUPPORT),
      );
    }
    for (const proto of [NETLINK.ROUTE, NETLINK.SOCK_DIAG, NETLINK.AUDIT, NETLINK.UEVENT]) {
      expect(run(sys('socket'), [BigInt(AF.NETLINK), BigInt(SOCK.RAW), BigInt(proto)])).toBe(
        RET_ALLOW,
      );
    }
  });

  it('refuses the legacy netfilter socket options (iptables, ip6tables, arptables, ebtables, IPVS, ipset)', () => {
    const SOL_IP = 0n;
    const SOL_IPV6 = 41n;
    const refused: [bigint, number][] = [
      [SOL_IP, 64], // IPT_SO_SET_REPLACE / IPT_SO_GET_INFO
      [SOL_IP, 65], // IPT_SO_SET_ADD_COUNTERS / IPT_SO_GET_ENTRIES
      [SOL_IP, 66],
      [SOL_IP, 67],
      [SOL_IP, 83], // SO_IP_SET
      [SOL_IP, 96], // ARPT_SO_SET_REPLACE
      [SOL_IP, 97],
      [SOL_IP, 99],
      [SOL_IP, 128], // EBT_SO_SET_ENTRIES
      [SOL_IP, 129],
      [SOL_IP, 131],
      [SOL_IP, 1152], // IP_VS_SO_SET_NONE
      [SOL_IP, 1160],
      [SOL_IP, 1167], // IP_VS_SO_SET_ZERO
      [SOL_IPV6, 64], // IP6T_SO_SET_REPLACE
      [SOL_IPV6, 65],
      [SOL_IPV6, 68],
      [SOL_IPV6, 69],
    ];
    const allowed: [bigint, number][] = [
      [SOL_IP, 1], // IP_TOS
      [SOL_IP, 52], // IP_PROTOCOL
      [SOL_IP, 63],
      [SOL_IP, 68],
      [SOL_IP, 80], // SO_ORIGINAL_DST
      [SOL_IP, 95],
      [SOL_IP, 100],
      [SOL_IP, 127],
      [SOL_IP, 1151],
      [SOL_IP, 1168],
      [SOL_IPV6, 26], // IPV6_V6ONLY
      [SOL_IPV6, 63],
      [SOL_IPV6, 66],
      [SOL_IPV6, 67], // IPV6_TCLASS
      [SOL_IPV6, 70],
      [SOL_IPV6, 80],
      [1n, 64], // SOL_SOCKET
      [6n, 64], // SOL_TCP
      [17n, 96], // SOL_UDP
    ];
    for (const name of ['setsockopt', 'getsockopt']) {
      for (const [level, opt] of refused) {
        expect(run(sys(name), [3n, level, BigInt(opt), 0n, 4n]), `${name} ${level}/${opt}`).toBe(
          ERR(EPERM),
        );
        expect(run(sys(name), [3n, HIGH | level, HIGH | BigInt(opt), 0n, 4n])).toBe(ERR(EPERM));
      }
      for (const [level, opt] of allowed) {
        expect(run(sys(name), [3n, level, BigInt(opt), 0n, 4n]), `${name} ${level}/${opt}`).toBe(
          RET_ALLOW,
        );
      }
    }
  });

  it('refuses TIOCSTI and TIOCLINUX, whatever the bits above the request', () => {
    for (const req of [0x5412n, 0x541cn]) {
      expect(run(sys('ioctl'), [0n, req, 0n])).toBe(ERR(EPERM));
      expect(run(sys('ioctl'), [0n, HIGH | req, 0n])).toBe(ERR(EPERM));
    }
    for (const req of [0x5413n /* TIOCGWINSZ */, 0x541bn /* FIONREAD */, 0x5401n]) {
      expect(run(sys('ioctl'), [0n, req, 0n])).toBe(RET_ALLOW);
    }
  });
});
