"""The per-rule reference in docs/diagnose.md, generated from rules.toml.

``python tests/diagnose/rules_md.py`` rewrites the part of docs/diagnose.md between the
first ``### `` rule heading and ``## Corpus and accuracy`` from the rule set, so the page
shows the rules that run; ``test_docs_rules.py`` fails when the two differ.
"""

from __future__ import annotations

import sys
from pathlib import Path

from distrun.diagnose import default_rules
from distrun.diagnose.rules import Rule

DOCS = Path(__file__).parents[2] / "docs" / "diagnose.md"
END = "## Corpus and accuracy"


def _codes(patterns: tuple[str, ...]) -> str:
    return ", ".join(f"`{p}`" for p in patterns)


def rule_markdown(rule: Rule) -> str:
    parts = [f"### `{rule.id}`: {rule.title}", rule.explanation,
             f"Signatures: {_codes(rule.patterns)}"]
    if rule.weak:
        parts.append(f"Weak wordings (low confidence alone): {_codes(rule.weak)}")
    if rule.tail:
        past = f"; not when one of {_codes(rule.past_tail)} follows" if rule.past_tail else ""
        parts.append(f"Hang tails (low confidence, only in a log with no error line, within its "
                     f"last 30 lines{past}): {_codes(rule.tail)}")
    if rule.repeated:
        parts.append(f"Printed once per process; the same line twice in one log (derived, "
                     f"medium confidence): {_codes(rule.repeated)}")
    if rule.context:
        refined = ", ".join(f"`{r}`" for r in rule.refines)
        parts.append(f"Refines {refined} when the error is raised under: {_codes(rule.context)}")
    if rule.max_confidence != "high":
        parts.append(f"Reported with {rule.max_confidence} confidence at most (item 7 above).")
    parts.append("Fix:\n" + "\n".join(f"1. {step}" for step in rule.fix))
    parts.append(f"Docs: {', '.join(rule.docs)}")
    return "\n\n".join(parts) + "\n\n"


def rules_markdown() -> str:
    return "".join(rule_markdown(r) for r in default_rules().rule)


def rewritten(page: str) -> str:
    start = page.index("### `")
    end = page.index(END)
    return page[:start] + rules_markdown() + page[end:]


if __name__ == "__main__":
    DOCS.write_text(rewritten(DOCS.read_text("utf-8")), "utf-8")
    sys.exit(0)
