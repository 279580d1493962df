/**
 * The seccomp filter every instance process runs under: a classic BPF program, built here
 * (no libseccomp at run time) and handed to bubblewrap's `--seccomp` option, which loads it just
 * before it executes the instance's command.
 *
 * It is a deny list: an instance is a whole Linux machine (compilers, Chromium with its own
 * sandbox, Python, servers), so everything is allowed except what no instance needs and what
 * has a history of turning a sandbox into the host: kernel modules and kexec, the kernel keyring,
 * mounting (also inside nested user namespaces), ptrace and cross-process memory or descriptor
 * access, BPF and perf, userfaultfd, io_uring and native AIO, handle-based opens, clock and swap
 * changes, reboot.
 * A refused call fails with EPERM.
 *
 * Nested user and network namespaces stay allowed (Chromium's own sandbox needs them), so the
 * filter also looks at the arguments of the socket calls: only the Unix, IP and netlink families
 * exist (vsock is not namespaced and reaches the hypervisor; packet, ALG and the rest are kernel
 * code no instance needs), netlink only for the protocols normal tools use (not nf_tables), and
 * the legacy netfilter socket options (iptables, arptables, ebtables, IPVS) are refused. Those
 * answer as a kernel without the feature would: EAFNOSUPPORT, EPROTONOSUPPORT, EPERM.
 *
 * Foreign ABIs (32-bit x86 on x86_64, x32) are killed outright: their syscall numbers differ, and
 * a filter keyed on the native numbers would not apply to them.
 */

/** Syscalls refused with EPERM. Names are resolved per architecture below. */
export const DENIED_SYSCALLS = [
  'init_module',
  'finit_module',
  'delete_module',
  'kexec_load',
  'kexec_file_load',
  'add_key',
  'request_key',
  'keyctl',
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
  // copies another process's descriptor (the toolbox's pipe, Chromium's DevTools pipe)
  'pidfd_getfd',
  'swapon',
  'swapoff',
  'reboot',
  'acct',
  'syslog',
  'quotactl',
  'quotactl_fd',
  'lookup_dcookie',
  'perf_event_open',
  'bpf',
  'userfaultfd',
  'name_to_handle_at',
  'open_by_handle_at',
  'settimeofday',
  'clock_settime',
  'clock_adjtime',
  'adjtimex',
  'vhangup',
  'nfsservctl',
  'fanotify_init',
  'io_uring_setup',
  'io_uring_enter',
  'io_uring_register',
  // native AIO: a process in io_submit cannot die until every request it made is done, so one
  // call of many large direct reads kept a SIGKILLed process of an instance for over a minute
  // after its stop (glibc's POSIX AIO uses threads, not these)
  'io_setup',
  'io_submit',
  // x86 only
  'iopl',
  'ioperm',
  'modify_ldt',
  'uselib',
] as const;

/** Syscalls allowed or refused by their arguments. */
export const CHECKED_SYSCALLS = [
  'socket',
  'socketpair',
  'setsockopt',
  'getsockopt',
  'ioctl',
] as const;

export type DeniedSyscall = (typeof DENIED_SYSCALLS)[number];
export type CheckedSyscall = (typeof CHECKED_SYSCALLS)[number];

export interface SeccompArch {
  /** AUDIT_ARCH_* value seccomp reports in `seccomp_data.arch`. */
  audit: number;
  /** Syscall numbers at or above this are another ABI on the same arch (x32). */
  foreignFrom?: number;
  /** A name missing here does not exist on this architecture. */
  numbers: Partial<Record<DeniedSyscall, number>> & Record<CheckedSyscall, number>;
}

// From the kernel's syscall tables (arch/x86/entry/syscalls/syscall_64.tbl and
// include/uapi/asm-generic/unistd.h).
export const SECCOMP_ARCHES: Readonly<Record<string, SeccompArch>> = {
  x64: {
    audit: 0xc000003e,
    foreignFrom: 0x40000000,
    numbers: {
      ioctl: 16,
      socket: 41,
      socketpair: 53,
      setsockopt: 54,
      getsockopt: 55,
      ptrace: 101,
      syslog: 103,
      uselib: 134,
      vhangup: 153,
      modify_ldt: 154,
      pivot_root: 155,
      adjtimex: 159,
      acct: 163,
      settimeofday: 164,
      mount: 165,
      umount2: 166,
      swapon: 167,
      swapoff: 168,
      reboot: 169,
      iopl: 172,
      ioperm: 173,
      init_module: 175,
      delete_module: 176,
      quotactl: 179,
      nfsservctl: 180,
      lookup_dcookie: 212,
      clock_settime: 227,
      kexec_load: 246,
      add_key: 248,
      request_key: 249,
      keyctl: 250,
      perf_event_open: 298,
      fanotify_init: 300,
      name_to_handle_at: 303,
      open_by_handle_at: 304,
      clock_adjtime: 305,
      process_vm_readv: 310,
      process_vm_writev: 311,
      finit_module: 313,
      kexec_file_load: 320,
      bpf: 321,
      userfaultfd: 323,
      io_setup: 206,
      io_submit: 209,
      io_uring_setup: 425,
      io_uring_enter: 426,
      io_uring_register: 427,
      open_tree: 428,
      move_mount: 429,
      fsopen: 430,
      fsconfig: 431,
      fsmount: 432,
      fspick: 433,
      pidfd_getfd: 438,
      mount_setattr: 442,
      quotactl_fd: 443,
      open_tree_attr: 467,
    },
  },
  arm64: {
    audit: 0xc00000b7,
    numbers: {
      io_setup: 0,
      io_submit: 2,
      lookup_dcookie: 18,
      ioctl: 29,
      umount2: 39,
      mount: 40,
      pivot_root: 41,
      nfsservctl: 42,
      vhangup: 58,
      quotactl: 60,
      acct: 89,
      kexec_load: 104,
      init_module: 105,
      delete_module: 106,
      clock_settime: 112,
      syslog: 116,
      ptrace: 117,
      reboot: 142,
      settimeofday: 170,
      adjtimex: 171,
      socket: 198,
      socketpair: 199,
      setsockopt: 208,
      getsockopt: 209,
      add_key: 217,
      request_key: 218,
      keyctl: 219,
      swapon: 224,
      swapoff: 225,
      perf_event_open: 241,
      fanotify_init: 262,
      name_to_handle_at: 264,
      open_by_handle_at: 265,
      clock_adjtime: 266,
      process_vm_readv: 270,
      process_vm_writev: 271,
      finit_module: 273,
      bpf: 280,
      userfaultfd: 282,
      kexec_file_load: 294,
      io_uring_setup: 425,
      io_uring_enter: 426,
      io_uring_register: 427,
      open_tree: 428,
      move_mount: 429,
      fsopen: 430,
      fsconfig: 431,
      fsmount: 432,
      fspick: 433,
      pidfd_getfd: 438,
      mount_setattr: 442,
      quotactl_fd: 443,
      open_tree_attr: 467,
    },
  },
};

/** Socket families an instance may create (AF_UNIX, AF_INET, AF_INET6, AF_NETLINK). */
export const ALLOWED_FAMILIES = [1, 2, 10, 16] as const;
const AF_NETLINK = 16;
/**
 * Netlink protocols an instance may open: ROUTE (ip, Chromium's address tracking), SOCK_DIAG
 * (ss), AUDIT (login tools probe it), KOBJECT_UEVENT (udev monitors), GENERIC (ethtool, iw).
 * Not NETFILTER (nf_tables, ipset, conntrack), XFRM, CRYPTO, RDMA and the rest.
 */
export const ALLOWED_NETLINK = [0, 4, 9, 15, 16] as const;
/** `socket(AF_INET, SOCK_PACKET)` is turned into an AF_PACKET socket by the kernel. */
const SOCK_PACKET = 10;
/** SOCK_TYPE_MASK: the type without SOCK_NONBLOCK and SOCK_CLOEXEC. */
const SOCK_TYPE_MASK = 0xf;
/**
 * Legacy netfilter socket options, `[level, first, last]` (linux/netfilter_ipv4/ip_tables.h,
 * …ipv6/ip6_tables.h, …arp/arp_tables.h, …bridge/ebtables.h, ip_vs.h, ipset/ip_set.h). Any IPv4
 * or IPv6 socket reaches them, and in a nested network namespace its owner has CAP_NET_ADMIN.
 * SO_ORIGINAL_DST (80) stays: it only reads a connection's address.
 */
export const NETFILTER_SOCKOPTS: readonly (readonly [number, number, number])[] = [
  [0, 64, 67], // SOL_IP: IPT_SO_*
  [0, 83, 83], // SOL_IP: SO_IP_SET
  [0, 96, 99], // SOL_IP: ARPT_SO_*
  [0, 128, 132], // SOL_IP: EBT_SO_*
  [0, 1152, 1167], // SOL_IP: IP_VS_SO_*
  [41, 64, 65], // SOL_IPV6: IP6T_SO_SET_*, IP6T_SO_GET_INFO/ENTRIES
  [41, 68, 69], // SOL_IPV6: IP6T_SO_GET_REVISION_* (67 is IPV6_TCLASS)
];
/** ioctls refused: TIOCSTI (type into a terminal), TIOCLINUX (console selection paste). */
export const DENIED_IOCTLS = [0x5412, 0x541c] as const;

// Classic BPF opcodes (linux/filter.h) and seccomp return values (linux/seccomp.h).
const LD_W_ABS = 0x20;
const ALU_AND_K = 0x54;
const JEQ_K = 0x15;
const JGE_K = 0x35;
const JGT_K = 0x25;
const RET_K = 0x06;
export const RET_ALLOW = 0x7fff0000;
export const RET_KILL_PROCESS = 0x80000000;
export const RET_ERRNO = 0x00050000;
export const EPERM = 1;
export const EPROTONOSUPPORT = 93;
export const EAFNOSUPPORT = 97;
/** offsetof(struct seccomp_data, nr), (…, arch), and the low 32 bits of args[i] (little-endian). */
const OFF_NR = 0;
const OFF_ARCH = 4;
const argLow = (i: number) => 16 + 8 * i;

/** Whether this machine's architecture has a filter. */
export function seccompSupported(arch: string = process.arch): boolean {
  return Object.hasOwn(SECCOMP_ARCHES, arch); // not `in`: 'toString' is no architecture
}

/** A jump target: the next instruction (0) or a label. */
type Target = 0 | string;
type Insn = { op: number; k: number; jt?: Target; jf?: Target } | { label: string };

/**
 * The filter as bytes of `struct sock_filter[]` (8 bytes each, host byte order), the format
 * bubblewrap's `--seccomp FD` reads. Throws on an architecture without a table.
 *
 * Arguments are compared on their low 32 bits only: the kernel truncates these `int` arguments,
 * so the high half is the caller's to choose and must not decide anything.
 */
export function buildSeccompFilter(arch: string = process.arch): Buffer {
  const spec = seccompSupported(arch) ? SECCOMP_ARCHES[arch] : undefined;
  if (!spec) throw new Error(`no seccomp filter for architecture ${arch}`);
  const n = spec.numbers;
  const denied = [
    ...new Set(DENIED_SYSCALLS.flatMap((name) => (n[name] === undefined ? [] : [n[name]]))),
  ];
  const ld = (k: number): Insn => ({ op: LD_W_ABS, k });
  const jeq = (k: number, jt: Target, jf: Target = 0): Insn => ({ op: JEQ_K, k, jt, jf });
  const ret = (k: number): Insn => ({ op: RET_K, k });
  const errno = (e: number) => ret(RET_ERRNO | e);

  const p: Insn[] = [
    ld(OFF_ARCH),
    jeq(spec.audit, 0, 'kill'),
    ld(OFF_NR),
    ...(spec.foreignFrom === undefined
      ? []
      : [{ op: JGE_K, k: spec.foreignFrom, jt: 'kill', jf: 0 } as Insn]),
    jeq(n.socket, 'socket'),
    jeq(n.socketpair, 'socket'),
    jeq(n.setsockopt, 'sockopt'),
    jeq(n.getsockopt, 'sockopt'),
    jeq(n.ioctl, 'ioctl'),
    ...denied.map((nr) => jeq(nr, 'eperm')),
    ret(RET_ALLOW),

    // socket(family, type, protocol), socketpair(family, type, protocol, sv)
    { label: 'socket' },
    ld(argLow(0)),
    ...ALLOWED_FAMILIES.map((f) => jeq(f, f === AF_NETLINK ? 'netlink' : 'type')),
    errno(EAFNOSUPPORT),
    { label: 'netlink' },
    ld(argLow(2)),
    ...ALLOWED_NETLINK.map((proto) => jeq(proto, 'type')),
    errno(EPROTONOSUPPORT),
    { label: 'type' },
    ld(argLow(1)),
    { op: ALU_AND_K, k: SOCK_TYPE_MASK },
    jeq(SOCK_PACKET, 'eafnosupport'),
    ret(RET_ALLOW),
    { label: 'eafnosupport' },
    errno(EAFNOSUPPORT),

    // setsockopt/getsockopt(fd, level, optname, …)
    { label: 'sockopt' },
    ld(argLow(1)),
    ...[...new Set(NETFILTER_SOCKOPTS.map(([level]) => level))].map((level) =>
      jeq(level, `level${level}`),
    ),
    ret(RET_ALLOW),
    ...[...new Set(NETFILTER_SOCKOPTS.map(([level]) => level))].flatMap((level) => [
      { label: `level${level}` },
      ld(argLow(2)),
      ...NETFILTER_SOCKOPTS.filter(([l]) => l === level).flatMap(([, first, last], i) => [
        // below `first`, or above `last`: try the next range
        { op: JGE_K, k: first, jt: 0, jf: `level${level}.${i + 1}` } as Insn,
        { op: JGT_K, k: last, jt: `level${level}.${i + 1}`, jf: 'eperm' } as Insn,
        { label: `level${level}.${i + 1}` },
      ]),
      ret(RET_ALLOW),
    ]),

    // ioctl(fd, request, …)
    { label: 'ioctl' },
    ld(argLow(1)),
    ...DENIED_IOCTLS.map((req) => jeq(req, 'eperm')),
    ret(RET_ALLOW),

    { label: 'eperm' },
    errno(EPERM),
    { label: 'kill' },
    ret(RET_KILL_PROCESS),
  ];
  return assemble(p);
}

/** Resolves labels to relative jumps (forward only, at most 255) and encodes the program. */
function assemble(program: Insn[]): Buffer {
  const labels = new Map<string, number>();
  const code: { op: number; k: number; jt: Target; jf: Target }[] = [];
  for (const insn of program) {
    if ('label' in insn) labels.set(insn.label, code.length);
    else code.push({ jt: 0, jf: 0, ...insn });
  }
  const out = Buffer.alloc(code.length * 8);
  code.forEach(({ op, k, jt, jf }, i) => {
    const offset = (t: Target) => {
      if (t === 0) return 0;
      const at = labels.get(t);
      if (at === undefined) throw new Error(`seccomp: no label ${t}`);
      const off = at - i - 1;
      if (off < 0 || off > 255) throw new Error(`seccomp: jump to ${t} out of range`);
      return off;
    };
    out.writeUInt16LE(op, i * 8);
    out.writeUInt8(offset(jt), i * 8 + 2);
    out.writeUInt8(offset(jf), i * 8 + 3);
    out.writeUInt32LE(k >>> 0, i * 8 + 4);
  });
  return out;
}
