/**
 * An attacker's flood of a channel the server reads: take a copy of descriptor `fd` of a process
 * (pidfd_getfd, else an open of /proc/<pid>/fd/<fd>), write `prefix` and then up to `total` bytes,
 * and report how far it got. Run inside an instance (its bash) or on the host as root.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

/** What the flood reports. */
export interface FloodResult {
  /** The process it found, if any. */
  pid: number | null;
  /** How it got the descriptor: `pidfd_getfd`, `proc`, or null when it could not. */
  via: string | null;
  /** errno of each way that was refused. */
  refused: Record<string, number>;
  /** Bytes written after the prefix. */
  written: number;
  /** errno that ended the writing (EPIPE: the reader is gone), or null. */
  writeErrno: number | null;
}

const SCRIPT = String.raw`
import ctypes, json, os, sys
target, fdnum, total, prefix = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), bytes.fromhex(sys.argv[4])
me = {os.getpid(), os.getppid()}
pid = None
if target.startswith("pid:"):
    pid = int(target[4:])
else:
    for p in sorted(os.listdir("/proc"), key=lambda p: (len(p), p)):
        if not p.isdigit() or int(p) in me:
            continue
        try:
            cmd = open("/proc/%s/cmdline" % p, "rb").read().replace(b"\0", b" ").decode("utf8", "replace")
        except OSError:
            continue
        if target in cmd and "burrow-flood" not in cmd:
            pid = int(p)
            break
out = {"pid": pid, "via": None, "refused": {}, "written": 0, "writeErrno": None}
libc = ctypes.CDLL(None, use_errno=True)
fd = -1
if pid is not None:
    pidfd = libc.syscall(434, pid, 0)  # pidfd_open (same number on x86_64 and arm64)
    if pidfd < 0:
        out["refused"]["pidfd_open"] = ctypes.get_errno()
    else:
        fd = libc.syscall(438, pidfd, fdnum, 0)  # pidfd_getfd
        if fd < 0:
            out["refused"]["pidfd_getfd"] = ctypes.get_errno()
        else:
            out["via"] = "pidfd_getfd"
    if fd < 0:
        try:
            fd = os.open("/proc/%d/fd/%d" % (pid, fdnum), os.O_WRONLY)
            out["via"] = "proc"
        except OSError as e:
            out["refused"]["proc"] = e.errno
if fd >= 0:
    chunk = b"x" * (1 << 20)
    try:
        os.write(fd, prefix)
        while out["written"] < total:
            out["written"] += os.write(fd, chunk)
    except OSError as e:
        out["writeErrno"] = e.errno
print(json.dumps(out))
`;

function args(target: string, fd: number, total: number, prefix: Buffer): string[] {
  return [target, String(fd), String(total), prefix.toString('hex')];
}

/** A shell command that runs the flood (for an instance's bash; python3 is there). */
export function floodCommand(target: string, fd: number, total: number, prefix = Buffer.alloc(0)) {
  const b64 = Buffer.from(SCRIPT).toString('base64');
  const quoted = args(target, fd, total, prefix).map((a) => `'${a.replace(/'/g, `'\\''`)}'`);
  return `echo ${b64} | base64 -d > /tmp/burrow-flood.py && python3 /tmp/burrow-flood.py ${quoted.join(' ')} burrow-flood`;
}

/** Parse what the flood printed (the last line of `output`). */
export function floodResult(output: string): FloodResult {
  const line = output.trim().split('\n').at(-1) ?? '';
  return JSON.parse(line) as FloodResult;
}

/**
 * Run the flood on the host (the test runs as root: no seccomp, any process), asynchronously:
 * the server it floods runs in this process and must go on reading.
 */
export async function floodFromHost(
  pid: number,
  fd: number,
  total: number,
  prefix = Buffer.alloc(0),
): Promise<FloodResult> {
  const { stdout } = await promisify(execFile)(
    '/usr/bin/python3',
    ['-c', SCRIPT, ...args(`pid:${pid}`, fd, total, prefix), 'burrow-flood'],
    { encoding: 'utf8', maxBuffer: 1024 * 1024 },
  );
  return floodResult(stdout);
}
