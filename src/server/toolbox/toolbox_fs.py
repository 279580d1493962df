"""burrow toolbox: what every file operation shares: the answer for a refusal (Fail), the
rules that shape answers (Policy: hidden paths, where writes may land), paths resolved as the
kernel resolves them here, bounded reads and writes, atomic replacement and copies.

Loaded by toolbox.py's boot as the module `toolbox_fs` (see toolbox.py's docstring).
"""

import contextlib
import errno
import os
import secrets
import shutil
import stat

# Largest file `write` with `append` reads back to rewrite it atomically.
MAX_APPEND_BASE = 64 * 1024 * 1024
# Largest reply header the server accepts (frames.ts MAX_HEADER_BYTES): a listing past it
# is answered TOO_LARGE instead (list and tree stop well before it, at MAX_LIST_BYTES).
MAX_HEADER_BYTES = 2 * 1024 * 1024
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
