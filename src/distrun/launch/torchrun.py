"""The invocation's second rendering: the namespace ``config_from_args`` receives.

Built by parsing :meth:`Invocation.argv` with torchrun's own parser, so every flag the argv
leaves out keeps torchrun's default. The parser is made without the ``PET_*`` variables:
those are read once, by the CLI, into the invocation (and so into its argv); a value that
is not in the argv must not reach torchrun behind the plan's back.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from distrun.model.invocation import DEFAULT_PORT, Invocation, Nnodes


@contextmanager
def _without_pet() -> Iterator[None]:
    # torch's parser reads PET_<FLAG> from os.environ when it is built (argparse_util.env)
    saved = {k: os.environ.pop(k) for k in [k for k in os.environ if k.startswith("PET_")]}
    try:
        yield
    finally:
        os.environ.update(saved)


def parser() -> Any:
    """torchrun's parser (an ``argparse.ArgumentParser``), its own defaults (no PET_*)."""
    from torch.distributed.run import get_args_parser

    with _without_pet():
        return get_args_parser()


def defaults() -> dict[str, Any]:
    """torchrun's default for every destination."""
    return {a.dest: a.default for a in parser()._actions}


def namespace(invocation: Invocation) -> Any:
    """The ``argparse.Namespace`` torchrun hands to ``config_from_args`` for
    ``invocation.argv()``: its parser's result, then the steps of torchrun's ``run()``."""
    return finish(parser().parse_args(invocation.argv()[1:]))


def finish(ns: Any) -> Any:
    """What ``torch.distributed.run.run`` does before ``config_from_args`` (torch 2.13):
    ``--standalone`` (or one node, static, no endpoint, no port) becomes c10d at
    ``localhost:0`` with a fresh id; no ``--master-port`` means 29500."""
    one_node = ns.rdzv_backend == "static" and not ns.rdzv_endpoint and ns.master_port is None \
        and Nnodes.parse(ns.nnodes).max == 1
    if ns.standalone or one_node:
        ns.rdzv_backend, ns.rdzv_endpoint, ns.rdzv_id = "c10d", "localhost:0", str(uuid.uuid4())
    if ns.master_port is None:
        ns.master_port = DEFAULT_PORT
    return ns
