"""`python -m tools.worker`: run one evaluation request (see tools.worker.entry)."""

from tools.worker.entry import main
from tools.worker.timing_window import exit_process

# os._exit: skip the candidate's atexit hooks and stray non-daemon threads; through the window: the
# device memory it returns must not land in another process's timing
exit_process(main())
