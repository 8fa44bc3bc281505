"""Render a :class:`Diagnosis`: JSON for machines, rich text for people."""

from __future__ import annotations

import json
from typing import IO, Any

from rich.console import Console
from rich.markup import escape

from distrun.diagnose.engine import Cause, Diagnosis, Hit

TEXT_WIDTH = 160


def to_json(diagnosis: Diagnosis) -> dict[str, Any]:
    """The JSON contract: ``{"causes": [...], "unrecognised": [...], "failed_ranks": [...]}``."""
    return {
        "causes": [_cause_json(c) for c in diagnosis.causes],
        "unrecognised": [_hit_json(h) for h in diagnosis.unrecognised],
        "failed_ranks": [
            {"rank": e.rank, "exitcode": e.exitcode, "signal": e.signal}
            for e in diagnosis.failed_exits
        ],
    }


def _cause_json(cause: Cause) -> dict[str, Any]:
    return {
        "id": cause.rule.id,
        "title": cause.rule.title,
        "category": cause.rule.category,
        "rank": cause.rank,
        "node": cause.node,
        "evidence": [_evidence_json(h) for h in cause.evidence],
        "fix": list(cause.rule.fix),
        "explanation": cause.rule.explanation,
        "docs": list(cause.rule.docs),
        "consequences": [_hit_json(h) | {"id": h.rule_id} for h in cause.consequences],
    }


def _evidence_json(hit: Hit) -> dict[str, Any]:
    return {"file": hit.file, "line": hit.line, "text": hit.text}


def _hit_json(hit: Hit) -> dict[str, Any]:
    return _evidence_json(hit) | {"rank": hit.rank}


def write_json(diagnosis: Diagnosis, out: IO[str]) -> None:
    json.dump(to_json(diagnosis), out, indent=2)
    out.write("\n")


def write_text(diagnosis: Diagnosis, out: IO[str]) -> None:
    """The human verdict, one screen: cause, rank, node, evidence, fix."""
    console = Console(file=out, width=TEXT_WIDTH, highlight=False, soft_wrap=True)
    if diagnosis.causes:
        _print_causes(console, diagnosis)
    elif diagnosis.failed:
        _print_unknown(console, diagnosis)
    else:
        console.print(f"No errors found in {diagnosis.files} file(s): nothing failed.",
                      markup=False)


def _where(rank: int | None, node: str | None) -> str:
    rank_text = f"rank {rank}" if rank is not None else "rank unknown"
    return f"{rank_text} on node {node}" if node else rank_text


def _print_causes(console: Console, diagnosis: Diagnosis) -> None:
    root, *others = diagnosis.causes
    console.print(f"[bold red]Root cause:[/] {escape(f'{root.rule.title} [{root.rule.id}]')}")
    console.print(f"  where: {escape(_where(root.rank, root.node))}   "
                  f"category: {root.rule.category}")
    _print_evidence(console, root.evidence)
    console.print(f"  why: {escape(root.rule.explanation)}")
    console.print("  fix:")
    for number, step in enumerate(root.rule.fix, start=1):
        console.print(f"    {number}. {escape(step)}")
    console.print(f"  docs: {' '.join(root.rule.docs)}")
    if root.consequences:
        console.print("  consequences (errors the other ranks raised because of it):")
        for hit in root.consequences:
            console.print(f"    {_where(hit.rank, None)}: {hit.rule_id} at {_loc(hit)}")
    for cause in others:
        console.print(
            f"Also seen: {escape(f'{cause.rule.title} [{cause.rule.id}]')} "
            f"({escape(_where(cause.rank, cause.node))}, {_loc(cause.evidence[0])})"
        )
    _print_unrecognised(console, diagnosis.unrecognised, "Earlier unrecognised error lines:")


def _print_evidence(console: Console, hits: tuple[Hit, ...]) -> None:
    console.print("  evidence:")
    for hit in hits:
        console.print(f"    {_loc(hit)}  {escape(_short(hit.text))}")


def _loc(hit: Hit) -> str:
    return escape(f"{hit.file}:{hit.line}")


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _print_unknown(console: Console, diagnosis: Diagnosis) -> None:
    console.print("[bold yellow]No known cause[/] matched these logs.")
    for exit_ in diagnosis.failed_exits:
        signal = f", signal {exit_.signal}" if exit_.signal else ""
        console.print(f"  rank {exit_.rank} exited with code {exit_.exitcode}{escape(signal)}")
    _print_unrecognised(console, diagnosis.unrecognised, "Earliest error lines:")
    console.print("  next: read the failing rank's own log around these lines;")
    console.print("        rerun with NCCL_DEBUG=INFO TORCH_DISTRIBUTED_DEBUG=DETAIL for detail.")


def _print_unrecognised(console: Console, hits: tuple[Hit, ...], heading: str) -> None:
    if not hits:
        return
    console.print(heading)
    for hit in hits:
        console.print(f"  {_where(hit.rank, None)}  {_loc(hit)}  {escape(_short(hit.text))}")
