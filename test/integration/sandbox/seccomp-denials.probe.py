# Probes for seccomp-denials.test.ts: every refusal of the seccomp filter (src/server/sandbox/
# seccomp.ts), each made with arguments that do nothing harmful where the call is allowed and
# that the kernel, without the filter, answers with something other than the filter's refusal: it
# succeeds, finds the arguments wrong (EINVAL, EBADF, ENOENT) or lacks the call (ENOSYS).
#
# The test runs it as `python3 probe.py '<json>'`, the JSON naming this machine's syscall number
# of each call the filter refuses by name (the filter's own table), in user, mount, network and pid
# namespaces of its own, so capabilities over those namespaces are held: on the host, as nobody,
# and inside an instance. It prints "name=ok", "name=<errno name>" or "name=<signal name>" a line.
import ctypes
import errno
import json
import mmap
import os
import signal
import socket
import struct
import sys
import tempfile

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
C = ctypes.c_char_p
AT_FDCWD = -100
NR = json.loads(sys.argv[1])
TARGET = tempfile.mkdtemp(prefix="burrow-probe-").encode()


def answer(r):
    e = ctypes.get_errno()
    return "ok" if r >= 0 else errno.errorcode.get(e, str(e))


def sysc(nr, *args):
    ctypes.set_errno(0)
    return libc.syscall(ctypes.c_long(nr), *args)


def closing(r):
    """A call that answers a descriptor: closed again."""
    if r >= 0:
        os.close(r)
    return r


def in_child(fn):
    """`fn()` in a child process; its answer, or the signal that ended the child."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            os.write(w, fn().encode())
        finally:
            os._exit(0)
    os.close(w)
    out = os.read(r, 100).decode()
    os.close(r)
    _, status = os.waitpid(pid, 0)
    return signal.Signals(os.WTERMSIG(status)).name if os.WIFSIGNALED(status) else out


class Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def vm_copy(nr):
    """8 bytes copied within this very process (process_vm_readv or _writev)."""
    src = ctypes.create_string_buffer(b"written!")
    dst = ctypes.create_string_buffer(8)
    local = Iovec(ctypes.cast(dst if nr == NR.get("process_vm_readv") else src, ctypes.c_void_p), 8)
    remote = Iovec(ctypes.cast(src if nr == NR.get("process_vm_readv") else dst, ctypes.c_void_p), 8)
    r = sysc(nr, os.getpid(), ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
    return r if r < 0 or dst.raw == b"written!" else -1


def perf_attr():
    """A software clock counting for this process only, allowed to any user at paranoid 2."""
    a = (ctypes.c_uint8 * 128)()
    ctypes.c_uint32.from_buffer(a, 0).value = 1  # PERF_TYPE_SOFTWARE
    ctypes.c_uint32.from_buffer(a, 4).value = 128  # size
    # disabled, exclude_kernel, exclude_hv
    ctypes.c_uint64.from_buffer(a, 40).value = (1 << 0) | (1 << 5) | (1 << 6)
    return ctypes.byref(a)


def pidfd_getfd(nr):
    """A descriptor copied out of a child of the same user."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.read(r, 1)
        os._exit(0)
    pidfd = sysc(434, pid, 0)  # pidfd_open (the same number on every architecture)
    got = closing(sysc(nr, pidfd, r, 0)) if pidfd >= 0 else -1
    os.write(w, b"x")
    os.waitpid(pid, 0)
    for fd in (r, w, pidfd):
        if fd >= 0:
            os.close(fd)
    return got


def io_setup(nr):
    ctx = ctypes.c_ulong(0)
    r = sysc(nr, 1, ctypes.byref(ctx))
    if r >= 0:
        sysc(207 if os.uname().machine == "x86_64" else 1, ctx)  # io_destroy
    return r


def timex():
    return ctypes.byref((ctypes.c_uint8 * 512)())  # modes 0: only reads the clock's state


# name: what it does where allowed (on the host, in namespaces of its own, as nobody)
CALLS = {
    # no such module, no file: ENOSYS without module support, else EPERM (a host capability)
    "init_module": lambda nr: sysc(nr, None, 0, C(b"")),
    "finit_module": lambda nr: sysc(nr, -1, C(b""), 0),
    "delete_module": lambda nr: sysc(nr, C(b"burrow-none"), 0),
    # more segments than any kernel takes (16): EINVAL or ENOSYS, never anything loaded
    "kexec_load": lambda nr: sysc(nr, 0, 1000, None, 0),
    "kexec_file_load": lambda nr: sysc(nr, -1, -1, 0, None, 0),
    # a key in this process's own keyring, gone when it exits
    "add_key": lambda nr: sysc(nr, C(b"user"), C(b"burrow-probe"), C(b"x"), 1, -2),
    "request_key": lambda nr: sysc(nr, C(b"user"), C(b"burrow-none"), None, 0),  # ENOKEY
    "keyctl": lambda nr: sysc(nr, 0, -2, 0),  # KEYCTL_GET_KEYRING_ID of the process keyring
    # a tmpfs on a directory of this mount namespace, and off it again
    "mount": lambda nr: sysc(nr, C(b"none"), C(TARGET), C(b"tmpfs"), 0, None),
    "umount2": lambda nr: sysc(nr, C(TARGET), 0),
    "pivot_root": lambda nr: sysc(nr, C(b"/burrow-none"), C(b"/burrow-none")),  # ENOENT
    "open_tree": lambda nr: closing(sysc(nr, AT_FDCWD, C(TARGET), 1)),  # OPEN_TREE_CLONE
    "open_tree_attr": lambda nr: closing(sysc(nr, AT_FDCWD, C(TARGET), 1, None, 0)),
    "move_mount": lambda nr: sysc(nr, -1, C(b""), AT_FDCWD, C(TARGET), 4),  # EBADF
    "fsopen": lambda nr: closing(sysc(nr, C(b"tmpfs"), 0)),
    "fsconfig": lambda nr: sysc(nr, -1, 6, None, None, 0),  # EBADF
    "fsmount": lambda nr: sysc(nr, -1, 0, 0),  # EBADF
    "fspick": lambda nr: closing(sysc(nr, AT_FDCWD, C(TARGET), 0)),  # EINVAL: not a mount
    "mount_setattr": lambda nr: sysc(
        nr, AT_FDCWD, C(TARGET), 0, C(struct.pack("QQQQ", 1, 0, 0, 0)), 32
    ),
    # PTRACE_TRACEME in a child that then ends
    "ptrace": lambda nr: in_child(lambda: answer(sysc(nr, 0, 0, None, None))),
    "process_vm_readv": vm_copy,
    "process_vm_writev": vm_copy,
    "pidfd_getfd": pidfd_getfd,
    "swapon": lambda nr: sysc(nr, C(b"/burrow-none"), 0x100000),  # EINVAL: unknown flag
    "swapoff": lambda nr: sysc(nr, C(b"/burrow-none")),  # EPERM: a host capability first
    "reboot": lambda nr: sysc(nr, 0, 0, 0, None),  # EINVAL: bad magic, in its own pid namespace
    "acct": lambda nr: sysc(nr, None),  # EPERM: a host capability first
    "syslog": lambda nr: sysc(nr, 10, None, 0),  # SIZE_BUFFER: EPERM under dmesg_restrict
    "quotactl": lambda nr: sysc(nr, (0x800004 << 8) | 99, C(b"/"), 0, None),  # EINVAL: type 99
    "quotactl_fd": lambda nr: sysc(nr, -1, 0x800004 << 8, 0, None),  # EBADF
    "lookup_dcookie": lambda nr: sysc(nr, 0, None, 0),  # ENOSYS since 6.8
    "perf_event_open": lambda nr: closing(sysc(nr, perf_attr(), 0, -1, -1, 0)),
    # BPF_MAP_CREATE with no attributes: EINVAL for any user
    "bpf": lambda nr: sysc(nr, 0, None, 0),
    "userfaultfd": lambda nr: closing(sysc(nr, 1 | os.O_CLOEXEC)),  # UFFD_USER_MODE_ONLY
    # handle_bytes 0: EOVERFLOW, with the size it needs
    "name_to_handle_at": lambda nr: sysc(
        nr, AT_FDCWD, C(b"/"), ctypes.byref((ctypes.c_uint8 * 64)()), ctypes.byref(ctypes.c_int()), 0
    ),
    "open_by_handle_at": lambda nr: sysc(nr, AT_FDCWD, None, 0),  # EFAULT: a null handle
    "settimeofday": lambda nr: sysc(nr, struct.pack("ql", 0, -1), None),  # EINVAL: usec -1
    "clock_settime": lambda nr: sysc(nr, 1, struct.pack("ql", 0, 0)),  # EINVAL: MONOTONIC
    "clock_adjtime": lambda nr: sysc(nr, 0, timex()),
    "adjtimex": lambda nr: sysc(nr, timex()),
    "vhangup": lambda nr: sysc(nr),  # EPERM: a host capability first
    "nfsservctl": lambda nr: sysc(nr, 0, None, None),  # ENOSYS: gone since 3.1
    "fanotify_init": lambda nr: closing(sysc(nr, 0x200, os.O_RDONLY)),  # FAN_REPORT_FID
    "io_uring_setup": lambda nr: closing(
        sysc(nr, 1, ctypes.byref((ctypes.c_uint8 * 120)()))
    ),
    "io_uring_enter": lambda nr: sysc(nr, -1, 0, 0, 0, None, 0),  # EBADF
    "io_uring_register": lambda nr: sysc(nr, -1, 0, None, 0),  # EBADF
    "io_setup": io_setup,
    "io_submit": lambda nr: sysc(nr, 0, 0, None),  # EINVAL: no context
    "iopl": lambda nr: sysc(nr, 0),  # the level it has
    "ioperm": lambda nr: sysc(nr, 0, 1, 0),  # turning nothing on
    "modify_ldt": lambda nr: sysc(nr, 0, ctypes.byref((ctypes.c_uint8 * 16)()), 16),  # read
    "uselib": lambda nr: sysc(nr, C(b"/burrow-none")),  # ENOSYS without CONFIG_USELIB
}


def sock(family, type_, proto=0):
    try:
        socket.socket(family, type_, proto).close()
        return 0
    except OSError as e:
        ctypes.set_errno(e.errno)
        return -1


def pair(family):
    sv = (ctypes.c_int * 2)()
    ctypes.set_errno(0)
    r = libc.socketpair(family, socket.SOCK_STREAM, 0, sv)
    if r == 0:
        os.close(sv[0])
        os.close(sv[1])
    return r


def sockopt(family, level, name, get=False):
    s = socket.socket(family, socket.SOCK_DGRAM)
    buf = ctypes.create_string_buffer(b"filter", 96)
    size = ctypes.c_uint(84)
    ctypes.set_errno(0)
    if get:
        r = libc.getsockopt(s.fileno(), level, name, buf, ctypes.byref(size))
    else:
        r = libc.setsockopt(s.fileno(), level, name, buf, 96)
    s.close()
    return r


def tty_ioctl(request):
    """`request` on this process's own controlling terminal, in a child of its own session."""

    def child():
        master, slave = os.openpty()
        os.setsid()
        tty = os.open(os.ttyname(slave), os.O_RDWR)  # becomes the controlling terminal
        ctypes.set_errno(0)
        return answer(libc.ioctl(tty, request, C(b"\x02x")))

    return in_child(child)


def native(code):
    """Machine code (x86_64) run in a child: what it returned in rax, or its signal."""

    def child():
        page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        page.write(code)
        addr = ctypes.addressof(ctypes.c_char.from_buffer(page))
        r = ctypes.CFUNCTYPE(ctypes.c_long)(addr)()
        return "ok" if r >= 0 else errno.errorcode.get(-r, str(r))

    return in_child(child)


# refusals by argument: name: (what it does where allowed)
ARGUMENTS = {
    "af_vsock": lambda: sock(40, socket.SOCK_STREAM | socket.SOCK_CLOEXEC),
    "af_packet": lambda: sock(socket.AF_PACKET, socket.SOCK_RAW),
    "af_alg": lambda: sock(38, socket.SOCK_SEQPACKET),
    "af_key": lambda: sock(15, socket.SOCK_RAW, 2),  # PF_KEY_V2
    "sock_packet": lambda: sock(socket.AF_INET, 10 | socket.SOCK_CLOEXEC, 0x0300),
    "socketpair_vsock": lambda: pair(40),  # EOPNOTSUPP where allowed
    "netlink_netfilter": lambda: sock(socket.AF_NETLINK, socket.SOCK_RAW, 12),
    "netlink_xfrm": lambda: sock(socket.AF_NETLINK, socket.SOCK_RAW, 6),
    "netlink_crypto": lambda: sock(socket.AF_NETLINK, socket.SOCK_RAW, 21),
    "ipt_so_get_info": lambda: sockopt(socket.AF_INET, 0, 64, get=True),
    "ipt_so_set_replace": lambda: sockopt(socket.AF_INET, 0, 64),  # EINVAL: empty table
    "so_ip_set": lambda: sockopt(socket.AF_INET, 0, 83, get=True),
    "arpt_so_set_replace": lambda: sockopt(socket.AF_INET, 0, 96),
    "ebt_so_set_entries": lambda: sockopt(socket.AF_INET, 0, 128),
    "ip_vs_so_set_flush": lambda: sockopt(socket.AF_INET, 0, 1157),
    "ip6t_so_set_replace": lambda: sockopt(socket.AF_INET6, 41, 64),
    "ip6t_so_get_revision": lambda: sockopt(socket.AF_INET6, 41, 68, get=True),
    "tiocsti": lambda: tty_ioctl(0x5412),
    "tioclinux": lambda: tty_ioctl(0x541C),  # EINVAL or ENOTTY: a pty is no console
}
if os.uname().machine == "x86_64":
    # another ABI: getpid through int 0x80 (32-bit), and as x32 (39 | __X32_SYSCALL_BIT)
    ARGUMENTS["int80"] = lambda: native(b"\xb8\x14\x00\x00\x00\xcd\x80\xc3")
    ARGUMENTS["x32"] = lambda: native(b"\xb8\x27\x00\x00\x40\x0f\x05\xc3")

try:
    for name, nr in NR.items():
        r = CALLS[name](nr)
        print(f"{name}={r if isinstance(r, str) else answer(r)}", flush=True)
    for name, fn in ARGUMENTS.items():
        r = fn()
        print(f"{name}={r if isinstance(r, str) else answer(r)}", flush=True)
finally:
    libc.umount2(C(TARGET), 2)  # MNT_DETACH, if the mount was made and stayed
    os.rmdir(TARGET)
