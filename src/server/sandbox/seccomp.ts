/**
 * The seccomp filter every instance process runs under: a classic BPF program, built here
 * (no libseccomp at run time) and handed to bubblewrap's `--seccomp` option, which loads it just
 * before it executes the instance's command.
 *
 * It is a deny list: an instance is a whole Linux machine (compilers, Chromium with its own
 * sandbox, Python, servers), so everything is allowed except what no instance needs and what
 * has a history of turning a sandbox into the host: kernel modules and kexec, the kernel keyring,
 * mounting (also inside nested user namespaces), ptrace and cross-process memory access,
 * BPF and perf, userfaultfd, io_uring, handle-based opens, clock and swap changes, reboot. A
 * refused call fails with EPERM. Foreign ABIs (32-bit x86 on x86_64, x32) are killed outright:
 * their syscall numbers differ, and a filter keyed on the native numbers would not apply to them.
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
  'move_mount',
  'fsopen',
  'fsconfig',
  'fsmount',
  'fspick',
  'mount_setattr',
  'ptrace',
  'process_vm_readv',
  'process_vm_writev',
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
  // x86 only
  'iopl',
  'ioperm',
  'uselib',
] as const;

export type DeniedSyscall = (typeof DENIED_SYSCALLS)[number];

interface Arch {
  /** AUDIT_ARCH_* value seccomp reports in `seccomp_data.arch`. */
  audit: number;
  /** Syscall numbers at or above this are another ABI on the same arch (x32). */
  foreignFrom?: number;
  numbers: Partial<Record<DeniedSyscall, number>>;
}

// From the kernel's uapi headers (asm/unistd_64.h and asm-generic/unistd.h).
const ARCHES: Record<string, Arch> = {
  x64: {
    audit: 0xc000003e,
    foreignFrom: 0x40000000,
    numbers: {
      ptrace: 101,
      syslog: 103,
      uselib: 134,
      vhangup: 153,
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
      io_uring_setup: 425,
      io_uring_enter: 426,
      io_uring_register: 427,
      open_tree: 428,
      move_mount: 429,
      fsopen: 430,
      fsconfig: 431,
      fsmount: 432,
      fspick: 433,
      mount_setattr: 442,
      quotactl_fd: 443,
    },
  },
  arm64: {
    audit: 0xc00000b7,
    numbers: {
      lookup_dcookie: 18,
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
      mount_setattr: 442,
      quotactl_fd: 443,
    },
  },
};

// Classic BPF opcodes (linux/filter.h) and seccomp return values (linux/seccomp.h).
const LD_W_ABS = 0x20;
const JEQ_K = 0x15;
const JGE_K = 0x35;
const RET_K = 0x06;
const RET_ALLOW = 0x7fff0000;
const RET_KILL_PROCESS = 0x80000000;
const RET_ERRNO = 0x00050000;
const EPERM = 1;
/** offsetof(struct seccomp_data, nr) and (…, arch). */
const OFF_NR = 0;
const OFF_ARCH = 4;

/** Whether this machine's architecture has a filter. */
export function seccompSupported(arch: string = process.arch): boolean {
  return arch in ARCHES;
}

/**
 * The filter as bytes of `struct sock_filter[]` (8 bytes each, host byte order), the format
 * bubblewrap's `--seccomp FD` reads. Throws on an architecture without a table.
 */
export function buildSeccompFilter(arch: string = process.arch): Buffer {
  const spec = ARCHES[arch];
  if (!spec) throw new Error(`no seccomp filter for architecture ${arch}`);
  const numbers = [...new Set(Object.values(spec.numbers))];
  // Layout: [0] load arch, [1] native?, [2] kill, [3] load nr, ([4] foreign ABI?), one JEQ per
  // denied number, then allow, then deny.
  const prog: [number, number, number, number][] = [];
  prog.push([LD_W_ABS, 0, 0, OFF_ARCH]);
  prog.push([JEQ_K, 1, 0, spec.audit]);
  prog.push([RET_K, 0, 0, RET_KILL_PROCESS]);
  prog.push([LD_W_ABS, 0, 0, OFF_NR]);
  const checks = numbers.length + (spec.foreignFrom !== undefined ? 1 : 0);
  // Jumps are relative to the next instruction; the deny return sits after the allow return.
  if (spec.foreignFrom !== undefined) {
    // jt to the kill at index 2 is backwards, which BPF cannot do: jump to a second kill instead,
    // placed after the deny return.
    prog.push([JGE_K, checks + 1, 0, spec.foreignFrom]);
  }
  numbers.forEach((nr, i) => {
    const remaining = numbers.length - i - 1; // JEQs after this one
    prog.push([JEQ_K, remaining + 1, 0, nr]);
  });
  prog.push([RET_K, 0, 0, RET_ALLOW]);
  prog.push([RET_K, 0, 0, RET_ERRNO | EPERM]);
  if (spec.foreignFrom !== undefined) prog.push([RET_K, 0, 0, RET_KILL_PROCESS]);

  const out = Buffer.alloc(prog.length * 8);
  prog.forEach(([code, jt, jf, k], i) => {
    out.writeUInt16LE(code, i * 8);
    out.writeUInt8(jt, i * 8 + 2);
    out.writeUInt8(jf, i * 8 + 3);
    out.writeUInt32LE(k >>> 0, i * 8 + 4);
  });
  return out;
}
