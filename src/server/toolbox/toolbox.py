"""burrow toolbox: the file operations of an instance, run inside its sandbox.

toolbox.ts starts this with /usr/bin/python3 -I inside the instance's sandbox, like any other
process of the instance: as its user, in its mount namespace. Every path is resolved by the
kernel in the instance's own view and with the instance's permissions, so no symlink, `..` or
race can take an operation outside what the instance itself can reach. The rules applied here
(hidden paths, where writes may land) only shape the answers; they are not the boundary.

Boot: stdin starts with a line holding the byte length of this source, then the source. After
that stdin and stdout carry frames, one request at a time, each answered by exactly one reply:

    frame   = 4-byte big-endian N, N bytes of UTF-8 JSON header, then header["payload_bytes"]
              bytes of payload (absent: none)
    request = {"id": n, "op": "...", ...arguments}           (+ payload: data to write)
    reply   = {"id": n, "ok": true, ...result}               (+ payload: data read)
            | {"id": n, "ok": false, "code": "ENOENT" | "HIDDEN" | ..., "message": "...",
               "arg": "path" | "src" | "dst", ...details}

Codes: errno names (ENOENT, EACCES, EROFS, ENOSPC, EDQUOT, ENOTEMPTY ...) with strerror as the
message, or one of HIDDEN (a path the tools do not serve), OWN_DIR (an instance root such as
/home/user), NOT_REGULAR, TOO_LARGE (details size, max), UNWALKABLE (a directory holding hidden
paths), BAD_HANDLE, BAD_REQUEST, INTERNAL.

Ops: init, stat, read, write, mkdir, remove, rename, copy, list, tree, and for uploads streamed
in chunks: open, chunk, commit, abort (temp file in the target directory, fsync, rename).
Stdlib only.
"""

import contextlib
import errno
import json
import os
import secrets
import shutil
import stat
import sys
import traceback

# Largest file `write` with `append` reads back to rewrite it atomically.
MAX_APPEND_BASE = 64 * 1024 * 1024
# Largest reply header the server accepts (frames.ts MAX_HEADER_BYTES): a listing past it
# is answered TOO_LARGE instead.
MAX_HEADER_BYTES = 16 * 1024 * 1024
IO_CHUNK = 1024 * 1024


class Fail(Exception):
    """An answer with ok: false."""

    def __init__(self, code, message="", arg="path", **details):
        super().__init__(message or code)
        self.code = code
        self.message = message or code
        self.arg = arg
        self.details = details


class Policy:
    # Sandbox paths under which writes may land (None: no rule, the kernel decides alone).
    writable = None
    # Sandbox paths the tools refuse to touch (masked in the sandbox, /proc, /sys, /dev).
    hidden = ()


def under(path, root):
    return path == root or path.startswith(root if root.endswith("/") else root + "/")


def is_hidden(path):
    if not any(under(path, h) for h in Policy.hidden):
        return False
    # a hidden directory holding a writable one (/home holding /home/user) is shown
    return not any(under(path, w) or under(w, path) for w in Policy.writable or ())


def check_read(path, arg="path"):
    if is_hidden(path):
        raise Fail("HIDDEN", "outside what this instance can access", arg)


def check_write(path, arg="path"):
    check_read(path, arg)
    if Policy.writable is not None and not any(under(path, w) for w in Policy.writable):
        raise Fail("EROFS", os.strerror(errno.EROFS), arg)


def check_not_root(path, arg="path"):
    if any(under(w, path) for w in Policy.writable or ()):
        raise Fail("OWN_DIR", "one of the instance's own directories", arg)


def canonical(path, follow=True):
    """The path with every symlink resolved as the kernel resolves it here (`..` after links);
    with follow=False the last component is kept as it is (the object itself)."""
    if not isinstance(path, str) or "\0" in path:
        raise Fail("EINVAL", "Invalid path")
    path = path or "."
    if follow:
        return os.path.realpath(path)
    trimmed = path.rstrip("/") or "/"
    head, tail = os.path.split(trimmed)
    if tail in ("", ".", ".."):
        return os.path.realpath(trimmed)
    return os.path.join(os.path.realpath(head or "."), tail)


def code_of(err):
    return errno.errorcode.get(err.errno or 0, "EIO")


@contextlib.contextmanager
def about(arg):
    """OSErrors raised inside become answers about the argument `arg`."""
    try:
        yield
    except OSError as e:
        raise Fail(code_of(e), e.strerror or str(e), arg) from None


def kind(mode):
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISLNK(mode):
        return "link"
    return "other"


def read_fd(fd, limit):
    """Up to `limit` bytes from fd (until EOF)."""
    parts = []
    left = limit
    while left > 0:
        data = os.read(fd, min(IO_CHUNK, left))
        if not data:
            break
        parts.append(data)
        left -= len(data)
    return b"".join(parts)


def write_fd(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def read_regular(path, limit):
    """Contents of the regular file `path` (followed), refusing more than `limit` bytes. Opened
    non-blocking so that a FIFO planted there cannot hang the toolbox."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise Fail("EISDIR", os.strerror(errno.EISDIR))
        if not stat.S_ISREG(st.st_mode):
            raise Fail("NOT_REGULAR", "not a regular file")
        if st.st_size > limit:
            raise Fail("TOO_LARGE", "file too large", size=st.st_size, max=limit)
        data = read_fd(fd, limit + 1)
        if len(data) > limit:
            raise Fail("TOO_LARGE", "file too large", size=len(data), max=limit)
        return data
    finally:
        os.close(fd)


def unlink_quietly(name, dir_fd):
    try:
        os.unlink(name, dir_fd=dir_fd)
    except OSError:
        pass


def temp_in(dir_fd, name, mode):
    """A new temp file beside `name` (in the directory dir_fd): (temp name, fd)."""
    for _ in range(16):
        tmp = ".%s.%s.tmp" % (name[:200], secrets.token_hex(6))
        try:
            fd = os.open(
                tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600, dir_fd=dir_fd
            )
        except FileExistsError:
            continue
        try:
            os.fchmod(fd, mode)
        except OSError:
            os.close(fd)
            unlink_quietly(tmp, dir_fd)
            raise
        return tmp, fd
    raise Fail("EEXIST", "could not create a temp file")


def open_dir(path):
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def finish(dir_fd, tmp, fd, name):
    """fsync and close the temp file, rename it over `name`, fsync the directory. On failure the
    temp file is removed: nothing half-written is left."""
    try:
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        unlink_quietly(tmp, dir_fd)
        raise
    with contextlib.suppress(OSError):
        os.fsync(dir_fd)  # the file is in place; some file systems cannot sync a directory


def existing_mode(path):
    """(stat or None, mode for the replacement): an existing file keeps its mode."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None, 0o644
    if stat.S_ISDIR(st.st_mode):
        raise Fail("EISDIR", os.strerror(errno.EISDIR))
    return st, stat.S_IMODE(st.st_mode)


def atomic_write(path, parts, mode):
    parent, name = os.path.split(path)
    dir_fd = open_dir(parent)
    try:
        tmp, fd = temp_in(dir_fd, name, mode)
        try:
            for part in parts:
                write_fd(fd, part)
        except BaseException:
            os.close(fd)
            unlink_quietly(tmp, dir_fd)
            raise
        finish(dir_fd, tmp, fd, name)
    finally:
        os.close(dir_fd)


def copy_file(src, dst):
    """Atomic copy of the regular file src (followed) to dst, with src's mode."""
    fd_in = os.open(src, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        st = os.fstat(fd_in)
        if not stat.S_ISREG(st.st_mode):
            raise Fail("NOT_REGULAR", "not a regular file", "src")
        parent, name = os.path.split(dst)
        dir_fd = open_dir(parent)
        try:
            tmp, fd = temp_in(dir_fd, name, stat.S_IMODE(st.st_mode))
            try:
                while True:
                    data = os.read(fd_in, IO_CHUNK)
                    if not data:
                        break
                    write_fd(fd, data)
            except BaseException:
                os.close(fd)
                unlink_quietly(tmp, dir_fd)
                raise
            finish(dir_fd, tmp, fd, name)
        finally:
            os.close(dir_fd)
    finally:
        os.close(fd_in)


def copy_link(src, dst):
    """Put a copy of the symlink src at dst (replacing what is there)."""
    parent, name = os.path.split(dst)
    dir_fd = open_dir(parent)
    try:
        target = os.readlink(src)
        for _ in range(16):
            tmp = ".%s.%s.tmp" % (name[:200], secrets.token_hex(6))
            try:
                os.symlink(target, tmp, dir_fd=dir_fd)
                break
            except FileExistsError:
                continue
        else:
            raise Fail("EEXIST", "could not create a temp link")
        try:
            os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            unlink_quietly(tmp, dir_fd)
            raise
    finally:
        os.close(dir_fd)


def copy_tree(src, dst):
    try:
        shutil.copytree(src, dst, symlinks=True)
    except shutil.Error as e:
        first = e.args[0][0] if e.args and e.args[0] else ("", "", str(e))
        raise Fail("EIO", "could not copy everything: %s" % (first[2],), "src") from None


def check_walkable(path, arg):
    """A recursive walk of `path` must not enter hidden paths or an instance root."""
    inside = [r for r in list(Policy.hidden) + list(Policy.writable or ()) if r != path]
    if any(under(r, path) for r in inside):
        raise Fail("UNWALKABLE", "contains paths this instance cannot access", arg)


# -- operations --------------------------------------------------------------------------


def op_init(req, _payload):
    Policy.writable = req.get("writable")
    Policy.hidden = tuple(req.get("hidden") or ())
    if req.get("home"):
        os.chdir(req["home"])
    return {"pid": os.getpid(), "uid": os.getuid()}, None


def op_stat(req, _payload):
    follow = req.get("follow", True)
    path = canonical(req["path"], follow)
    check_read(path)
    with about("path"):
        try:
            st = os.stat(path) if follow else os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            return {"path": path, "type": None}, None
    return {
        "path": path,
        "type": kind(st.st_mode),
        "size": st.st_size,
        "mode": stat.S_IMODE(st.st_mode),
    }, None


def op_read(req, _payload):
    path = canonical(req["path"])
    check_read(path)
    with about("path"):
        data = read_regular(path, int(req["max"]))
    return {"path": path}, data


def op_write(req, payload):
    """Atomic write of the payload, parents created; `append` adds to an existing file's contents;
    `exclusive` refuses an existing path."""
    path = canonical(req["path"])
    check_write(path)
    appended = False
    with about("path"):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if req.get("exclusive") and os.path.lexists(path):
            raise Fail("EEXIST", os.strerror(errno.EEXIST))
        st, mode = existing_mode(path)
        parts = [payload]
        if req.get("append") and st is not None and stat.S_ISREG(st.st_mode):
            parts.insert(0, read_regular(path, MAX_APPEND_BASE))
            appended = True
        atomic_write(path, parts, mode)
    return {"path": path, "appended": appended}, None


def op_mkdir(req, _payload):
    path = canonical(req["path"])
    check_write(path)
    with about("path"):
        os.makedirs(path, exist_ok=True)
    return {"path": path}, None


def op_remove(req, _payload):
    path = canonical(req["path"], follow=False)
    check_write(path)
    check_not_root(path)
    with about("path"):
        st = os.lstat(path)
        if stat.S_ISDIR(st.st_mode):
            if req.get("recursive"):
                shutil.rmtree(path)
            else:
                os.rmdir(path)
        elif req.get("dir_only"):
            raise Fail("ENOTDIR", os.strerror(errno.ENOTDIR))
        else:
            os.unlink(path)
    return {"path": path}, None


def op_rename(req, _payload):
    """Move src (not followed) to dst (replacing a file there), parents of dst created; across
    file systems (home and /tmp) by copy and delete."""
    src = canonical(req["src"], follow=False)
    dst = canonical(req["dst"], follow=False)
    check_write(src, "src")
    check_not_root(src, "src")
    check_write(dst, "dst")
    with about("dst"):
        os.makedirs(os.path.dirname(dst), exist_ok=True)
    with about("src"):
        try:
            os.rename(src, dst)
            return {"src": src, "dst": dst}, None
        except OSError as e:
            if e.errno != errno.EXDEV:
                raise
        st = os.lstat(src)
        if stat.S_ISDIR(st.st_mode):
            copy_tree(src, dst)
            shutil.rmtree(src)
        else:
            if stat.S_ISLNK(st.st_mode):
                copy_link(src, dst)
            else:
                copy_file(src, dst)
            os.unlink(src)
    return {"src": src, "dst": dst}, None


def op_copy(req, _payload):
    """Copy src (followed) to dst: a file atomically, a directory recursively with its symlinks
    copied as links (dst must not exist)."""
    src = canonical(req["src"])
    dst = canonical(req["dst"], follow=False)
    check_read(src, "src")
    check_write(dst, "dst")
    with about("src"):
        st = os.stat(src)
    with about("dst"):
        os.makedirs(os.path.dirname(dst), exist_ok=True)
    if stat.S_ISDIR(st.st_mode):
        check_walkable(src, "src")
        with about("src"):
            copy_tree(src, dst)
    else:
        with about("src"):
            copy_file(src, dst)
    return {"src": src, "dst": dst}, None


def op_list(req, _payload):
    """Names in a directory, each with whether it is a directory (symlinks followed)."""
    path = canonical(req["path"])
    check_read(path)
    entries = []
    with about("path"):
        if not stat.S_ISDIR(os.stat(path).st_mode):
            raise Fail("ENOTDIR", os.strerror(errno.ENOTDIR))
        with os.scandir(path) as it:
            for entry in it:
                try:
                    is_dir = entry.is_dir()
                except OSError:
                    is_dir = False
                entries.append([entry.name, is_dir])
    return {"path": path, "entries": entries}, None


def op_tree(req, _payload):
    """`find <path> -maxdepth <depth> -not -path '*/.*'` as relative paths, entries sorted,
    symlinks not followed, hidden paths not entered."""
    path = canonical(req["path"])
    check_read(path)
    depth = int(req.get("depth", 2))
    out = []

    def walk(directory, rel, level):
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            if not rel:
                raise
            return  # unreadable below the top: listed, not entered
        for name in names:
            if name.startswith("."):
                continue
            child = os.path.join(directory, name)
            shown = rel + "/" + name if rel else name
            out.append(shown)
            if level >= depth or is_hidden(child):
                continue
            try:
                is_dir = stat.S_ISDIR(os.lstat(child).st_mode)
            except OSError:
                is_dir = False
            if is_dir:
                walk(child, shown, level + 1)

    with about("path"):
        if not stat.S_ISDIR(os.stat(path).st_mode):
            raise Fail("ENOTDIR", os.strerror(errno.ENOTDIR))
        walk(path, "", 1)
    return {"path": path, "entries": out}, None


class Upload:
    def __init__(self, dir_fd, fd, tmp, name, path):
        self.dir_fd, self.fd, self.tmp, self.name, self.path = dir_fd, fd, tmp, name, path

    def discard(self):
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None
        unlink_quietly(self.tmp, self.dir_fd)
        with contextlib.suppress(OSError):
            os.close(self.dir_fd)


uploads = {}
next_handle = [1]


def op_open(req, _payload):
    """Start an upload to `path`: a temp file beside it, filled by `chunk`, renamed by `commit`."""
    path = canonical(req["path"])
    check_write(path)
    with about("path"):
        parent, name = os.path.split(path)
        os.makedirs(parent, exist_ok=True)
        _, mode = existing_mode(path)
        dir_fd = open_dir(parent)
        try:
            tmp, fd = temp_in(dir_fd, name, mode)
        except BaseException:
            os.close(dir_fd)
            raise
    handle = next_handle[0]
    next_handle[0] += 1
    uploads[handle] = Upload(dir_fd, fd, tmp, name, path)
    return {"handle": handle, "path": path, "tmp": os.path.join(parent, tmp)}, None


def take_upload(req):
    upload = uploads.get(req.get("handle"))
    if upload is None:
        raise Fail("BAD_HANDLE", "no such upload (the toolbox may have restarted)")
    return upload


def op_chunk(req, payload):
    upload = take_upload(req)
    try:
        with about("path"):
            write_fd(upload.fd, payload)
    except BaseException:
        uploads.pop(req["handle"], None)
        upload.discard()
        raise
    return {}, None


def op_commit(req, _payload):
    upload = take_upload(req)
    del uploads[req["handle"]]
    fd, upload.fd = upload.fd, None
    try:
        with about("path"):
            finish(upload.dir_fd, upload.tmp, fd, upload.name)
    finally:
        with contextlib.suppress(OSError):
            os.close(upload.dir_fd)
    return {"path": upload.path}, None


def op_abort(req, _payload):
    upload = uploads.pop(req.get("handle"), None)
    if upload is not None:
        upload.discard()
    return {}, None


OPS = {
    "init": op_init,
    "stat": op_stat,
    "read": op_read,
    "write": op_write,
    "mkdir": op_mkdir,
    "remove": op_remove,
    "rename": op_rename,
    "copy": op_copy,
    "list": op_list,
    "tree": op_tree,
    "open": op_open,
    "chunk": op_chunk,
    "commit": op_commit,
    "abort": op_abort,
}


def read_exact(stream, n):
    data = stream.read(n) if n else b""
    if len(data) < n:
        raise EOFError
    return data


def send(out, header, payload):
    header["payload_bytes"] = len(payload) if payload else 0
    raw = json.dumps(header, ensure_ascii=True, separators=(",", ":")).encode("ascii")
    if len(raw) > MAX_HEADER_BYTES:
        header = {"id": header.get("id"), "ok": False, "code": "TOO_LARGE", "arg": "path",
                  "message": "the answer is too large", "size": len(raw),
                  "max": MAX_HEADER_BYTES, "payload_bytes": 0}
        raw = json.dumps(header, separators=(",", ":")).encode("ascii")
        payload = None
    out.write(len(raw).to_bytes(4, "big"))
    out.write(raw)
    if payload:
        out.write(payload)
    out.flush()


def handle(header, payload):
    op = OPS.get(header.get("op"))
    if op is None:
        raise Fail("BAD_REQUEST", "unknown op %r" % (header.get("op"),))
    try:
        return op(header, payload)
    except (KeyError, TypeError, ValueError) as e:
        raise Fail("BAD_REQUEST", "%s: %s" % (type(e).__name__, e)) from None


def main():
    stdin = sys.stdin.buffer
    # The protocol owns the original stdout; anything else that prints goes to stderr.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    while True:
        try:
            size = int.from_bytes(read_exact(stdin, 4), "big")
            header = json.loads(read_exact(stdin, size))
            payload = read_exact(stdin, int(header.get("payload_bytes") or 0))
        except EOFError:
            break
        reply, data = {"id": header.get("id"), "ok": True}, None
        try:
            result, data = handle(header, payload)
            reply.update(result)
        except Fail as f:
            reply.update(ok=False, code=f.code, message=f.message, arg=f.arg, **f.details)
        except OSError as e:
            reply.update(ok=False, code=code_of(e), message=e.strerror or str(e), arg="path")
        except Exception as e:  # noqa: BLE001
            traceback.print_exc(file=sys.stderr)
            reply.update(ok=False, code="INTERNAL", message="%s: %s" % (type(e).__name__, e))
        send(out, reply, data)


if __name__ == "__main__":
    main()
