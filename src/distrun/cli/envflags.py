"""One rule for every ``DISTRUN_<FLAG>`` variable: it becomes the flag's default, checked.

The value is converted as the flag's own type would convert it; a value that does not convert
(or is not among the flag's choices) is a usage error naming the variable and the value.
On/off flags accept 1/0, true/false, yes/no, on/off in any case.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from typing import Any

from distrun.errors import UsageError

TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off", "")


def parse_bool(var: str, raw: str) -> bool:
    text = raw.strip().lower()
    if text in TRUE:
        return True
    if text in FALSE:
        return False
    raise UsageError(f"{var}={raw!r} is not an on/off value", "1/0, true/false, yes/no, on/off",
                     f"unset {var} or set it to 1 or 0")


def env_value(action: argparse.Action, var: str, raw: str) -> Any:
    """``raw`` converted for ``action`` (a UsageError naming ``var`` when it does not fit)."""
    if action.nargs == 0:
        return parse_bool(var, raw)
    try:
        value = action.type(raw) if callable(action.type) else raw
    except (TypeError, ValueError, argparse.ArgumentTypeError):
        flag = action.option_strings[0]
        raise UsageError(f"{var}={raw!r} is not valid for {flag}", fix=f"unset {var} or give "
                         f"it a value {flag} accepts (see --help)") from None
    if action.choices is not None and value not in action.choices:
        raise UsageError(f"{var}={raw!r} is not one of {', '.join(map(str, action.choices))}",
                         fix=f"unset {var} or give it a valid value")
    return value


def apply(actions: Iterable[argparse.Action], env: Mapping[str, str],
          prefix: str = "DISTRUN_") -> None:
    """Each action's default from ``<prefix><DEST>`` when that variable is set."""
    for action in actions:
        var = prefix + action.dest.upper()
        if var in env:
            action.default = env_value(action, var, env[var])
