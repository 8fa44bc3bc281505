"""Exit statuses of the distrun command (documented in docs/cli.md).

``distrun launch`` otherwise exits with the job's status: the first failed rank's exit code,
or 128 + signal number when that rank was killed by a signal.
"""

from distrun.model.record import EXIT_STALLED

OK = 0
JOB_FAILED = 1
USAGE = 2
PREFLIGHT = 3
INTERNAL = 4
STALLED = EXIT_STALLED  # distrun stopped the job after a stall or a hang, like timeout(1)
SIGINT = 130
SIGPIPE = 141  # the reader of stdout left (a pipe into head), like a shell tool killed by SIGPIPE
SIGTERM = 143
