"""Wordings added in session 17 by helper au (issue 12): short pastes with no standard error
line for the memory categories (a compiler's or a runtime's one-line report, a framework's
WARNING, an NGC container's banner, df output), from development cases and the printing sources.

Each case is a short log as a user would paste it; the test asserts the verdict they read.
"""

from __future__ import annotations

from tests.diagnose.wording import NOISE, Case, Neighbour, wording_tests

OOM = "cuda-out-of-memory"
HOST = "host-oom-or-killed"
SHM = "shm-bus-error"

CACHE_FLUSHES = (
    "[2024-05-02 10:00:00,000] [WARNING] [stage3.py:2069:step] 3 pytorch allocator cache flushes "
    "since last step. this happens when there is high memory pressure and is detrimental to "
    "performance. if this is happening frequently consider adjusting settings to reduce memory "
    "consumption.\n")
NGC_BANNER = (
    "NOTE: The SHMEM allocation limit is set to the default of 64MB.  This may be\n"
    "   insufficient for PyTorch.  NVIDIA recommends the use of the following flags:\n"
    "   docker run --gpus all --ipc=host --ulimit memlock=-1 --ulimit stack=67108864 ...\n")

CASES: dict[str, Case] = {
    # DeepSpeed runtime/zero/stage3.py: the caching allocator freed its cache and retried
    "deepspeed allocator cache flushes": (NOISE + CACHE_FLUSHES, OOM, "low", None),
    # TensorFlow/XLA tsl bfc_allocator.cc W-level line: running near the device's memory
    "tf bfc garbage collection": (
        NOISE + "2024-02-21 09:34:04.110923: W tensorflow/tsl/framework/bfc_allocator.cc:366] "
        "Garbage collection: deallocate free memory regions (i.e., allocations) so that we can "
        "re-allocate a larger region to avoid OOM due to memory fragmentation. If you see this "
        "message frequently, you are running near the threshold of the available device memory\n",
        OOM, "low", None),
    # NGC containers' entrypoint: /dev/shm is Docker's 64 MB default
    "ngc shmem banner": (NGC_BANNER + NOISE, SHM, "low", None),
    # df -h inside a container: /dev/shm at the 64 MB default, and full
    "df shm default size": (
        "Filesystem      Size  Used Avail Use% Mounted on\n"
        "overlay         916G  120G  750G  14% /\n"
        "shm              64M     0   64M   0% /dev/shm\n", SHM, "low", None),
    "df shm full": (
        NOISE + "Filesystem      Size  Used Avail Use% Mounted on\n"
        "shm              64M   64M     0 100% /dev/shm\n", SHM, "high", None),
    "df shm full in 1K blocks": (
        "Filesystem     1K-blocks  Used Available Use% Mounted on\n"
        "shm                65536 65536         0 100% /dev/shm\n", SHM, "high", None),
    # gcc < 8 driver: the compiler SIGKILLed during a build (capped at medium by the rule)
    "gcc internal compiler error killed": (
        "[ 23%] Building CXX object CMakeFiles/ext.dir/kernel.cpp.o\n"
        "c++: internal compiler error: Killed (program cc1plus)\n"
        "Please submit a full bug report,\n", HOST, "medium", None),
    "gcc killed, c compiler": (
        "gcc: internal compiler error: Killed (program cc1)\n", HOST, "medium", None),
    # Rust std's allocation error hook, the shell's "Aborted" glued to it
    "rust allocation failed": (
        "INFO - Parsing block file 8/1861...\nmemory allocation of 2214592528 bytes failedAborted\n",
        HOST, "medium", None),
    "rust allocation failed, core dumped": (
        NOISE + "memory allocation of 34359738368 bytes failed\nAborted (core dumped)\n",
        HOST, "medium", None),
}

NEIGHBOURS: dict[str, Neighbour] = {
    # a weak wording never outranks a strong cause elsewhere in the log
    "cache flushes before a SIGKILL": (
        CACHE_FLUSHES + "Signal 9 (SIGKILL) received by PID 4242\n", HOST),
    "ngc banner before a device OOM": (
        NGC_BANNER + NOISE + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
        "2.00 GiB\n", OOM),
    # a large /dev/shm with room left says nothing
    "df shm large and free": (
        "Filesystem      Size  Used Avail Use% Mounted on\n"
        "tmpfs            32G  1.2G   31G   4% /dev/shm\n", None),
    # a full root file system is not /dev/shm
    "df root full": (
        "Filesystem      Size  Used Avail Use% Mounted on\n"
        "overlay          64M   64M     0 100% /\n", None),
    # a compiler crash that is not a kill
    "gcc internal compiler error segfault": (
        "c++: internal compiler error: Segmentation fault (program cc1plus)\n", None),
}


test_wording_names_the_rule, test_neighbour_is_not_taken = wording_tests(CASES, NEIGHBOURS)
