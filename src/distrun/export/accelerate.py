"""``distrun export accelerate``: a config file that ``accelerate launch --config_file`` loads.

Keys are those of accelerate's ``ClusterConfig`` (``accelerate config`` writes the same ones);
``num_processes`` is the total over all machines, as accelerate counts it.

Several CPU processes: ``accelerate launch`` starts them only through mpirun (its
``simple_launcher`` with ``mpirun_config.mpirun_hostfile``); with ``distributed_type: MULTI_CPU``
and no hostfile it starts ONE process per machine (accelerate/commands/launch.py, 1.x). So a
multi-process CPU plan gets an mpirun hostfile (``host slots=N``, the format that
``distrun export deepspeed`` writes), and mpirun on machine 0 starts every process.
"""

from __future__ import annotations

from typing import Any

import yaml

from distrun.accelerators.vendors import VENDORS
from distrun.export.common import ExportError, rdzv_port, summary
from distrun.export.options import ExportOptions
from distrun.model.plan import LaunchPlan

# torch device type -> accelerate's DistributedType for more than one process (vendor table).
DISTRIBUTED_TYPE = {v.torch_device: v.deploy.accelerate_type for v in VENDORS.values()
                    if v.deploy.accelerate_type}


def distributed_type(plan: LaunchPlan) -> str:
    if plan.world_size == 1:
        return "NO"
    kind = DISTRIBUTED_TYPE.get(plan.device_type)
    if kind is None:
        known = ", ".join(sorted(DISTRIBUTED_TYPE))
        raise ExportError(f"accelerate has no multi-process mode for {plan.vendor} "
                          f"({plan.device_type} devices)", f"a device type among {known}",
                          "export another format (torchrun: 'distrun export shell')")
    return kind


def config(plan: LaunchPlan, options: ExportOptions) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "compute_environment": "LOCAL_MACHINE",
        "distributed_type": distributed_type(plan),
        "num_machines": plan.nnodes,
        "num_processes": plan.world_size,
        "machine_rank": options.machine_rank,
        "mixed_precision": "no",
        "use_cpu": plan.device_type == "cpu",
        "debug": False,
    }
    if plan.device_type != "cpu":
        cfg["gpu_ids"] = "all"
    if plan.device_type == "cpu" and plan.world_size > 1:  # MASTER_* of every mpirun rank
        cfg.update(mpirun_config={"mpirun_hostfile": options.mpirun_hostfile},
                   main_process_ip=plan.master_addr, main_process_port=rdzv_port(plan))
    if plan.nnodes > 1:
        cfg.update(main_process_ip=plan.master_addr, main_process_port=rdzv_port(plan),
                   rdzv_backend=plan.rdzv_backend, same_network=True)
    return cfg


def how_to_run(plan: LaunchPlan, options: ExportOptions) -> list[str]:
    if plan.device_type == "cpu" and plan.world_size > 1:
        return [f"# accelerate starts CPU processes through mpirun, from the hostfile "
                f"{options.mpirun_hostfile!r}",
                "# ('host slots=N' per machine: 'distrun export deepspeed' writes it). On machine "
                "0 only, run:",
                "#   accelerate launch --config_file THIS_FILE SCRIPT [ARGS]"]
    return [f"# This file is for machine {options.machine_rank}; on machine K run:",
            "#   accelerate launch --config_file THIS_FILE --machine_rank K SCRIPT [ARGS]"]


def render(plan: LaunchPlan, options: ExportOptions) -> str:
    if options.machine_rank >= plan.nnodes:
        raise ExportError(f"--node-rank {options.machine_rank} for a plan of {plan.nnodes} "
                          "node(s)", f"0 to {plan.nnodes - 1}",
                          "pass the rank of the machine this file is for")
    head = [f"# Made by 'distrun export accelerate': {summary(plan)}.", *how_to_run(plan, options)]
    body: str = yaml.safe_dump(config(plan, options), sort_keys=True, default_flow_style=False)
    return "\n".join(head) + "\n" + body
