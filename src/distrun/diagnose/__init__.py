"""Post-mortem diagnosis of distributed runs: rules as data, a streaming engine."""

from distrun.diagnose.engine import Cause, Diagnosis, Hit, diagnose
from distrun.diagnose.report import to_json, write_json, write_text
from distrun.diagnose.rules import Rule, RuleSet, default_rules, load_rules

__all__ = [
    "Cause",
    "Diagnosis",
    "Hit",
    "Rule",
    "RuleSet",
    "default_rules",
    "diagnose",
    "load_rules",
    "to_json",
    "write_json",
    "write_text",
]
