"""Run a function in a child process, so that a kernel that faults takes only the child down.

A kernel that writes through a wild address kills the process it runs in on a CPU (PoCL runs
kernels in the process's own threads: a segmentation fault), and on an NVIDIA GPU leaves the
process's OpenCL unusable (every later context fails). A learner's kernel therefore runs here,
in a fresh Python process: whatever it does, the notebook's session and its contexts go on.

    value = in_child(check_here, gap_name, code, selector, timeout=600)

``function`` must be importable by its module and name (a module-level function) and its
arguments and result picklable. What it prints is printed by the caller as it returns. If the
child dies (a signal, an exit) or runs past ``timeout`` seconds, ChildDied says how, with the
last lines the child wrote to stderr. An exception raised in the child is raised again here
(its type and message; the child's traceback is in the message's last lines).
"""
from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]     # the course: helpers/ importable from here


class ChildDied(RuntimeError):
    """The child process stopped before returning: ``how`` says by which signal or exit code."""

    def __init__(self, how: str, stderr: str = "", timed_out: bool = False):
        self.how, self.stderr, self.timed_out = how, stderr, timed_out
        super().__init__(how + (f"; its last words: {stderr}" if stderr else ""))


def _how(code: int) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        meaning = {"SIGSEGV": "a memory access outside what the process owns",
                   "SIGBUS": "a misaligned or invalid memory access",
                   "SIGABRT": "the driver or runtime aborted", "SIGKILL": "killed (out of memory?)"}.get(name, "")
        return f"was killed by {name}" + (f" ({meaning})" if meaning else "")
    return f"exited with code {code} before returning"


def in_child(function, *args, timeout: float | None = None, **kwargs):
    """``function(*args, **kwargs)`` run in a fresh Python process; its value, or its exception."""
    with tempfile.TemporaryDirectory(prefix="course-child-") as tmp:
        call, out = Path(tmp) / "call.pickle", Path(tmp) / "result.pickle"
        call.write_bytes(pickle.dumps((function.__module__, function.__qualname__, args, kwargs, str(out))))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
        try:
            done = subprocess.run([sys.executable, "-m", "helpers.engine.child", str(call)], env=env,
                                  cwd=str(ROOT), capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as err:
            tail = (err.stderr or b"")[-600:]
            raise ChildDied(f"did not finish within {timeout:g} s and was stopped",
                            tail.decode(errors="replace") if isinstance(tail, bytes) else tail, True) from None
        if done.stdout:
            print(done.stdout, end="")
        if not out.exists():
            raise ChildDied(_how(done.returncode), "\n".join(done.stderr.strip().splitlines()[-5:]))
        status, value = pickle.loads(out.read_bytes())
    if status == "raised":
        raise value
    return value


def _main(call: str) -> None:
    import importlib
    module, name, args, kwargs, out = pickle.loads(Path(call).read_bytes())
    function = importlib.import_module(module)
    for part in name.split("."):
        function = getattr(function, part)
    try:
        result = ("returned", function(*args, **kwargs))
    except Exception as err:                   # handed back to the caller as its own exception
        try:
            pickle.dumps(err)
            result = ("raised", err)
        except Exception:
            result = ("raised", RuntimeError(f"{type(err).__name__}: {err}"))
    sys.stdout.flush()
    Path(out).write_bytes(pickle.dumps(result))


if __name__ == "__main__":
    _main(sys.argv[1])
