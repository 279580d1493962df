"""burrow kernel bridge.

Runs with Debian's /usr/bin/python3 inside an instance's sandbox and drives Jupyter kernels
through jupyter_client for the Node side. Protocol: one JSON object per line on stdin
(requests) and on the original stdout (replies):

  request  {"id": n, "op": "...", ...}
  reply    {"id": n, "ok": true, "result": ...} | {"id": n, "ok": false, "error": {"code", "message"}}

Ops: specs; execute {kernel, name, code, timeout, grace, env, cwd}; shutdown {kernel}; exit.
"env" is the complete environment a kernel started now gets; a running IPython kernel gets the
difference from what it last received applied to os.environ (silently) before the code runs.
Each kernel key has one worker thread: its KernelManager and client are only touched there,
and kernels are spawned from it (PR_SET_PDEATHSIG follows the spawning thread, which lives as
long as its kernel). Requests for different kernels run concurrently.
"""

import json
import os
import queue
import signal
import sys
import threading
import time
import traceback

# bridge_reply comes first: it takes the original stdout for the protocol before any library
# or kernel can print there.
from bridge_reply import send
from bridge_outputs import Outputs, plain_error
from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
from jupyter_client.manager import KernelManager

SETPRIV = next((p for p in ("/usr/bin/setpriv", "/bin/setpriv") if os.access(p, os.X_OK)), None)
# Seconds a kernel gets to go idle after an interrupt before it is restarted (default).
INTERRUPT_GRACE = 5.0
STARTUP_TIMEOUT = 60.0


class BridgeError(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


class DeathSignalKernelManager(KernelManager):
    """Starts the kernel under setpriv --pdeathsig SIGKILL: it dies with the bridge."""

    def format_kernel_cmd(self, extra_arguments=None):
        cmd = super().format_kernel_cmd(extra_arguments)
        return [SETPRIV, "--pdeathsig", "SIGKILL", "--", *cmd] if SETPRIV else cmd


def _is_ipykernel(spec):
    return any("ipykernel" in arg for arg in spec.argv)


def _zombie(pid):
    """A killed multi-threaded process is a zombie before waitpid() can report it (is_alive()
    still says running until every thread has exited): count it as dead already."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return False


class Kernel:
    def __init__(self, key, name):
        self.key = key
        self.name = name
        self.km = None
        self.kc = None
        self.ipython = False
        self.applied = {}
        self.last_start = ({}, None)
        self.ever_started = False
        self.closed = False
        self.cancel = threading.Event()
        self.queue = queue.Queue()
        self.thread = threading.Thread(target=self._run, name="kernel-" + key, daemon=True)
        self.thread.start()

    # -- worker ---------------------------------------------------------------------------

    def _run(self):
        while True:
            req = self.queue.get()
            if req["op"] == "shutdown":
                self._stop_kernel()
                self.closed = True
                send({"id": req["id"], "ok": True, "result": {}})
                while True:  # answer whatever was queued behind the shutdown
                    try:
                        late = self.queue.get_nowait()
                    except queue.Empty:
                        return
                    reply_error(late["id"], "shut_down", "the kernel was shut down")
            if self.cancel.is_set():
                reply_error(req["id"], "shut_down", "the kernel was shut down")
                continue
            try:
                result = self._warm(req) if req["op"] == "warm" else self._execute(req)
                send({"id": req["id"], "ok": True, "result": result})
            except BridgeError as e:
                reply_error(req["id"], e.code, str(e))
            except Exception as e:  # noqa: BLE001
                traceback.print_exc(file=sys.stderr)
                reply_error(req["id"], "internal", "%s: %s" % (type(e).__name__, e))

    def _alive(self):
        try:
            if self.km is None or not self.km.is_alive():
                return False
            return not _zombie(self.km.provisioner.process.pid)
        except Exception:  # noqa: BLE001
            return False

    def _start(self, env, cwd):
        self.last_start = (env, cwd)
        km = DeathSignalKernelManager(kernel_name=self.name)
        try:
            # Plain-text tracebacks (agents read them; notebooks stay readable everywhere).
            ipykernel = _is_ipykernel(km.kernel_spec)
            extra = ["--InteractiveShell.colors=NoColor"] if ipykernel else []
            km.start_kernel(env=env, cwd=cwd or None, extra_arguments=extra)
        except NoSuchKernel:
            raise BridgeError("no_such_kernel", "no such kernel: %r" % self.name)
        except Exception as e:  # noqa: BLE001
            raise BridgeError("start_failed", "kernel %r did not start: %s" % (self.name, e))
        self.km, self.kc = km, km.client()
        try:
            self.kc.start_channels()
            self.kc.wait_for_ready(timeout=STARTUP_TIMEOUT)
            info = self.kc.kernel_info(reply=True, timeout=STARTUP_TIMEOUT)["content"]
        except Exception as e:  # noqa: BLE001
            self._stop_kernel()
            raise BridgeError("start_failed", "kernel %r did not start: %s" % (self.name, e))
        self.applied = dict(env)
        self.ever_started = True
        self.ipython = info.get("implementation") == "ipython"

    def _stop_kernel(self):
        kc, km = self.kc, self.km
        self.kc = self.km = None
        if kc is not None:
            try:
                kc.stop_channels()
            except Exception:  # noqa: BLE001
                pass
        if km is not None:
            try:
                km.shutdown_kernel(now=True)
            except Exception:  # noqa: BLE001
                try:
                    km.cleanup_resources()
                except Exception:  # noqa: BLE001
                    pass

    def _silent(self, code):
        try:
            self.kc.execute(
                code, silent=True, store_history=False, allow_stdin=False, reply=True, timeout=10
            )
        except Exception as e:  # noqa: BLE001
            print("burrow bridge: silent execute failed: %s" % e, file=sys.stderr)

    def _sync_env(self, env):
        """Env set or deleted on the instance since the kernel started reaches os.environ."""
        if not self.ipython:
            return
        changed = {k: v for k, v in env.items() if self.applied.get(k) != v}
        removed = [k for k in self.applied if k not in env]
        if not changed and not removed:
            return
        self._silent(
            "(lambda o: (o.environ.update(%s), [o.environ.pop(k, None) for k in %s]))"
            "(__import__('os'))" % (json.dumps(changed), json.dumps(removed))
        )
        self.applied = dict(env)

    def _warm(self, req):
        """Start the kernel ahead of its first execution (a warm-pool instance)."""
        env, cwd = req.get("env") or dict(os.environ), req.get("cwd")
        self.last_start = (env, cwd)
        if not self._alive():
            self._stop_kernel()
            self._start(env, cwd)
        return {}

    def _execute(self, req):
        env, cwd = req.get("env") or dict(os.environ), req.get("cwd")
        self.last_start = (env, cwd)  # what a restart after this call uses
        restarted = None
        if not self._alive():
            if self.km is not None or self.ever_started:
                restarted = "died"
            self._stop_kernel()
            self._start(env, cwd)
        else:
            self._sync_env(env)
        grace = float(req.get("grace") or INTERRUPT_GRACE)
        result = self._run_code(req["code"], float(req.get("timeout") or 300), grace)
        if restarted and not result.get("restarted"):
            result["restarted"] = restarted
        return result

    def _run_code(self, code, timeout, grace):
        kc = self.kc
        while True:  # drop iopub leftovers (silent executes, earlier timeouts)
            try:
                kc.get_iopub_msg(timeout=0)
            except queue.Empty:
                break
        # stop_on_error=False: after an error ipykernel would otherwise abort requests that arrive
        # within its abort window, and under load that can be our next, separate call. Calls on a
        # kernel are serialized here, and notebooks stop after a failing cell on the Node side.
        msg_id = kc.execute(code, store_history=True, allow_stdin=False, stop_on_error=False)
        out = Outputs()
        deadline = time.monotonic() + timeout
        interrupted_at = None
        state = "running"  # -> idle | died | stuck | cancelled
        while state == "running":
            now = time.monotonic()
            if self.cancel.is_set():
                state = "cancelled"
                break
            if interrupted_at is None and now >= deadline:
                interrupted_at = now
                try:
                    self.km.interrupt_kernel()
                except Exception as e:  # noqa: BLE001
                    print("burrow bridge: interrupt failed: %s" % e, file=sys.stderr)
            if interrupted_at is not None and now >= interrupted_at + grace:
                state = "stuck"
                break
            limit = deadline if interrupted_at is None else interrupted_at + grace
            try:
                msg = kc.get_iopub_msg(timeout=max(0.01, min(0.5, limit - now)))
            except queue.Empty:
                if not self._alive():
                    state = "died"
                continue
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            msg_type, content = msg["msg_type"], msg["content"]
            if msg_type == "status":
                if content.get("execution_state") == "idle":
                    state = "idle"
            else:
                out.handle(msg_type, content)

        reply = None
        if state == "idle":
            reply = self._shell_reply(msg_id)
        execution_count = out.execution_count
        if reply is not None and reply.get("execution_count") is not None:
            execution_count = reply["execution_count"]

        result = {
            "execution_count": execution_count,
            "outputs": out.items,
            "stdout": out.stream_text("stdout"),
            "stderr": out.stream_text("stderr"),
            "error": plain_error(out.error) if out.error else None,
        }
        if interrupted_at is not None:
            result["status"] = "timeout"
            if result["error"] is None:
                result["error"] = {
                    "ename": "TimeoutError",
                    "evalue": "execution exceeded %g s; the kernel was interrupted" % timeout,
                    "traceback": [],
                }
            if state == "stuck":
                # It ignored SIGINT: replace it now so that the next call finds a usable kernel.
                self._stop_kernel()
                result["restarted"] = "unresponsive"
                try:
                    self._start(*self.last_start)
                except BridgeError as e:
                    print("burrow bridge: restart failed: %s" % e, file=sys.stderr)
        elif state == "idle":
            status = (reply or {}).get("status", "error" if out.error else "ok")
            result["status"] = "ok" if status == "ok" else "error"
            if result["status"] == "error" and result["error"] is None:
                result["error"] = {
                    "ename": "ExecutionAborted" if status == "aborted" else "ExecutionError",
                    "evalue": "the kernel answered %r" % status,
                    "traceback": [],
                }
        elif state == "died":
            result["status"] = "error"
            result["error"] = {
                "ename": "DeadKernelError",
                "evalue": "the kernel died during execution; it is restarted on the next call",
                "traceback": [],
            }
        elif state == "cancelled":
            result["status"] = "error"
            result["error"] = {
                "ename": "KernelShutdown",
                "evalue": "the kernel was shut down during execution",
                "traceback": [],
            }
        return result

    def _shell_reply(self, msg_id):
        end = time.monotonic() + 5
        while time.monotonic() < end:
            try:
                msg = self.kc.get_shell_msg(timeout=max(0.01, end - time.monotonic()))
            except queue.Empty:
                return None
            if msg.get("parent_header", {}).get("msg_id") == msg_id:
                return msg["content"]
        return None


def reply_error(req_id, code, message):
    send({"id": req_id, "ok": False, "error": {"code": code, "message": message}})


def kernel_specs():
    specs = KernelSpecManager().get_all_specs()
    out = []
    for name, entry in sorted(specs.items()):
        spec = entry.get("spec", {})
        out.append(
            {
                "name": name,
                "display_name": spec.get("display_name") or name,
                "language": spec.get("language") or "",
            }
        )
    return out


def main():
    kernels = {}

    def shutdown_all():
        for k in list(kernels.values()):
            k.cancel.set()
            k.queue.put({"id": None, "op": "shutdown"})
        for k in list(kernels.values()):
            k.thread.join(timeout=10)

    signal.signal(signal.SIGTERM, lambda *_: (shutdown_all(), os._exit(0)))
    send({"id": 0, "ok": True, "result": {"ready": True, "setpriv": SETPRIV is not None}})
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            req = json.loads(line)
            req_id, op = req["id"], req["op"]
        except Exception as e:  # noqa: BLE001
            print("burrow bridge: bad request %r: %s" % (line[:200], e), file=sys.stderr)
            continue
        try:
            if op == "specs":
                send({"id": req_id, "ok": True, "result": kernel_specs()})
            elif op in ("execute", "warm"):
                key = req["kernel"]
                k = kernels.get(key)
                if k is None or k.closed or k.cancel.is_set():
                    k = kernels[key] = Kernel(key, req["name"])
                k.queue.put(req)
            elif op == "shutdown":
                k = kernels.pop(req["kernel"], None)
                if k is None:
                    send({"id": req_id, "ok": True, "result": {}})
                else:
                    k.cancel.set()
                    k.queue.put(req)
            elif op == "exit":
                break
            else:
                reply_error(req_id, "bad_request", "unknown op %r" % op)
        except Exception as e:  # noqa: BLE001
            reply_error(req_id, "bad_request", "%s: %s" % (type(e).__name__, e))
    shutdown_all()
    os._exit(0)


main()
