"""Wordings added in session 16 by helper am (issue 12): device memory exhausted as XLA's
convolution autotuner reports it, from development cases and the printing source.

Each case is a short log as a user would paste it; the test asserts the verdict they read.
"""

from __future__ import annotations

from tests.diagnose.wording import NOISE, Case, Neighbour, wording_tests

OOM = "cuda-out-of-memory"

CASES: dict[str, Case] = {
    # xla/service/gpu/conv_algorithm_picker.cc (strict picker, the default): the UNKNOWN status
    # JAX raises; the wording is shared with a cuDNN build that lacks the GPU, hence low
    "jax conv algorithm picker": (
        NOISE + "jaxlib.xla_extension.XlaRuntimeError: UNKNOWN: Failed to determine best cudnn "
        "convolution algorithm for:\n%cudnn-conv = (f32[8,64,56,56]{3,2,1,0}, u8[0]{0}) "
        "custom-call(f32[8,64,56,56]{3,2,1,0} %p0, f32[64,64,3,3]{3,2,1,0} %p1)\n",
        OOM, "low", None),
    # the older TF status spelling of the same error (RuntimeError from jaxlib <= 0.1.x)
    "old status spelling": (
        NOISE + "RuntimeError: Unknown: Failed to determine best cudnn convolution algorithm: "
        "Internal: All algorithms tried for convolution failed.\n", OOM, "low", None),
    # TF 1.x / early-XLA status spelling (jaxlib 0.1 local_client.cc), flattened into one line
    # by a paste that kept the blank the terminal's wrap left
    "old xla status flattened": (
        NOISE + "E local_client.cc:672] Execution of replica 0 failed: Resource exhausted: Out  "
        "of memory while trying to allocate 5520758552 bytes.\n", OOM, "high", None),
}

NEIGHBOURS: dict[str, Neighbour] = {
    # the non-fatal WARNING of the same autotuner (older XLA): training goes on
    "autotuner warning": (
        NOISE + "2021-06-09 10:00:00.000000: W external/org_tensorflow/tensorflow/compiler/xla/"
        "service/gpu/gpu_conv_algorithm_picker.cc:763] Failed to determine best cudnn convolution "
        "algorithm: Internal: All algorithms tried for convolution failed.\n\nConvolution "
        "performance may be suboptimal.\n" + NOISE, None),
    # Triton's kernel launch over the SM's shared memory (SRAM) is no device OOM nor /dev/shm
    "triton out of resource": (
        NOISE + "triton.runtime.errors.OutOfResources: out of resource: shared memory, "
        "Required: 131072, Hardware limit: 101376. Reducing block sizes or `num_stages` may help.\n",
        None),
}


test_wording_names_the_rule, test_neighbour_is_not_taken = wording_tests(CASES, NEIGHBOURS)
