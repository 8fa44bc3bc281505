"""Typed values that cross layers; every other package may import this one, it imports none.

- ``plan``: ``Request``, ``LaunchPlan``, ``NodePlan`` (and ``Finding``, re-exported);
- ``findings``: ``Finding``, the one result type of preflight and verification;
- ``record``: the run record read back (events, samples, ``BadLine``, ``RankFailure``,
  ``JobOutcome``/``JobStatus``, ``read_plan``); needs pydantic, host side only;
- ``rundir``: the one writer of the run directory (standard library only: the runtime uses it).
"""
