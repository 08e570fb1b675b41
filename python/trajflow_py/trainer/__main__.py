"""`python -m trajflow_py.trainer --settings FILE`: see worker.py."""

import os
import sys

from .worker import main

if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    # Ends the process without the interpreter's finalization: the Temporal SDK core's native
    # threads outlive the worker, and one calling into Python while the interpreter tears down
    # aborts the process (SIGABRT, seen once in CI after a clean stop). Nothing is left to clean
    # up here: checkpoints and records are fsynced by the step that wrote them.
    os._exit(code)
