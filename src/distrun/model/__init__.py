"""Typed values that cross layers (dependency-free but for pydantic): the plan, findings,
and (as they land) the torchrun invocation and the run record. Every other package may
import this one; it imports none of them."""
