"""burrow kernel bridge: the protocol's side of stdout. Loaded first (as the module
`bridge_reply`), it takes the original stdout for replies and points fd 1 at stderr before any
library or kernel can print there; `send` writes one reply line, trimmed to what the server
accepts (pool.ts MAX_LINE_BYTES)."""

import json
import os
import threading

# The protocol owns the original stdout; anything else that prints (libraries, kernels, which
# inherit fd 1) goes to stderr.
PROTO = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
os.dup2(2, 1)

# Longest reply line the server accepts (pool.ts MAX_LINE_BYTES); a longer result is trimmed.
MAX_LINE_BYTES = 8 * 1024 * 1024
# Objects and arrays one reply may hold (reply-decode.ts MAX_REPLY_CONTAINERS, counted the same
# way: every "{" and "[", strings included); past it outputs are dropped as past MAX_LINE_BYTES.
MAX_CONTAINERS = 1_000_000
TRIMMED = "\n[burrow: output too large for one reply; the rest was dropped]\n"

_send_lock = threading.Lock()


def _clean(value):
    """JSON-safe copy: NaN/Infinity (which JSON.parse rejects) become null."""
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def _dumps(obj):
    try:
        return json.dumps(obj, ensure_ascii=False, allow_nan=False, default=str)
    except ValueError:
        return json.dumps(_clean(obj), ensure_ascii=False, allow_nan=False, default=str)


def _containers(text):
    return text.count("{") + text.count("[")


def _fits(line):
    if _containers(line) > MAX_CONTAINERS:
        return False
    return len(line) <= MAX_LINE_BYTES // 4 or len(line.encode("utf-8")) <= MAX_LINE_BYTES


def _trimmed(obj):
    """A reply too long for one line (or of too many objects and arrays): an execution's outputs are kept while they fit in half the
    line, its streams are cut short; anything else, or what still does not fit, is an error."""
    result = obj.get("result")
    if obj.get("ok") and isinstance(result, dict) and isinstance(result.get("outputs"), list):
        result = dict(result)
        budget, containers, kept = MAX_LINE_BYTES // 2, MAX_CONTAINERS // 2, []
        for out in result["outputs"]:
            text = _dumps(out)
            budget -= len(text.encode("utf-8"))
            containers -= _containers(text)
            if budget < 0 or containers < 0:
                kept.append({"output_type": "stream", "name": "stderr", "text": TRIMMED})
                break
            kept.append(out)
        result["outputs"] = kept
        # each character is at most 6 bytes of JSON: both streams fit in the other half
        chars = MAX_LINE_BYTES // 24
        for name in ("stdout", "stderr"):
            text = result.get(name)
            if isinstance(text, str) and len(text) > chars:
                result[name] = text[:chars] + TRIMMED
        line = _dumps({**obj, "result": result})
        if _fits(line):
            return line
    return _dumps(
        {
            "id": obj.get("id"),
            "ok": False,
            "error": {"code": "too_large", "message": "the reply is too large to send"},
        }
    )


def send(obj):
    line = _dumps(obj)
    if not _fits(line):
        line = _trimmed(obj)
    with _send_lock:
        PROTO.write(line + "\n")
        PROTO.flush()
