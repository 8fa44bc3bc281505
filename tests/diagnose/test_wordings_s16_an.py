"""Wordings added in session 16 by helper an (issue 12): a checkpoint resumed with another
parallel layout, from the printing sources (Megatron-LM checkpoint folders, DeepSpeed's
checkpoint reshaping and universal checkpoints).

Each case is a short log as a user would paste it; the test asserts the verdict they read.
"""

from __future__ import annotations

from tests.diagnose.wording import NOISE, Case, Neighbour, wording_tests

LAYOUT = "checkpoint-layout-mismatch"

CASES: dict[str, Case] = {
    # Megatron-LM checkpointing.py get_checkpoint_name: mp_rank_{tp:02d}_{pp:03d}; pipeline rank 1's
    # folder is missing: the checkpoint was saved with one pipeline stage
    "megatron pipeline rank folder missing": (
        NOISE + "FileNotFoundError: [Errno 2] No such file or directory: "
        "'/ckpt/iter_0001000/mp_rank_00_001/model_optim_rng.pt'\n", LAYOUT, "high", None),
    # (expert-parallel size 4, pipeline size 1: mp_rank_{tp:02d}_{ep:03d})
    "megatron expert rank folder missing": (
        NOISE + "FileNotFoundError: [Errno 2] No such file or directory: "
        "'/ckpt/iter_0000500/mp_rank_00_003/model_optim_rng.pt'\n", LAYOUT, "high", None),
    # DeepSpeed checkpoint/reshape_3d_utils.py can_reshape
    "deepspeed expansion reshape": (
        NOISE + "AssertionError: Expansion reshape not supported - TP: 1 ---> 2\n",
        LAYOUT, "high", None),
    "deepspeed expansion reshape, two dimensions": (
        NOISE + "AssertionError: Expansion reshape not supported - PP: 2 ---> 4,"
        "Expansion reshape not supported - DP: 4 ---> 8\n", LAYOUT, "high", None),
    # DeepSpeed checkpoint/universal_checkpoint.py load_hp_checkpoint_state
    "deepspeed universal checkpoint tp slices": (
        NOISE + "AssertionError: Loading /ckpt/zero/model.layers.0.mlp.weight/fp32.pt full param "
        "numel 4096 != tensor slice numel 1024 * tp_world_size 2\n", LAYOUT, "high", None),
    # DeepSpeed checkpoint/reshape_3d_utils.py is_valid: an index past the checkpoint's degree
    # (also a caller's bug, hence weak)
    "deepspeed 3d indexing error": (
        NOISE + "AssertionError: DP indexing error: index 4 >= degree 4\n", LAYOUT, "low", None),
    # a missing tensor-parallel rank 0, pipeline rank 0 folder is a wrong path as often as a layout:
    # it stays the weak wording, never the strong one
    "megatron rank 0 folder missing": (
        NOISE + "FileNotFoundError: [Errno 2] No such file or directory: "
        "'checkpoints/gpt2_345m/iter_0006000/mp_rank_00/model_optim_rng.pt'\n", LAYOUT, "low", None),
    # DeepSpeed's own ZeRO file names (mp_rank_00 then _optim_states) are not Megatron's PP folders
    "deepspeed zero rank 0 file missing": (
        "FileNotFoundError: [Errno 2] No such file or directory: "
        "'/ckpt/global_step100/zero_pp_rank_0_mp_rank_00_optim_states.pt'\n", LAYOUT, "low", None),
}

NEIGHBOURS: dict[str, Neighbour] = {
    # a tensor shape assertion of the model itself is no checkpoint layout
    "a model's numel assertion": (
        NOISE + "AssertionError: param numel 4096 != expected numel 1024\n", None),
}


test_wording_names_the_rule, test_neighbour_is_not_taken = wording_tests(CASES, NEIGHBOURS)
