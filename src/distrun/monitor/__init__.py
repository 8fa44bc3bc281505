"""Watching a running job: device and process samples, run-directory state, verification,
stall detection, the live view's snapshot and the HTML report."""
