"""Accelerators: the vendor table (``vendors``) and a probe per vendor (``probes``)."""
