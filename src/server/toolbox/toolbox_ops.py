"""burrow toolbox: the operations, one function each (`OPS` maps their names), and the
uploads streamed in chunks. Loaded as the module `toolbox_ops`; every path rule lives in
toolbox_fs."""

import contextlib
import errno
import heapq
import json
import os
import shutil
import stat
from toolbox_fs import (
    MAX_APPEND_BASE,
    Fail,
    Policy,
    about,
    atomic_write,
    canonical,
    check_not_root,
    check_read,
    check_walkable,
    check_write,
    copy_file,
    copy_link,
    copy_tree,
    existing_mode,
    finish,
    is_hidden,
    kind,
    open_dir,
    read_regular,
    temp_in,
    unlink_quietly,
    write_fd,
)

# Entries a listing (list, tree) answers at most unless asked for fewer: the server decodes the
# answer on its main thread, so the walk, the sort and the cut happen here, at the instance's cost.
MAX_LIST_ENTRIES = 10000
# Bytes of JSON the names of one listing take at most (well under MAX_HEADER_BYTES).
MAX_LIST_BYTES = 1024 * 1024
# Characters of text searched for newlines at a time (one native count, then finds in that part).
TEXT_STEP = 65536

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


def within(limit, entries, size_of):
    """The first entries of a sorted listing, at most `limit` and MAX_LIST_BYTES of names."""
    kept, size = [], 0
    for entry in entries:
        size += size_of(entry) + 1
        if len(kept) >= limit or size > MAX_LIST_BYTES:
            break
        kept.append(entry)
    return kept


def op_list(req, _payload):
    """Names in a directory, each with whether it is a directory (symlinks followed): the first
    `limit` (MAX_LIST_ENTRIES at most) in the order shown (name, `/` after a directory's), and
    how many there are in all (`total`)."""
    path = canonical(req["path"])
    check_read(path)
    limit = min(int(req.get("limit") or MAX_LIST_ENTRIES), MAX_LIST_ENTRIES)
    total = [0]

    def shown(it):
        for entry in it:
            total[0] += 1
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            yield (entry.name + "/" if is_dir else entry.name, entry.name, is_dir)

    with about("path"):
        if not stat.S_ISDIR(os.stat(path).st_mode):
            raise Fail("ENOTDIR", os.strerror(errno.ENOTDIR))
        with os.scandir(path) as it:
            first = heapq.nsmallest(limit, shown(it))
    kept = within(limit, first, lambda e: len(json.dumps(e[1])) + 6)
    return {"path": path, "entries": [[n, d] for _, n, d in kept], "total": total[0]}, None


def op_tree(req, _payload):
    """`find <path> -maxdepth <depth> -not -path '*/.*'` as relative paths, entries sorted,
    symlinks not followed, hidden paths not entered: the first `limit` (MAX_LIST_ENTRIES at
    most), and how many there are in all (`total`)."""
    path = canonical(req["path"])
    check_read(path)
    depth = int(req.get("depth", 2))
    limit = min(int(req.get("limit") or MAX_LIST_ENTRIES), MAX_LIST_ENTRIES)
    out = []
    state = {"total": 0, "size": 0}

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
            state["total"] += 1
            if len(out) < limit and state["size"] <= MAX_LIST_BYTES:
                state["size"] += len(json.dumps(shown)) + 1
                if state["size"] <= MAX_LIST_BYTES:
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
    return {"path": path, "entries": out, "total": state["total"]}, None


def decode_text(data, encoding, strict):
    """The file's text as the server decoded it (Buffer.toString), or INVALID_UTF8 when
    `strict` and it is not UTF-8 (the text tools do not edit what they would corrupt)."""
    if strict:
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise Fail("INVALID_UTF8", "invalid UTF-8 data") from None
    if encoding == "latin1":
        return data.decode("latin-1")
    if encoding == "ascii":  # node keeps the low 7 bits of each byte
        return data.translate(bytes(range(128)) * 2).decode("ascii")
    if encoding == "utf16le":  # node drops an odd last byte
        return data[: len(data) - len(data) % 2].decode("utf-16-le", "replace")
    return data.decode("utf-8", "replace")


def after_newlines(text, n, start):
    """Index just past the n-th newline at or after `start` (n >= 1), or -1: counted a step at
    a time, so that a text of newlines costs native counts, not one find each."""
    pos = start
    while pos < len(text):
        end = min(len(text), pos + TEXT_STEP)
        found = text.count("\n", pos, end)
        if found >= n:
            for _ in range(n):
                pos = text.index("\n", pos) + 1
            return pos
        n -= found
        pos = end
    return -1


def op_lines(req, _payload):
    """Lines `first`..`last` of a text file (1-based; `last` -1: to the end), cut here so that the
    server holds only what it shows: at most `max_lines` of them and `max_bytes` bytes (UTF-8).
    `phantom`: a final newline ends an empty last line (the editor's count) rather than the last
    line (the file tool's); `number`: each line shown `%6d\t%s` from its number; `strict`:
    refuse text that is not UTF-8, else decode as `encoding`. Answers the file's count of lines
    (`lines`), the lines sent (`sent`) and whether the range was cut short (`cut`)."""
    path = canonical(req["path"])
    check_read(path)
    with about("path"):
        data = read_regular(path, int(req["max"]))
    text = decode_text(data, req.get("encoding") or "utf8", bool(req.get("strict")))
    del data
    if not req.get("phantom") and text.endswith("\n"):
        text = text[:-1]
        total = text.count("\n") + 1
    else:
        total = text.count("\n") + 1 if text or req.get("phantom") else 0
    first = max(1, int(req.get("first") or 1))
    last = int(req.get("last") or -1)
    last = total if last == -1 or last > total else last
    wanted = max(0, last - first + 1)
    take = min(wanted, max(0, int(req["max_lines"])))
    start = 0 if first == 1 else after_newlines(text, first - 1, 0)
    if take == 0 or start < 0:
        return {"path": path, "lines": total, "sent": 0, "cut": wanted > 0}, None
    end = after_newlines(text, take, start)
    part = text[start : (end - 1 if end >= 0 else len(text))]
    max_bytes = int(req["max_bytes"])
    if not req.get("number"):
        raw = part.encode("utf-8", "replace")
        cut = take < wanted or len(raw) > max_bytes
        raw = raw[:max_bytes].decode("utf-8", "ignore").encode("utf-8")
        return {"path": path, "lines": total, "sent": take, "cut": cut}, raw
    shown, size = [], 0
    for i, line in enumerate(part.split("\n"), first):
        row = ("%6d\t%s" % (i, line)).encode("utf-8", "replace")
        size += len(row) + 1
        if size > max_bytes + 1:
            break
        shown.append(row)
    sent = len(shown)
    cut = sent < wanted
    return {"path": path, "lines": total, "sent": sent, "cut": cut}, b"\n".join(shown)


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
    "lines": op_lines,
    "open": op_open,
    "chunk": op_chunk,
    "commit": op_commit,
    "abort": op_abort,
}
