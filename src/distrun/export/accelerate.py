"""``distrun export accelerate``: a config file that ``accelerate launch --config_file`` loads.

Keys are those of accelerate's ``ClusterConfig`` (``accelerate config`` writes the same ones);
``num_processes`` is the total over all machines, as accelerate counts it.
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
    if plan.nnodes > 1:
        cfg.update(main_process_ip=plan.master_addr, main_process_port=rdzv_port(plan),
                   rdzv_backend=plan.rdzv_backend, same_network=True)
    return cfg


def render(plan: LaunchPlan, options: ExportOptions) -> str:
    if options.machine_rank >= plan.nnodes:
        raise ExportError(f"--node-rank {options.machine_rank} for a plan of {plan.nnodes} "
                          "node(s)", f"0 to {plan.nnodes - 1}",
                          "pass the rank of the machine this file is for")
    head = [
        f"# Made by 'distrun export accelerate': {summary(plan)}.",
        f"# This file is for machine {options.machine_rank}; on machine K run:",
        "#   accelerate launch --config_file THIS_FILE --machine_rank K SCRIPT [ARGS]",
    ]
    body: str = yaml.safe_dump(config(plan, options), sort_keys=True, default_flow_style=False)
    return "\n".join(head) + "\n" + body
