"""The bounds every input surface enforces, in one place: the largest jobs run on some 10^5
devices, so a typo such as ``99999999x8xH100`` or ``--nproc-per-node 99999999`` is one line of
error, not gigabytes of plan."""

NODES_MAX = 100_000
DEVICES_PER_NODE_MAX = 1024
DEVICES_MAX = 2**20
NPROC_MAX = 1024  # processes per node
PORT_MIN, PORT_MAX = 1, 65535
