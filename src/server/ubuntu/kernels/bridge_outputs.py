"""burrow kernel bridge: an execution's outputs as nbformat v4 builds them from iopub
messages (`Outputs`), and errors without terminal colours. Loaded as `bridge_outputs`."""

import re

# Characters of stream text kept per stream name; the rest is dropped with a notice.
MAX_STREAM = 4 * 1024 * 1024
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class Outputs:
    """nbformat v4 outputs built from iopub messages, as a notebook frontend would."""

    def __init__(self):
        self.items = []
        self.streams = {"stdout": [], "stderr": []}
        self.sizes = {"stdout": 0, "stderr": 0}
        self.clear_on_next = False
        self.display = {}  # display_id -> [output dicts]
        self.error = None
        self.execution_count = None

    def _add(self, out):
        if self.clear_on_next:
            self._clear()
        last = self.items[-1] if self.items else None
        if (
            out["output_type"] == "stream"
            and last is not None
            and last["output_type"] == "stream"
            and last["name"] == out["name"]
        ):
            last["text"] += out["text"]
            return
        self.items.append(out)

    def _clear(self):
        self.items = []
        self.display = {}
        self.clear_on_next = False

    def stream_text(self, name):
        return "".join(self.streams.get(name, []))

    def handle(self, msg_type, content):
        if msg_type == "stream":
            name = content.get("name", "stdout")
            text = content.get("text", "")
            size = self.sizes.get(name, 0)
            if size >= MAX_STREAM:
                return
            if size + len(text) > MAX_STREAM:
                text = text[: MAX_STREAM - size] + "\n[burrow: output truncated]\n"
            self.sizes[name] = size + len(text)
            self.streams.setdefault(name, []).append(text)
            self._add({"output_type": "stream", "name": name, "text": text})
        elif msg_type in ("display_data", "execute_result"):
            out = {
                "output_type": msg_type,
                "data": content.get("data", {}),
                "metadata": content.get("metadata", {}),
            }
            if msg_type == "execute_result":
                out["execution_count"] = content.get("execution_count")
            self._add(out)
            display_id = (content.get("transient") or {}).get("display_id")
            if display_id:
                self.display.setdefault(display_id, []).append(out)
        elif msg_type == "update_display_data":
            display_id = (content.get("transient") or {}).get("display_id")
            for out in self.display.get(display_id, []):
                out["data"] = content.get("data", {})
                out["metadata"] = content.get("metadata", {})
        elif msg_type == "clear_output":
            if content.get("wait"):
                self.clear_on_next = True
            else:
                self._clear()
        elif msg_type == "error":
            self.error = {
                "ename": content.get("ename", ""),
                "evalue": content.get("evalue", ""),
                "traceback": list(content.get("traceback", [])),
            }
            self._add({"output_type": "error", **self.error})
        elif msg_type == "execute_input":
            self.execution_count = content.get("execution_count")


def plain_error(error):
    return {
        "ename": error["ename"],
        "evalue": error["evalue"],
        "traceback": [ANSI.sub("", line) for line in error["traceback"]],
    }
