"""Planning: a pure function from a request and inventories to a LaunchPlan."""

from distrun.model.plan import Finding, LaunchPlan, NodePlan, Request
from distrun.plan.planner import build

__all__ = ["Finding", "LaunchPlan", "NodePlan", "Request", "build"]
