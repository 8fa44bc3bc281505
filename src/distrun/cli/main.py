"""``distrun COMMAND ...``: dispatch to one module per subcommand."""

from __future__ import annotations

import importlib
import os
import sys

from distrun.cli import exitcodes
from distrun.errors import DistrunError, UsageError

COMMANDS: dict[str, str] = {
    "doctor": "what is here: accelerators, cluster environment, software, network; what is wrong",
    "plan": "the exact per-node commands, rank layout and visible devices, checked",
    "launch": "preflight, then the job through torchrun, with a run directory",
    "demo": "a real small training run on whatever is here",
    "diagnose": "the root cause of a failed job, from its run directory or logs",
    "export": "launch files for slurm, accelerate, deepspeed, k8s or shell, from one plan",
    "monitor": "a live view of a job: ranks, devices, progress, stalls (--json, --metrics-port)",
    "report": "an HTML report of a run: loss, throughput, device use, events",
    "estimate": "memory per device before launch: model states, and whether they fit",
}

USAGE_TEXT = "usage: distrun COMMAND [ARGS...]\n\ncommands:\n" + "\n".join(
    f"  {name:<10} {text}" for name, text in COMMANDS.items()
)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(USAGE_TEXT)
        return exitcodes.OK if args else exitcodes.USAGE
    if args[0] == "--version":
        from distrun import __version__

        print(f"distrun {__version__}")
        return exitcodes.OK
    command = args[0]
    if command not in COMMANDS:
        return fail(UsageError(f"unknown command {command!r}",
                               f"one of {', '.join(COMMANDS)}", "run 'distrun --help'"), command)
    return run(command, args[1:])


def run(command: str, args: list[str]) -> int:
    """One subcommand; its errors as one line and their exit status, never a traceback."""
    module = importlib.import_module(f"distrun.cli.{command}")
    try:
        code: int = module.main(args)
    except UsageError as err:
        return fail(err, command)
    except DistrunError as err:
        print(f"distrun {command}: error: {err.one_line()}", file=sys.stderr)
        return exitcodes.JOB_FAILED
    except BrokenPipeError:
        raise  # the reader left: entry() ends quietly with its status
    except OSError as err:  # a path the command could not use: a line, never a traceback
        return fail(path_error(err), command)
    return code


def path_error(err: OSError) -> UsageError:
    """An operating-system error as what was seen and the fix (an error without a file name,
    such as a run directory's, says what it was in its own words)."""
    seen = f"cannot use {err.filename}: {err.strerror or err}" if err.filename is not None \
        else str(err)
    return UsageError(seen, "a path this user can read (and, for output, write)",
                      "check the path and its permissions (ls -ld), or pass another one")


def fail(err: UsageError, command: str) -> int:
    print(f"distrun {command}: error: {err.one_line()}", file=sys.stderr)
    return exitcodes.USAGE


def entry() -> None:
    try:
        code = main()
    except KeyboardInterrupt:
        code = exitcodes.SIGINT
    except BrokenPipeError:  # the reader left (``distrun diagnose LOG | head``): no traceback
        _drop_stdout()
        code = exitcodes.SIGPIPE
    try:
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):  # what is left for a reader that left: the status
        _drop_stdout()                     # stays the command's (a job's own, for launch)
    sys.exit(code)


def _drop_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's last flush does not fail again."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


if __name__ == "__main__":
    entry()
