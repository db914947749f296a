"""`python -m tools.worker`: run one evaluation request (see tools.worker.entry)."""

import os
import sys

from tools.worker.entry import main

code = main()
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)  # skip the candidate's atexit hooks and stray non-daemon threads
