"""Render a :class:`Diagnosis`: JSON for machines, plain text for people.

Plain text (no rich): log text is printed as it is, never interpreted as
markup, and importing this module costs nothing at start-up. Every log line
shown is capped at ``MAX_TEXT`` characters (an ellipsis marks the cut), in
both outputs.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import IO, Any

from distrun.diagnose.engine import Cause, Diagnosis, Hit
from distrun.model.record import printable

MAX_TEXT = 500
MAX_SKIPPED = 5  # unreadable run records shown (their count is always said)


def short(text: str, limit: int = MAX_TEXT) -> str:
    """``text`` capped at ``limit`` characters, the cut marked with an ellipsis."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def to_json(diagnosis: Diagnosis) -> dict[str, Any]:
    """The JSON contract::

    {"verdict": "cause" | "no-known-cause" | "nothing-failed", "confidence": ...,
     "causes": [...], "unrecognised": [...], "failed_ranks": [...],
     "ends": [{"file", "line", "text"}],
     "out_of_memory": [{"rank", "device", "peak_bytes", "capacity_bytes", "batch_size",
                        "fitting_batch", "grad_accum", "message"}],
     "skipped": ["events.jsonl:12: why", ...]}

    ``ends``: when no error line was found and no run record says the job ended with 0, each
    log's last line that is not blank (where a job that hung, or was stopped from outside,
    left off).
    ``out_of_memory``: the ranks' ``rank_oom`` records (docs/estimate.md). ``skipped``: run
    records that could not be read and were left out of the verdict (at most ``MAX_SKIPPED``).
    """
    return {
        "verdict": _verdict(diagnosis),
        "confidence": diagnosis.confidence,
        "causes": [_cause_json(c) for c in diagnosis.causes],
        "unrecognised": [_hit_json(h) for h in diagnosis.unrecognised],
        "failed_ranks": [
            {"rank": e.rank, "exitcode": e.exitcode, "signal": e.signal}
            for e in diagnosis.failed_exits
        ],
        "ends": [_evidence_json(h) for h in diagnosis.ends],
        "out_of_memory": [asdict(o) for o in diagnosis.oom],
        "skipped": [short(printable(p)) for p in diagnosis.skipped[:MAX_SKIPPED]],
    }


def _verdict(diagnosis: Diagnosis) -> str:
    if diagnosis.causes:
        return "cause"
    return "no-known-cause" if diagnosis.failed else "nothing-failed"


def _cause_json(cause: Cause) -> dict[str, Any]:
    return {
        "id": cause.rule.id,
        "title": cause.rule.title,
        "category": cause.rule.category,
        "confidence": cause.confidence,
        "rank": cause.rank,
        "node": cause.node,
        "evidence": [_evidence_json(h) for h in cause.evidence],
        "fix": list(cause.rule.fix),
        "explanation": cause.rule.explanation,
        "docs": list(cause.rule.docs),
        "note": cause.note,
        "consequences": [_hit_json(h) | {"id": h.rule_id} for h in cause.consequences],
    }


def _evidence_json(hit: Hit) -> dict[str, Any]:
    return {"file": hit.file, "line": hit.line, "text": short(hit.text)}


def _hit_json(hit: Hit) -> dict[str, Any]:
    return _evidence_json(hit) | {"rank": hit.rank}


def write_json(diagnosis: Diagnosis, out: IO[str]) -> None:
    json.dump(to_json(diagnosis), out, indent=2)
    out.write("\n")


def write_text(diagnosis: Diagnosis, out: IO[str]) -> None:
    """The human verdict, one screen: cause, confidence, rank, node, evidence, fix."""
    lines: list[str] = []
    if diagnosis.causes:
        _causes_text(diagnosis, lines)
    elif diagnosis.failed:
        _unknown_text(diagnosis, lines)
    elif diagnosis.job_exitcode == 0:
        lines.append(f"No errors found in {diagnosis.files} file(s): nothing failed.")
    else:  # a job that hung, or was stopped from outside, may print no error at all
        said = "no line in them says that the job failed" if diagnosis.job_exitcode is None \
            else f"the run record says the job ended with exit code {diagnosis.job_exitcode}"
        lines.append(f"No errors found in {diagnosis.files} file(s): {said}.")
        _ends_text(diagnosis.ends, lines)
    _oom_text(diagnosis, lines)
    _skipped_text(diagnosis.skipped, lines)
    out.write("\n".join(lines) + "\n")


def _ends_text(ends: tuple[Hit, ...], lines: list[str]) -> None:
    """Where each log stopped: what a hung job printed last, or a stop from outside."""
    if ends:
        lines.append("If it hung or was stopped from outside, this is where each log ends:")
        lines.extend(f"  {_loc(h)}  {short(printable(h.text))}" for h in ends)


def _skipped_text(skipped: tuple[str, ...], lines: list[str]) -> None:
    """Run records left out of the verdict because they could not be read."""
    if skipped:
        lines.append(f"Left out (could not be read): {len(skipped)} run record(s)")
        lines.extend(f"  {short(printable(p))}" for p in skipped[:MAX_SKIPPED])


def _oom_text(diagnosis: Diagnosis, lines: list[str]) -> None:
    """The ranks' own out-of-memory records (the run directory's ``rank_oom`` events)."""
    if diagnosis.oom:
        lines.append("Out of memory (from the run record):")
        lines.extend(f"  {short(printable(o.message), 2 * MAX_TEXT)}" for o in diagnosis.oom)


def _where(rank: int | None, node: str | None) -> str:
    rank_text = f"rank {rank}" if rank is not None else "rank unknown"
    return f"{rank_text} on node {node}" if node else rank_text


def _causes_text(diagnosis: Diagnosis, lines: list[str]) -> None:
    root, *others = diagnosis.causes
    if root.rule.kind == "secondary":
        lines.append(f"Only consequences found (the root cause is not in these logs): "
                     f"{root.rule.title} [{root.rule.id}]")
    else:
        lines.append(f"Root cause: {root.rule.title} [{root.rule.id}]")
    lines.append(f"  confidence: {root.confidence}{_confidence_hint(root)}")
    lines.append(f"  where: {_where(root.rank, root.node)}   category: {root.rule.category}")
    if root.note:
        lines.append(f"  note: {root.note}")
    lines.append("  evidence:")
    lines.extend(f"    {_loc(hit)}  {short(hit.text)}" for hit in root.evidence)
    lines.append(f"  why: {root.rule.explanation}")
    lines.append("  fix:")
    lines.extend(f"    {n}. {step}" for n, step in enumerate(root.rule.fix, start=1))
    lines.append(f"  docs: {' '.join(root.rule.docs)}")
    if root.consequences:
        lines.append("  consequences (errors the other ranks raised because of it):")
        lines.extend(f"    {_where(h.rank, None)}: {h.rule_id} at {_loc(h)}" for h in root.consequences)
    for cause in others:
        lines.append(f"Also seen: {cause.rule.title} [{cause.rule.id}] "
                     f"({_where(cause.rank, cause.node)}, {_loc(cause.evidence[0])})")
    _unrecognised_text(diagnosis.unrecognised, "Earlier unrecognised error lines:", lines)


def _confidence_hint(cause: Cause) -> str:
    if cause.confidence == "low":
        return " (matched only a wording other failures share: check the evidence)"
    if cause.confidence == "medium" and not cause.note and cause.rule.max_confidence == "medium":
        return " (this error is not always the cause of a failure: check the evidence)"
    if cause.confidence == "medium" and not cause.note:
        return " (unrecognised errors came first, or the cause was inferred: check below)"
    return ""


def _loc(hit: Hit) -> str:
    return f"{hit.file}:{hit.line}"


def _unknown_text(diagnosis: Diagnosis, lines: list[str]) -> None:
    lines.append("No known cause matched these logs.")
    for exit_ in diagnosis.failed_exits:
        signal = f", signal {exit_.signal}" if exit_.signal else ""
        lines.append(f"  rank {exit_.rank} exited with code {exit_.exitcode}{signal}")
    _unrecognised_text(diagnosis.unrecognised, "Earliest error lines:", lines)
    lines.append("  next: read the failing rank's own log around these lines;")
    lines.append("        rerun with NCCL_DEBUG=INFO TORCH_DISTRIBUTED_DEBUG=DETAIL for detail.")


def _unrecognised_text(hits: tuple[Hit, ...], heading: str, lines: list[str]) -> None:
    if not hits:
        return
    lines.append(heading)
    lines.extend(f"  {_where(h.rank, None)}  {_loc(h)}  {short(h.text)}" for h in hits)
