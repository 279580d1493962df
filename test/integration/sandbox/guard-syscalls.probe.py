# Syscall probes for guard-syscalls.test.ts. Each prints "name=ok" or "name=<errno name>".
# The test runs it inside an instance and, as a check that each probe reaches the kernel code it
# means to, on the host as an unprivileged user in namespaces of its own, where nothing refuses it.
import ctypes
import errno
import mmap
import os
import socket
import struct
import sys

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
C = ctypes.c_char_p
AT_FDCWD = -100


def report(name, r):
    e = ctypes.get_errno()
    print(f"{name}={'ok' if r >= 0 else errno.errorcode.get(e, e)}", flush=True)
    return r


def sysc(nr, *args):
    ctypes.set_errno(0)
    return libc.syscall(ctypes.c_long(nr), *args)


def native(code):
    """Run machine code (x86_64) that returns a value in rax; the value."""
    page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    page.write(code)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(page))
    return ctypes.CFUNCTYPE(ctypes.c_long)(addr)()


def sock(name, family, type_, proto=0):
    try:
        socket.socket(family, type_, proto).close()
        print(f"{name}=ok", flush=True)
    except OSError as e:
        print(f"{name}={errno.errorcode.get(e.errno, e.errno)}", flush=True)


def sockopt(name, fn):
    try:
        fn()
        print(f"{name}=ok", flush=True)
    except OSError as e:
        print(f"{name}={errno.errorcode.get(e.errno, e.errno)}", flush=True)


def mounts(target):
    """Every mount call this kernel has, each aimed at `target` (a directory that exists)."""
    os.makedirs(target, exist_ok=True)
    report("mount", libc.mount(C(b"none"), C(target.encode()), C(b"tmpfs"), 0, None))
    report("fspick", sysc(433, AT_FDCWD, C(target.encode()), 0))
    report("umount2", libc.umount2(C(target.encode()), 0))
    fs = report("fsopen", sysc(430, C(b"tmpfs"), 0))
    if fs >= 0:
        report("fsconfig", sysc(431, fs, 6, None, None, 0))  # FSCONFIG_CMD_CREATE
        m = report("fsmount", sysc(432, fs, 0, 0))
        if m >= 0:
            # MOVE_MOUNT_F_EMPTY_PATH
            report("move_mount", sysc(429, m, C(b""), AT_FDCWD, C(target.encode()), 4))
    # OPEN_TREE_CLONE | AT_RECURSIVE: a detached copy of the tree
    report("open_tree", sysc(428, AT_FDCWD, C(b"/tmp"), 1 | 0x8000))
    report("open_tree_attr", sysc(467, AT_FDCWD, C(b"/tmp"), 1 | 0x8000, None, 0))
    attr = struct.pack("QQQQ", 1, 0, 0, 0)  # MOUNT_ATTR_RDONLY
    report("mount_setattr", sysc(442, AT_FDCWD, C(target.encode()), 0, C(attr), len(attr)))
    print("mounted=" + ("yes" if f" {target} " in open("/proc/self/mounts").read() else "no"))


def netfilter():
    sock("nf_netlink", socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC, 12)
    sock("xfrm_netlink", socket.AF_NETLINK, socket.SOCK_RAW, 6)
    sock("route_netlink", socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_NONBLOCK, 0)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    # IPT_SO_GET_INFO for the "filter" table, then a (bad) IPT_SO_SET_REPLACE
    info = ctypes.create_string_buffer(b"filter", 84)
    size = ctypes.c_uint(84)
    report("ipt_get_info", libc.getsockopt(s.fileno(), 0, 64, info, ctypes.byref(size)))
    sockopt("ipt_set_replace", lambda: s.setsockopt(0, 64, b"\0" * 96))
    sockopt("ebt_set_entries", lambda: s.setsockopt(0, 128, b"\0" * 96))
    s6 = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    sockopt("ip6t_set_replace", lambda: s6.setsockopt(41, 64, b"\0" * 96))
    sockopt("ipv6_tclass", lambda: s6.setsockopt(41, 67, 0))
    sock("packet", socket.AF_PACKET, socket.SOCK_RAW, 0)
    sock("sock_packet", socket.AF_INET, 10 | socket.SOCK_CLOEXEC, 0x0300)  # SOCK_PACKET
    sock("raw_ip", socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)


def others():
    sock("vsock", 40, socket.SOCK_STREAM | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC)
    sock("tcp", socket.AF_INET, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    sock("unix", socket.AF_UNIX, socket.SOCK_STREAM)
    # pidfd_getfd: copy a descriptor out of a child (same uid, so only seccomp stands in the way)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(w)
        os.read(r, 1)
        os._exit(0)
    pidfd = sysc(434, pid, 0)  # pidfd_open
    report("pidfd_getfd", sysc(438, pidfd, r, 0) if pidfd >= 0 else -1)
    os.write(w, b"x")
    os.waitpid(pid, 0)
    # TIOCSTI into this process's own controlling terminal
    master, slave = os.openpty()
    pid = os.fork()
    if pid == 0:
        os.setsid()
        tty = os.open(os.ttyname(slave), os.O_RDWR)  # becomes the controlling terminal
        ctypes.set_errno(0)
        rc = libc.ioctl(tty, 0x5412, C(b"x"))
        print(f"tiocsti={'ok' if rc == 0 else errno.errorcode.get(ctypes.get_errno())}", flush=True)
        os._exit(0)
    os.waitpid(pid, 0)
    # native AIO (x86_64 numbers): a process in io_submit cannot die before its requests are done
    aio = ctypes.c_ulong(0)
    if report("io_setup", sysc(206, 1, ctypes.byref(aio))) >= 0:
        sysc(207, aio)  # io_destroy
    report("io_submit", sysc(209, 0, 0, 0))  # no context: EINVAL where allowed


def abi(kind):
    # mov eax, nr; int 0x80 | syscall; ret
    if kind == "int80":
        print("int80=" + str(native(b"\xb8\x14\x00\x00\x00\xcd\x80\xc3")), flush=True)  # getpid
    else:
        # x32 getpid (39 | __X32_SYSCALL_BIT)
        print("x32=" + str(native(b"\xb8\x27\x00\x00\x40\x0f\x05\xc3")), flush=True)


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "mounts":
        mounts(sys.argv[2])
    elif what == "netfilter":
        netfilter()
    elif what == "others":
        others()
    else:
        abi(what)
