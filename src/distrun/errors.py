"""The base of every distrun error: what was seen, what was expected, the fix.

Each subsystem subclasses :class:`DistrunError`; only the CLI maps them to exit
codes (see ``distrun.cli.exitcodes``).
"""

from __future__ import annotations


class DistrunError(Exception):
    """An error a user can act on.

    ``seen`` is what distrun observed, ``expected`` what it needed and ``fix`` the
    exact change that resolves it. ``str(err)`` is one line.
    """

    def __init__(self, seen: str, expected: str = "", fix: str = "") -> None:
        self.seen = seen
        self.expected = expected
        self.fix = fix
        super().__init__(self.one_line())

    def one_line(self) -> str:
        parts = [self.seen]
        if self.expected:
            parts.append(f"expected {self.expected}")
        if self.fix:
            parts.append(f"fix: {self.fix}")
        return "; ".join(parts)


class UsageError(DistrunError):
    """Bad input on the command line or in a file the user gave (exit status 2).

    ``flag``: the option whose value this is about, where ``seen`` does not start with it (the
    CLI names the variable or config file the value came from: ``distrun.cli.sources``)."""

    flag: str | None = None
