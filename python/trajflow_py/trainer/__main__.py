"""`python -m trajflow_py.trainer --settings FILE`: see worker.py."""

import sys

from .worker import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
