"""burrow toolbox: the file operations of an instance, run inside its sandbox.

toolbox.ts starts this with /usr/bin/python3 -I inside the instance's sandbox, like any other
process of the instance: as its user, in its mount namespace. Every path is resolved by the
kernel in the instance's own view and with the instance's permissions, so no symlink, `..` or
race can take an operation outside what the instance itself can reach. The rules applied here
(hidden paths, where writes may land) only shape the answers; they are not the boundary.

Boot: stdin starts with the program's modules (toolbox_fs: refusals, path rules and the file
helpers; toolbox_ops: the operations; then this file), loaded by src/internal/python.ts's boot
program. After that stdin and stdout carry frames, one request at a time, each answered by
exactly one reply:

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

import json
import os
import sys
import traceback
from toolbox_fs import MAX_HEADER_BYTES, Fail, code_of
from toolbox_ops import OPS


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
