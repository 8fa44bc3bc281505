"""Wordings of the python-module-missing rule, and the gloo read error that is not a timeout
(session 12).

Each log is short and built around the real message; the comment names where the message comes
from. Assertions are what the user sees: the rule, how sure, the rank. The negative cases are a
neighbouring category's message that the new patterns must not take.
"""

from __future__ import annotations

from tests.diagnose.wording import wording_tests

_SUMMARY = (
    "E1124 10:00:01.123000 1234 torch/distributed/elastic/multiprocessing/api.py:882] failed "
    "(exitcode: 1) local_rank: 1 (pid: 4321) of binary: /usr/bin/python3\n"
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
)
# gloo transport/tcp/pair.cc: every unexpected read error carries this advice, whatever errno says
_GLOO_RESET = (
    "[rank0]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:537] Read error "
    "[127.0.0.1]:17122: Connection reset by peer. This is typically caused by a remote worker hanging "
    "or bugs in the application. Check the logs of the remote worker before reporting an error. "
    "GLHF! \U0001f3d6\ufe0f\n"
)

# (log text, rule id, confidence, rank or None)
CASES = {
    # CPython 3.6+ import system, under torchrun's [rankN]: prefix, before the launcher's summary
    "module-not-found-rank-prefix": (
        "[rank1]: Traceback (most recent call last):\n"
        "[rank1]:   File \"/home/u/train.py\", line 3, in <module>\n"
        "[rank1]:     import flash_attn\n"
        "[rank1]: ModuleNotFoundError: No module named 'flash_attn'\n" + _SUMMARY,
        "python-module-missing", "medium", 1),
    # a submodule gone in the installed release ("...; 'x' is not a package" since 3.7)
    "submodule-not-a-package": (
        "Traceback (most recent call last):\n  File \"train.py\", line 1, in <module>\n"
        "ModuleNotFoundError: No module named 'apex.amp'; 'apex' is not a package\n",
        "python-module-missing", "medium", None),
    # CPython 2.x / 3.0-3.5
    "importerror-no-module-py2": (
        "Traceback (most recent call last):\n  File \"main.py\", line 7, in <module>\n"
        "ImportError: No module named horovod.torch\n",
        "python-module-missing", "medium", None),
    # a name the installed release does not have
    "cannot-import-name": (
        "[default0]:Traceback (most recent call last):\n"
        "[default0]:ImportError: cannot import name 'is_torch_xla_available' from 'transformers.utils' "
        "(/opt/conda/lib/python3.10/site-packages/transformers/utils/__init__.py)\n",
        "python-module-missing", "medium", 0),
    # transformers utils/import_utils.py requires_backends
    "transformers-requires-backend": (
        "ImportError: \nLlamaTokenizer requires the SentencePiece library but it was not found in your "
        "environment. Checkout the instructions on the\n",
        "python-module-missing", "medium", None),
    # importlib.metadata, e.g. transformers' version check of accelerate
    "package-metadata-missing": (
        "importlib.metadata.PackageNotFoundError: No package metadata was found for accelerate\n",
        "python-module-missing", "medium", None),
    # Open MPI's per-rank stderr prefix
    "mpirun-rank-prefix": (
        "[1,3]<stderr>:ModuleNotFoundError: No module named 'mpi4py'\n",
        "python-module-missing", "medium", 3),
    # a rank's read from a peer that died: the cause is elsewhere, the peer closed the connection
    "gloo-read-error-reset-is-peer-closed": (
        _GLOO_RESET, "peer-connection-closed", "medium", None),
}

NEGATIVE = {
    # a caught optional import printed as a warning, then a real failure: the failure wins
    "optional-import-warning-then-oom": (
        "UserWarning: apex not found (No module named 'apex'), using torch.amp instead\n"
        "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
        "total capacity of 79.10 GiB of which 1.12 GiB is free.\n",
        "cuda-out-of-memory"),
    # a shared library the dynamic loader cannot find is a library problem, not a missing module
    "libnccl-cannot-open": (
        "ImportError: libnccl.so.2: cannot open shared object file: No such file or directory\n",
        "nccl-cuda-library-mismatch"),
    # gloo's own read timeout is still a collective timeout
    "gloo-read-timeout": (
        "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Read timeout "
        "[127.0.0.1]:41234\n",
        "collective-timeout"),
}

test_wording_names_the_rule, test_neighbour_is_not_taken = wording_tests(CASES, NEGATIVE)
