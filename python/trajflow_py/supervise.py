"""
Runs a server that knows nothing of trajflow (vLLM) so that it stops with whoever started it:

    python -m trajflow_py.supervise -- COMMAND [ARGS...]

COMMAND runs in a process group of its own (vLLM starts engine and worker processes beside its
API server). SIGTERM or SIGINT to this process, or the death of the process named by
TRAJFLOW_PARENT_PID (checked every 2 s, so a SIGKILLed parent is noticed too), sends SIGTERM to
the whole group, then SIGKILL after a grace period; should this supervisor itself be SIGKILLed,
the kernel sends COMMAND SIGTERM. Exits with COMMAND's exit status.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time

PARENT_PID_ENV = "TRAJFLOW_PARENT_PID"
CHECK_INTERVAL_S = 2.0
STOP_GRACE_S = 15.0


def parent_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop_group(child: subprocess.Popen) -> None:
    for sig, wait_s in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(child.pid, sig)
        except ProcessLookupError:
            return
        try:
            child.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def die_with_supervisor() -> None:
    """In the child before exec: the kernel sends it SIGTERM if this supervisor dies, even SIGKILLed."""
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def main(argv: list[str]) -> int:
    if not argv or argv[0] != "--" or len(argv) < 2:
        print("usage: python -m trajflow_py.supervise -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    parent = int(os.environ.pop(PARENT_PID_ENV, "0") or 0)
    child = subprocess.Popen(argv[1:], start_new_session=True, preexec_fn=die_with_supervisor)
    stopping = False

    def on_signal(_signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    while child.poll() is None:
        if stopping or (parent and not parent_alive(parent)):
            stop_group(child)
            break
        time.sleep(CHECK_INTERVAL_S if not stopping else 0.1)
    code = child.wait()
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
