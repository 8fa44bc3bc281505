"""Line finders: which lines of a region *may* match the rule patterns.

A region is a run of whole lines: bytes ``begin`` to ``size`` of ``data`` (so the
matcher needs no copy of its read buffer), ending with a newline. Both finders
have the same contract: ``line_spans(data, begin, size)`` yields ``(start, end)`` of
each candidate line, in order and once each (``end`` is the index of its newline).
They may yield a line no pattern matches, never skip one that does: the matcher
confirms every candidate with Python's ``re`` and picks the rule there, so both
finders give the same verdicts.

- :class:`HyperscanFinder`: every full pattern in one Hyperscan block-mode
  database (and, for finding only, the line-anchored ones without their ``^``: see
  :func:`unanchored`), one pass in C over the whole region (the ``hyperscan`` wheel bundles
  the library). About twice as fast as the fallback's key scan on big logs. It
  also tells which patterns match one line (``matching``), so the matcher
  needs no Python regex at all. Compiling the database is the costly part of
  start-up, so the compiled database is kept in a cache file keyed by the
  patterns and the library version (``$DISTRUN_CACHE_DIR``, else
  ``$XDG_CACHE_HOME/distrun``, else ``~/.cache/distrun``); a cache that cannot
  be read or written only costs the compile.
- :class:`KeyFinder`: the fallback where the package or the CPU is missing:
  one Python regex of the patterns' literal keys (prefix-factored) over the
  region.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, cast

from distrun.diagnose import cache

try:
    import hyperscan as _hs
except ImportError:  # pragma: no cover - exercised by forcing _hs = None in tests
    _hs = None  # type: ignore[assignment]


class LineFinder(Protocol):
    """Finds the candidate lines of a region of whole lines."""

    name: str

    def line_spans(
        self, data: bytes | bytearray, begin: int, size: int
    ) -> Iterator[tuple[int, int]]: ...


class _Trie(dict[str, "_Trie"]):
    """A character trie; the key "" marks the end of a word."""


def trie_regex(words: Iterable[str]) -> str:
    """A regex matching any of ``words``, factored by common prefixes."""
    root = _Trie()
    for word in words:
        node = root
        for char in word:
            node = node.setdefault(char, _Trie())
        node[""] = _Trie()
    return _emit(root)


def _emit(node: _Trie) -> str:
    if "" in node:
        # A key ends here: any longer key through this node is already covered.
        return ""
    branches = [re.escape(c) + _emit(child) for c, child in sorted(node.items())]
    return branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"


class KeyFinder:
    """Pure-Python finder: lines holding one of the literal keys."""

    name = "re"

    def __init__(self, keys: Sequence[str]) -> None:
        self._search = re.compile(trie_regex(keys).encode()).search

    def line_spans(
        self, data: bytes | bytearray, begin: int, size: int
    ) -> Iterator[tuple[int, int]]:
        pos = begin
        while (found := self._search(data, pos, size)) is not None:
            start = data.rfind(b"\n", 0, found.start()) + 1
            end = data.find(b"\n", found.end(), size)
            if end < 0:  # a match after the region's last newline (an empty key): no line
                return
            yield start, end
            pos = end + 1


class HyperscanFinder:
    """All patterns in one Hyperscan database; lines holding any match."""

    name = "hyperscan"

    def __init__(self, patterns: Sequence[str], environ: Mapping[str, str] | None = None) -> None:
        if _hs is None:
            raise ImportError("hyperscan is not installed")
        self._exact = len(patterns)
        scanned = [*patterns, *unanchored(patterns)]
        cache_path = _cache_file(scanned, os.environ if environ is None else environ)
        self._db: Any = _load(cache_path) if cache_path is not None else None
        if self._db is None:
            self._db = _compile(scanned)
            cache.store(cache_path, _hs.dumpb(self._db))

    def matching(self, text: bytes) -> set[int]:
        """The ids (indices) of the patterns that match ``text`` (one line)."""
        found: set[int] = set()

        def on_match(pattern: int, _start: int, _end: int, _flags: int, _context: object) -> None:
            if pattern < self._exact:  # not a finder-only copy (see unanchored)
                found.add(pattern)

        self._db.scan(text, match_event_handler=on_match)
        return found

    def line_spans(
        self, data: bytes | bytearray, begin: int, size: int
    ) -> Iterator[tuple[int, int]]:
        ends: list[int] = []

        def on_match(_id: int, _start: int, end: int, _flags: int, _context: object) -> None:
            ends.append(end)

        region = cast(bytes, memoryview(data)[begin:size])  # the C scan takes any buffer; no copy
        self._db.scan(region, match_event_handler=on_match)
        return _lines_of(data, sorted(end + begin for end in ends))


def unanchored(patterns: Sequence[str]) -> list[str]:
    """Copies, for finding lines only, of the patterns anchored at a line's start: in a raw
    line a prefix (``[rank3]: ``, pdsh's ``gpu003: ``, a time stamp) stands before what the
    matcher confirms on the line without it (``^ImportError: No module named``)."""
    return [p[1:] for p in patterns if p.startswith("^")]


def _compile(patterns: Sequence[str]) -> Any:
    assert _hs is not None
    db = _hs.Database(mode=_hs.HS_MODE_BLOCK)
    db.compile(
        expressions=[p.encode() for p in patterns],
        ids=list(range(len(patterns))),
        elements=len(patterns),
        flags=_hs.HS_FLAG_MULTILINE,
    )
    return db


def _cache_file(patterns: Sequence[str], environ: Mapping[str, str]) -> Path | None:
    digest = hashlib.sha256("\0".join(patterns).encode())
    digest.update(str(getattr(_hs, "__version__", "")).encode())
    return cache.cache_file(f"diagnose-{digest.hexdigest()[:24]}.hsdb", environ)


def _load(path: Path) -> Any:
    assert _hs is not None
    data = cache.read(path)
    if data is None:
        return None
    try:
        db = _hs.loadb(data, _hs.HS_MODE_BLOCK)
        db.scratch = _hs.Scratch(db)
    except _hs.error:
        return None
    return db


def _lines_of(data: bytes | bytearray, ends: list[int]) -> Iterator[tuple[int, int]]:
    """The lines holding the (sorted, exclusive) match end offsets, once each."""
    line_end = -1
    for end in ends:
        if end <= line_end:
            continue
        start = data.rfind(b"\n", 0, end) + 1
        line_end = data.find(b"\n", end)
        yield start, line_end


def make_finder(
    patterns: Sequence[str], keys: Callable[[], Sequence[str]], fast: bool = True
) -> LineFinder:
    """Hyperscan where it is installed and takes the patterns; the key scan otherwise."""
    if fast and _hs is not None:
        try:
            return HyperscanFinder(patterns)
        except _hs.error:  # an old CPU (no SSSE3) or a pattern Hyperscan cannot compile
            pass
    return KeyFinder(keys())
