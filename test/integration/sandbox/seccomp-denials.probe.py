# Probes for seccomp-denials.test.ts: seven system calls the filter refuses, each made with
# arguments that do nothing harmful where it is allowed (an invalid size, a null pointer, a copy
# into this process's own memory). Prints "name=ok" or "name=<errno name>" for each.
import ctypes
import errno
import os

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

# x86_64 numbers
BPF, PERF_EVENT_OPEN, USERFAULTFD, IO_URING_SETUP = 321, 298, 323, 425
OPEN_BY_HANDLE_AT, PROCESS_VM_WRITEV, KEXEC_LOAD = 304, 311, 246
if os.uname().machine == "aarch64":
    BPF, PERF_EVENT_OPEN, USERFAULTFD, IO_URING_SETUP = 280, 241, 282, 425
    OPEN_BY_HANDLE_AT, PROCESS_VM_WRITEV, KEXEC_LOAD = 265, 271, 104


def call(name, nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *args)
    e = ctypes.get_errno()
    print(f"{name}={'ok' if r >= 0 else errno.errorcode.get(e, e)}", flush=True)
    if r >= 0 and name != "process_vm_writev":  # a descriptor, except for the bytes written
        os.close(r)


class Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


# BPF_MAP_CREATE with no attributes: EINVAL where bpf is allowed, for any user (an unprivileged
# one's EPERM for a real map would not tell the filter from the kernel's own refusal)
call("bpf", BPF, 0, None, 0)
# a software clock counting for this process only
pattr = (ctypes.c_uint8 * 128)()
ctypes.c_uint32.from_buffer(pattr, 0).value = 1  # PERF_TYPE_SOFTWARE
ctypes.c_uint32.from_buffer(pattr, 4).value = 128  # size
ctypes.c_uint64.from_buffer(pattr, 8).value = 0  # PERF_COUNT_SW_CPU_CLOCK
# disabled, exclude_kernel, exclude_hv: allowed to any user at perf_event_paranoid 2
ctypes.c_uint64.from_buffer(pattr, 40).value = (1 << 0) | (1 << 5) | (1 << 6)
call("perf_event_open", PERF_EVENT_OPEN, ctypes.byref(pattr), 0, -1, -1, 0)
call("userfaultfd", USERFAULTFD, 1 | os.O_CLOEXEC)  # UFFD_USER_MODE_ONLY
params = (ctypes.c_uint8 * 120)()
call("io_uring_setup", IO_URING_SETUP, 1, ctypes.byref(params))
# a null handle: EFAULT once past the capability check
call("open_by_handle_at", OPEN_BY_HANDLE_AT, -100, None, 0)
# copy 8 bytes into this very process
src = ctypes.create_string_buffer(b"written!")
dst = ctypes.create_string_buffer(8)
local = Iovec(ctypes.cast(src, ctypes.c_void_p), 8)
remote = Iovec(ctypes.cast(dst, ctypes.c_void_p), 8)
call(
    "process_vm_writev",
    PROCESS_VM_WRITEV,
    os.getpid(),
    ctypes.byref(local),
    1,
    ctypes.byref(remote),
    1,
    0,
)
print("written=" + ("yes" if dst.raw == b"written!" else "no"), flush=True)
# more segments than any kernel takes (16): EINVAL where allowed, before anything is loaded
call("kexec_load", KEXEC_LOAD, 0, 1000, None, 0)
