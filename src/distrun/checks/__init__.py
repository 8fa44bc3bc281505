"""Preflight checks: pure topology rules (``topology``) and rules that look at this host (``host``)."""
