"""Wordings added in session 15 (issue 12), from development cases and the printing sources.

Each case is a short log as a user would paste it; the test asserts the verdict they read.
"""

from __future__ import annotations

from tests.diagnose.wording import NOISE, Case, Neighbour, wording_tests

CASES: dict[str, Case] = {
    # nccl.torch's ffi.lua: the binding's own look-up of the library failed
    "nccl binding's look-up": (
        "nccl/ffi.lua:195: 'libnccl.so not found in library path.\nPlease install nccl.\n",
        "nccl-cuda-library-mismatch", "high", None),
    "rccl binding's look-up": (
        NOISE + "RuntimeError: librccl.so.1 not found\n", "nccl-cuda-library-mismatch", "high", None),
}

NEIGHBOURS: dict[str, Neighbour] = {
    # a model file that is not there names no library
    "a checkpoint not found": (NOISE + "FileNotFoundError: model.safetensors not found\n", None),
}


test_wording_names_the_rule, test_neighbour_is_not_taken = wording_tests(CASES, NEIGHBOURS)
