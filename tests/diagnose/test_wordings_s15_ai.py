"""Wordings added in session 15 by helper ai (issue 12): a torch build without torch.distributed
or without the requested backend, from development cases and the printing sources.

Each case is a short log as a user would paste it; the test asserts the verdict they read.
"""

from __future__ import annotations

from tests.diagnose.wording import NOISE, Case, Neighbour, wording_tests

UNAVAILABLE = "cuda-unavailable"

CASES: dict[str, Case] = {
    # torch/distributed/__init__.py of a USE_DISTRIBUTED=0 build defines is_available() alone
    "no init_process_group": (
        NOISE + "AttributeError: module 'torch.distributed' has no attribute 'init_process_group'\n",
        UNAVAILABLE, "medium", None),
    "no is_initialized": (
        "E       AttributeError: module 'torch.distributed' has no attribute 'is_initialized'\n",
        UNAVAILABLE, "medium", None),
    "no ProcessGroup": (
        NOISE + "AttributeError: module 'torch.distributed' has no attribute 'ProcessGroup'\n",
        UNAVAILABLE, "medium", None),
    "cannot import ReduceOp": (
        "ImportError: cannot import name 'ReduceOp' from 'torch.distributed' "
        "(/usr/lib/python3.10/site-packages/torch/distributed/__init__.py)\n",
        UNAVAILABLE, "medium", None),
    "no c10d extension": (
        "    from torch._C._distributed_c10d import (\nModuleNotFoundError: No module named "
        "'torch._C._distributed_c10d'; 'torch._C' is not a package\n", UNAVAILABLE, "medium", None),
    # Lightning fabric/utilities/distributed.py _init_dist_connection
    "lightning init_dist_connection": (
        NOISE + "RuntimeError: torch.distributed is not available. Cannot initialize distributed "
        "process group\n", UNAVAILABLE, "medium", None),
    # torch csrc/cuda/nccl.cpp on a USE_NCCL=0 build
    "torch.cuda.nccl without NCCL": (
        NOISE + "RuntimeError: PyTorch built without NCCL support\n", UNAVAILABLE, "medium", None),
}

NEIGHBOURS: dict[str, Neighbour] = {
    # a submodule not imported yet (torch.distributed.elastic / .checkpoint) is no build problem
    "an unimported submodule": (
        NOISE + "AttributeError: module 'torch.distributed' has no attribute 'checkpoint'\n", None),
}


test_wording_names_the_rule, test_neighbour_is_not_taken = wording_tests(CASES, NEIGHBOURS)
