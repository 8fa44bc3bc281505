"""Arguments of ``plan`` and ``launch``: torchrun's own parser plus distrun's flags.

torchrun's flags keep torchrun's meaning (and its PET_* environment variables); distrun's
own flags may also come from DISTRUN_<FLAG> variables. Without torch installed, ``plan``
falls back to a parser of torchrun's topology flags only.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

from distrun.cli import envflags, sources
from distrun.errors import UsageError
from distrun.model.invocation import Flag, Nnodes
from distrun.model.limits import NODES_MAX, PORT_MAX, PORT_MIN
from distrun.model.plan import Request

# Flags whose torchrun default distrun replaces with a value from the plan, when left out.
_FILLED = {
    "nnodes": "1:1",
    "nproc_per_node": "1",
    "master_addr": "127.0.0.1",
    "rdzv_backend": "static",
    "node_rank": 0,
    "rdzv_id": "none",
}
# Flags the plan renders itself; everything else the user set is passed through verbatim.
_TOPOLOGY = {*_FILLED, "config", "master_port", "rdzv_endpoint", "rdzv_conf", "local_addr",
             "standalone", "module", "no_python", "training_script", "training_script_args"}


# Each parser's defaults before a config file changed them: what "the user set it" is measured by.
_ORIGINAL: weakref.WeakKeyDictionary[argparse.ArgumentParser, dict[str, Any]] = (
    weakref.WeakKeyDictionary())


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message, fix=f"see '{self.prog} --help'")

    def _print_message(self, message: str, file: SupportsWrite[str] | None = None) -> None:
        _print(message, file)


def _print(message: str, file: SupportsWrite[str] | None) -> None:
    """argparse's --help and --version text; unlike argparse's own, a reader that left is a
    BrokenPipeError (exit 141 in ``distrun.cli.main``), not a silent exit 0."""
    if message:
        (file or sys.stderr).write(message)


_NEGATIVE = re.compile(r"-\.?\d")  # "-7B", "-1e9", "-.5": a (bad) value, not an option


def attached(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """``--flag -7B`` as ``--flag=-7B``, so the flag's own check names the value: argparse
    (before Python 3.13) reads a value starting with '-' and a digit as an unknown option
    and says only that the flag "expected one argument". For parsers without positionals."""
    one_value = {s for a in parser._actions if a.option_strings and a.nargs is None
                 for s in a.option_strings}
    out: list[str] = []
    tokens = iter(argv)
    for token in tokens:
        if token == "--":
            return [*out, token, *tokens]
        value = next(tokens, None) if token in one_value else None
        if value is not None and _NEGATIVE.match(value):
            out.append(f"{token}={value}")
        else:
            out.extend([token] if value is None else [token, value])
    return out


def _one_line(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    def error(message: str) -> NoReturn:
        raise UsageError(message, fix=f"see '{parser.prog} --help'")

    parser.error = error  # type: ignore[method-assign]
    setattr(parser, "_print_message", _print)  # noqa: B010  (argparse would swallow EPIPE)
    return parser


def torchrun_parser(prog: str, env: Mapping[str, str]) -> argparse.ArgumentParser:
    """torchrun's parser, with the defaults distrun fills in cleared (unless PET_* set them),
    and each PET_<FLAG> value checked as the flag's own value would be (envflags' rule)."""
    from torch.distributed.run import get_args_parser

    try:
        parser = _one_line(get_args_parser())
    except ValueError:  # torch reads the PET_<FLAG> of an on/off flag with int(): 'yes' fails
        raise bad_pet_switch(env) from None
    parser.prog = prog
    parser.description = f"{prog}: torchrun's flags (same meaning) plus distrun's own."
    parser.set_defaults(**{d: None for d in _FILLED if f"PET_{d.upper()}" not in env})
    for action in parser._actions:
        var = f"PET_{action.dest.upper()}"
        if var in env and action.nargs != 0 and isinstance(action.default, str):
            action.default = envflags.env_value(action, var, action.default)
    return parser


def bad_pet_switch(env: Mapping[str, str]) -> UsageError:
    """The PET_<FLAG> of an on/off torchrun flag that torch could not read as a number."""
    from distrun.launch.torchrun import parser as clean_parser

    for action in clean_parser()._actions:
        var = f"PET_{action.dest.upper()}"
        if action.nargs == 0 and var in env and not env[var].strip().lstrip("+-").isdigit():
            return UsageError(f"{var}={env[var]!r} is not a number",
                              "0 or 1 (torchrun reads it with int())",
                              f"set {var}=1 (on) or {var}=0 (off), or unset it")
    return UsageError("torchrun could not read a PET_<FLAG> variable", "0 or 1 for on/off flags",
                      "check them with: env | grep ^PET_")


def fallback_parser(prog: str) -> argparse.ArgumentParser:
    """torchrun's topology flags, for planning on a machine without torch."""
    p = OneLineParser(prog=prog, description=f"{prog} (torch not installed: topology flags only)")
    for flag, kind in (("--nnodes", str), ("--nproc-per-node", str), ("--node-rank", int),
                       ("--master-addr", str), ("--master-port", int), ("--rdzv-backend", str),
                       ("--rdzv-endpoint", str), ("--rdzv-id", str)):
        p.add_argument(flag, flag.replace("-", "_").replace("__", "--", 1), type=kind)
    p.add_argument("--standalone", action="store_true")
    p.add_argument("-m", "--module", action="store_true")
    p.add_argument("--no-python", "--no_python", action="store_true")
    p.add_argument("training_script")
    p.add_argument("training_script_args", nargs=argparse.REMAINDER)
    return p


def add_distrun_flags(parser: argparse.ArgumentParser, env: Mapping[str, str]) -> None:
    g = parser.add_argument_group("distrun")
    g.add_argument("--inventory", help="declare hardware instead of detecting it: 2x8xH100-80GB")
    g.add_argument("--backend", help="collective backend (default: the hardware's own)")
    g.add_argument("--global-batch-size", type=int, help="check it divides into the ranks")
    g.add_argument("--per-device-batch-size", type=int, help="with --global-batch-size")
    g.add_argument("--preset", choices=("conservative", "balanced", "aggressive"),
                   help="memory target for ctx.plan_batch: 50/70/90%% of free device memory")
    g.add_argument("--json", action="store_true", help="machine output on stdout")
    g.add_argument("--config", help="TOML file of settings: any long option of distrun launch "
                   "or export, with _ for - (nproc_per_node = 8, stall_timeout = 600, force = "
                   "true), and a [train] table for the script; flags win over it, it over "
                   "DISTRUN_*/PET_* variables")
    envflags.apply(g._group_actions, env)


def distrun_group(parser: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    return next(g for g in parser._action_groups if g.title == "distrun")


def make_parser(prog: str, env: Mapping[str, str], need_torch: bool) -> argparse.ArgumentParser:
    try:
        parser = torchrun_parser(prog, env)
    except ImportError:
        if need_torch:
            raise UsageError("torch is not installed", "torch in this Python environment",
                             "pip install 'distrun[torch]'") from None
        parser = fallback_parser(prog)
    add_distrun_flags(parser, env)
    _ORIGINAL[parser] = {a.dest: a.default for a in parser._actions}
    return parser


class Parsed(NamedTuple):
    """The settings, and where those the command line did not give came from: run what may
    raise a UsageError about them under ``origins.blame()`` so the error names its source."""

    ns: argparse.Namespace
    origins: sources.Origins


def parse(parser: argparse.ArgumentParser, argv: list[str], env: Mapping[str, str]) -> Parsed:
    """Parse twice when a config file is named: its settings become defaults, flags win.
    Values torch's parser takes without checking are checked here (``check_ranges``)."""
    ns = parser.parse_args(argv)
    from_cli = sources.given(parser, argv)
    config = None
    if ns.config:
        via = None if "config" in from_cli else "DISTRUN_CONFIG"
        config, defaults = sources.load(parser, ns.config, via, every_setting)
        parser.set_defaults(**defaults)
        ns = parser.parse_args(argv)
    own = {a.dest for a in distrun_group(parser)._group_actions}
    origins = sources.origins(parser, from_cli, env, config, own)
    with origins.blame():
        check_ranges(ns)
    return Parsed(ns, origins)


def every_setting() -> set[str] | None:
    """What any command's config file may hold: the settings of launch's and export's parsers
    (plan's are launch's), built without the environment; None without torch, whose parser
    names torchrun's flags (plan's fallback parser knows only the topology flags)."""
    from distrun.cli.export import add_export_flags
    from distrun.cli.launch import parser as launch_parser

    try:
        launch = launch_parser({})
    except UsageError:  # torch is not installed: launch has no parser without it
        return None
    export = make_parser("distrun export", {}, need_torch=False)
    add_export_flags(export, {})
    return set(sources.settings(launch)) | set(sources.settings(export))


# flag -> (lowest, highest) allowed; None: no bound on that side
RANGES: dict[str, tuple[float | None, float | None]] = {
    "master_port": (PORT_MIN, PORT_MAX),
    "metrics_port": (PORT_MIN, PORT_MAX),
    "node_rank": (0, NODES_MAX - 1),
    "max_restarts": (0, None),
    "shutdown_timeout": (0, None),
    "monitor_interval": (1e-3, None),
    "global_batch_size": (1, None),
    "per_device_batch_size": (1, None),
    "master_wait": (1e-3, None),
}


def check_ranges(ns: argparse.Namespace) -> None:
    """A number out of its range is one UsageError naming the flag, the value and the range
    (argparse checks types; torch's parser takes e.g. ``--max-restarts -1`` as it is)."""
    for dest, (low, high) in RANGES.items():
        value = getattr(ns, dest, None)
        if not isinstance(value, int | float) or isinstance(value, bool):
            continue
        if math.isnan(value) or (low is not None and value < low) or \
                (high is not None and value > high):
            flag = "--" + dest.replace("_", "-")
            span = f"{low:g} to {high:g}" if high is not None else f"at least {low:g}"
            raise UsageError(f"{flag} {value:g} is out of range", span,
                             f"pass {flag} a value from {span} (or leave it out)")


def baseline(parser: argparse.ArgumentParser) -> dict[str, Any]:
    """What "the user set it" is measured against: torchrun's own defaults (so a PET_* value
    is rendered into the invocation), else the parser's defaults before a config file."""
    try:
        from distrun.launch.torchrun import defaults

        return defaults()
    except ImportError:
        return _ORIGINAL.get(parser, {})


def passthrough(parser: argparse.ArgumentParser, ns: argparse.Namespace) -> tuple[Flag, ...]:
    """The torchrun flags the user set that the plan does not render itself."""
    out: list[Flag] = []
    original = baseline(parser)
    distrun_dests = {a.dest for g in parser._action_groups if g.title == "distrun"
                     for a in g._group_actions}
    for action in parser._actions:
        if action.dest in _TOPOLOGY | distrun_dests or not action.option_strings:
            continue
        value = getattr(ns, action.dest, None)
        if value == original.get(action.dest, action.default) or value is None:
            continue
        flag = next((s for s in action.option_strings if "-" in s[2:]), action.option_strings[0])
        if action.nargs == 0:
            out.append((flag, None))
        else:
            out.append((flag, ",".join(value) if isinstance(value, list) else str(value)))
    return tuple(out)


def to_request(parser: argparse.ArgumentParser, ns: argparse.Namespace) -> Request:
    return Request(
        script=ns.training_script,
        script_args=tuple(ns.training_script_args),
        nnodes=Nnodes.parse(ns.nnodes) if ns.nnodes else None,
        nproc_per_node=ns.nproc_per_node,
        node_rank=ns.node_rank,
        master_addr=ns.master_addr,
        master_port=ns.master_port,
        rdzv_backend=ns.rdzv_backend,
        rdzv_endpoint=ns.rdzv_endpoint or None,
        rdzv_id=None if ns.rdzv_id in (None, "none") else ns.rdzv_id,
        standalone=bool(ns.standalone),
        backend=ns.backend,
        global_batch_size=ns.global_batch_size,
        per_device_batch_size=ns.per_device_batch_size,
        preset=ns.preset,
        train_config=getattr(ns, "train_config", None),
        module=bool(ns.module),
        no_python=bool(ns.no_python),
        rdzv_conf=getattr(ns, "rdzv_conf", None) or None,
        local_addr=getattr(ns, "local_addr", None) or None,
        passthrough=passthrough(parser, ns),
    )
