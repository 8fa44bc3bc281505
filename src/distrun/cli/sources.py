"""Where each setting of ``plan`` / ``launch`` / ``export`` came from, and the config file's
settings checked against the parser itself.

A value comes from the command line, a ``DISTRUN_<FLAG>`` variable (distrun's own flags), a
``PET_<FLAG>`` variable (torchrun's flags, read by torchrun's parser), or the ``--config``
file; flags win over the file, the file over variables. A bad value is reported with its real
source (:meth:`Origins.blame`), and the fix is for that source: unset the variable, change the
key in the file.

The config file may hold every long option of ``distrun launch`` and of ``distrun export``
(``plan``'s are launch's), with ``_`` for ``-``, except ``--config`` and ``--help``: the names
come from the parsers, never from a list kept by hand. A command uses the keys it has and
passes over those only another command has (one file serves plan, launch and export).
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from distrun.config import ConfigFile, read
from distrun.errors import UsageError
from distrun.model.userfile import shown

NOT_SETTINGS = frozenset({"help", "config"})
_UNSET = object()


@dataclass(frozen=True)
class Origin:
    """A value that did not come from the command line: where from, and how to change it."""

    where: str  # "DISTRUN_MASTER_WAIT", "config job.toml, key master_wait"
    fix: str


@dataclass(frozen=True)
class Origins:
    """Each option string (``--master-wait``) whose value came from elsewhere: its origin."""

    by_flag: Mapping[str, Origin]

    def relabel(self, err: UsageError) -> UsageError:
        """``err`` naming the real source of its value. By convention an error about a flag's
        value starts with the flag (``--nnodes 'x' is not a number``), or names it in
        ``err.flag`` (:func:`about`); one about no flag, or about a flag given on the command
        line, is returned as it is."""
        origin = self.by_flag.get(err.flag or err.seen.split(" ", 1)[0].split("=", 1)[0])
        if origin is None:
            return err
        # an error about a file the flag names keeps its own fix (the file's content, say)
        fix = f"{err.fix}; or {origin.fix}" if err.flag and err.fix else origin.fix
        return UsageError(f"from {origin.where}: {err.seen}", err.expected, fix)

    @contextmanager
    def blame(self) -> Iterator[None]:
        """A UsageError raised inside about a value from a variable or the config file names
        that variable or file and key (see :meth:`relabel`)."""
        try:
            yield
        except UsageError as err:
            relabelled = self.relabel(err)
            if relabelled is err:
                raise
            raise relabelled from None


@contextmanager
def about(flag: str) -> Iterator[None]:
    """A UsageError raised inside is about ``flag``'s value (a file it names, say), so that
    :meth:`Origins.blame` names where that value came from."""
    try:
        yield
    except UsageError as err:
        err.flag = err.flag or flag
        raise


def settings(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """The config file's keys this parser has: each long option's destination."""
    return {a.dest: a for a in parser._actions
            if any(s.startswith("--") for s in a.option_strings) and a.dest not in NOT_SETTINGS}


def given(parser: argparse.ArgumentParser, argv: list[str]) -> set[str]:
    """The destinations the command line set (parsed into a namespace of placeholders, so a
    flag given with its default value counts as given)."""
    probe = argparse.Namespace(**{a.dest: _UNSET for a in parser._actions})
    parsed = parser.parse_args(argv, namespace=probe)
    return {dest for dest, value in vars(parsed).items() if value is not _UNSET}


def origins(parser: argparse.ArgumentParser, from_cli: set[str], env: Mapping[str, str],
            config: ConfigFile | None, own: set[str]) -> Origins:
    """Where each value the command line did not set (``from_cli``: :func:`given`) came from
    (``own``: distrun's flags, which read DISTRUN_<FLAG>; the others are torchrun's, which read
    PET_<FLAG>)."""
    found: dict[str, Origin] = {}
    for dest, action in settings(parser).items():
        if dest in from_cli:
            continue
        origin = _origin(dest, env, config, dest in own)
        if origin is not None:
            found.update(dict.fromkeys(action.option_strings, origin))
    return Origins(found)


def _origin(dest: str, env: Mapping[str, str], config: ConfigFile | None,
            own: bool) -> Origin | None:
    if config is not None and dest in config.settings:
        return Origin(f"config {config.name}, key {dest}",
                      f"change {dest} in {config.name} (or remove it)")
    var = f"{'DISTRUN' if own else 'PET'}_{dest.upper()}"
    if var in env:
        return Origin(var, f"unset {var}, or give it a valid value")
    return None


def config_defaults(parser: argparse.ArgumentParser, config: ConfigFile,
                    known: Callable[[], set[str] | None]) -> dict[str, Any]:
    """The file's settings as this parser's defaults, each converted and checked as its flag
    would be; a key of another command (in ``known()``, every command's keys; None when they
    cannot be known: without torch) is passed over; an unknown key or a bad value is one
    UsageError naming the file, the key and the fix."""
    mine = settings(parser)
    out: dict[str, Any] = {}
    for key, value in config.settings.items():
        action = mine.get(key)
        if action is not None:
            out[key] = config_value(action, key, value, config.name)
            continue
        every = known()
        if every is not None and key not in every:
            raise unknown_key(key, config.name, every | set(mine))
    if config.train_config is not None:  # the ranks read it: DISTRUN_TRAIN_CONFIG
        out["train_config"] = config.train_config
    return out


def unknown_key(key: str, path: str, known: set[str]) -> UsageError:
    close = difflib.get_close_matches(key, sorted(known), n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    return UsageError(f"config {path}: key {key!r} is not a setting",
                      "the long options of 'distrun launch --help' and 'distrun export slurm "
                      "--help', with _ for - (and a [train] table)",
                      f"{hint}correct or remove {key!r} in {path}")


def config_value(action: argparse.Action, key: str, value: Any, path: str) -> Any:
    """``value`` from the file, as ``action``'s flag would take it."""
    flag = next(s for s in action.option_strings if s.startswith("--"))

    def bad(why: str) -> UsageError:
        return UsageError(f"config {path}: {key} = {shown(value)} {why}",
                          fix=f"change {key} in {path} (see '{flag}' in --help), or remove it")

    if action.nargs == 0:  # an on/off flag
        if not isinstance(value, bool):
            raise bad(f"is not true or false (an on/off setting, like {flag})")
        return value
    if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
        value = ",".join(str(v) for v in value)  # a list flag takes "a,b,c"
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise bad(f"is not a value {flag} takes (a string or a number)")
    try:
        converted = action.type(str(value)) if callable(action.type) else str(value)
    except (TypeError, ValueError, argparse.ArgumentTypeError):
        raise bad(f"is not valid for {flag}") from None
    if action.choices is not None and converted not in action.choices:
        raise bad(f"is not one of {', '.join(map(str, action.choices))}")
    return converted


def load(parser: argparse.ArgumentParser, path: str, env_var: str | None,
         known: Callable[[], set[str] | None]) -> tuple[ConfigFile, dict[str, Any]]:
    """The config file named by ``--config`` (or by ``env_var``, DISTRUN_CONFIG) and its
    settings as ``parser``'s defaults."""
    if env_var is None:
        config = read(path)
    else:
        config = read(path, f"config (from {env_var})",
                      f"unset {env_var}, or point it at a TOML file of settings")
    return config, config_defaults(parser, config, known)
