"""Launching: a plan becomes running processes through torch's elastic launcher (torchrun)."""
