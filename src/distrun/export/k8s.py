"""``distrun export k8s``: a Kubeflow PyTorchJob (training operator, ``kubeflow.org/v1``).

One pod per node: a Master and ``nnodes - 1`` Workers, each running torchrun. The operator
sets ``PET_NNODES``, ``PET_NODE_RANK``, ``PET_NPROC_PER_NODE`` and ``MASTER_ADDR``/``PORT`` in
every pod, and torchrun reads them, so the command carries only what is the same everywhere.
The container must be named ``pytorch`` and its port ``pytorchjob-port`` (operator defaults).
"""

from __future__ import annotations

from typing import Any

import yaml

from distrun.accelerators.vendors import vendor_named
from distrun.export.common import rdzv_port, shared_args, summary
from distrun.export.options import ExportOptions, check_k8s_name
from distrun.model.plan import LaunchPlan


class Text(str):
    """A string written quoted: Kubernetes reads YAML 1.2, where ``3e-4`` or ``no`` unquoted
    would not be a string (and ``args`` must be strings)."""


# PyYAML's safe dumper plus Text (a subclass, so the shared SafeDumper stays as it is).
_Dumper: Any = type("_Dumper", (yaml.SafeDumper,), {})

_Dumper.add_representer(
    Text, lambda d, v: d.represent_scalar("tag:yaml.org,2002:str", str(v), style="'"))



def container(plan: LaunchPlan, options: ExportOptions) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "name": "pytorch",
        "image": Text(options.image),
        "command": [Text(a) for a in options.torchrun_argv()],
        "args": [Text(a) for a in shared_args(plan)],
        "ports": [{"name": "pytorchjob-port", "containerPort": rdzv_port(plan)}],
    }
    if plan.env:
        spec["env"] = [{"name": k, "value": Text(v)} for k, v in plan.env.items()]
    row = vendor_named(plan.vendor)
    resource = row.deploy.k8s_resource if row else None
    if resource:
        spec["resources"] = {"limits": {resource: plan.nproc_per_node}}
    return spec


def replica(count: int, plan: LaunchPlan, options: ExportOptions) -> dict[str, Any]:
    return {"replicas": count, "restartPolicy": "OnFailure",
            "template": {"spec": {"containers": [container(plan, options)]}}}


def manifest(plan: LaunchPlan, options: ExportOptions) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": check_k8s_name(options.job_name, "--job-name")}
    if options.namespace:
        metadata["namespace"] = check_k8s_name(options.namespace, "--namespace")
    replicas = {"Master": replica(1, plan, options)}
    if plan.nnodes > 1:
        replicas["Worker"] = replica(plan.nnodes - 1, plan, options)
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": metadata,
            "spec": {"nprocPerNode": Text(plan.nproc_per_node), "pytorchReplicaSpecs": replicas}}


def render(plan: LaunchPlan, options: ExportOptions) -> str:
    head = (f"# Made by 'distrun export k8s': {summary(plan)}.\n"
            "# Apply with: kubectl apply -f THIS_FILE (needs the Kubeflow training operator)\n")
    body: str = yaml.dump(manifest(plan, options), Dumper=_Dumper, sort_keys=False,
                          default_flow_style=False)
    return head + body
