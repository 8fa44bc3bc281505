"""distrun's boot hook (docs/instrument.md); on ``PYTHONPATH`` only for the ranks that
``distrun launch`` starts.

It turns the instrumentation on only where ``DISTRUN_INSTRUMENT=1`` and torchrun's ``RANK``
are set and this process is not a child of an instrumented rank, then runs the
``sitecustomize`` this one shadows, as Python would have. Its own errors are one warning line on
stderr: it never stops the script.
"""

import os
import sys


def _distrun_boot() -> None:
    env = os.environ
    marker = env.get("DISTRUN_INSTRUMENT_PID", "")
    if env.get("DISTRUN_INSTRUMENT") != "1" or "RANK" not in env:
        return
    if marker and marker != str(os.getpid()):
        return  # a child process of an instrumented rank (data loader workers, tools)
    try:
        from distrun.instrument import agent

        agent.activate(env)
    except Exception as exc:
        sys.stderr.write(f"distrun: instrument: off in this process "
                         f"({type(exc).__name__}: {exc})\n")


def _distrun_chain() -> None:
    """Run the next ``sitecustomize`` on ``sys.path``, the one this file shadows."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


_distrun_boot()
_distrun_chain()
