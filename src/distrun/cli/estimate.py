"""``distrun estimate (--params N | --model FILE[:FACTORY]) [--optimizer ..] [--precision ..]
[--sharding ..] [--inventory NxDxMODEL | --nnodes N --nproc-per-node D] [--json]``.

Model states per device (parameters, gradients, optimizer states) and whether they fit each
device. Exit status 0; 2 on bad input; 3 when a device of known memory cannot hold them.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import asdict, replace

from distrun.accelerators.inventory import NodeInventory, parse_declared
from distrun.cli import exitcodes
from distrun.cli.args import OneLineParser, attached
from distrun.errors import UsageError
from distrun.estimate.fit import DeviceFit, fits
from distrun.estimate.preflight import memory_findings
from distrun.estimate.states import (
    OPTIMIZERS,
    PRECISIONS,
    SHARDINGS,
    ModelStates,
    Setup,
    model_states,
    parse_bytes,
    parse_count,
)
from distrun.model.plan import Finding

GIB = 2**30


def make_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="distrun estimate", description=__doc__.split("\n\n")[1])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--params", help="parameter count: 7B, 350M, 1.3e9")
    src.add_argument("--model", help="FILE.py[:FACTORY] or MODULE[:FACTORY] (built on meta)")
    p.add_argument("--optimizer", default="adamw", choices=tuple(OPTIMIZERS))
    p.add_argument("--precision", default="bf16", choices=PRECISIONS)
    p.add_argument("--sharding", default="ddp", choices=SHARDINGS)
    p.add_argument("--inventory", help="NODESxDEVICESxMODEL, e.g. 2x8xH100-80GB")
    p.add_argument("--nnodes", type=int, default=1)
    p.add_argument("--nproc-per-node", type=int, default=1)
    p.add_argument("--largest-layer", help="parameters of the largest layer (ZeRO-3 / FSDP)")
    p.add_argument("--batch-size", type=int, help="per-device batch size (with --activation-bytes)")
    p.add_argument("--activation-bytes",
                   help="activation memory per sample, e.g. 24MiB (ctx.estimate_memory's slope)")
    p.add_argument("--here", action="store_true",
                   help="also check this node's devices: free memory, other processes")
    p.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    return p


def setup_from(ns: argparse.Namespace, nodes: tuple[NodeInventory, ...]) -> Setup:
    per_node = nodes[0].count if nodes else ns.nproc_per_node
    world = sum(n.count for n in nodes) if nodes else ns.nnodes * ns.nproc_per_node
    largest = parse_count(ns.largest_layer) if ns.largest_layer else 0
    if ns.params:
        return Setup(parse_count(ns.params), ns.optimizer, ns.precision, ns.sharding, world,
                     per_node, largest)
    from distrun.cli.modelcount import count

    counted = count(ns.model)
    return Setup(counted.params, ns.optimizer, ns.precision, ns.sharding, world, per_node,
                 largest or counted.largest_layer, counted.adafactor_state)


def main(argv: list[str]) -> int:
    parser = make_parser()
    ns = parser.parse_args(attached(parser, argv))
    nodes = parse_declared(ns.inventory) if ns.inventory else ()
    if not nodes and (ns.nnodes < 1 or ns.nproc_per_node < 1):
        raise UsageError(f"--nnodes {ns.nnodes} --nproc-per-node {ns.nproc_per_node}",
                         "at least 1 each", "pass e.g. --nnodes 1 --nproc-per-node 8")
    setup = setup_from(ns, nodes)
    states = with_activations(model_states(setup), ns.batch_size, ns.activation_bytes)
    rows = fits(states, nodes)
    found = here_findings(states.total, setup, nodes) if ns.here else []
    if ns.json:
        out = as_json(setup, states, rows)
        out["findings"] = [f.model_dump() for f in found]
        print(json.dumps(out, indent=2))
    else:
        print(human(setup, states, rows))
        for f in found:
            print(f"  {f.severity}: {f.message}" + (f" (fix: {f.fix})" if f.fix else ""))
    failed = any(r.fits is False for r in rows) or any(f.severity == "error" for f in found)
    return exitcodes.PREFLIGHT if failed else exitcodes.OK


def here_findings(need: int, setup: Setup, declared: tuple[NodeInventory, ...]
                  ) -> list[Finding]:
    """This node's devices through the monitor's samplers (NVML or the vendor's tool)."""
    from distrun.accelerators.detect import detect
    from distrun.cli.memcheck import device_memory

    node = detect().node
    if not node.is_accelerated:
        on_cpu = not declared or not declared[0].is_accelerated
        return [no_accelerator(need, setup.per_node if on_cpu else None)]
    what = f"{setup.params / 1e9:.2f}B parameters ({setup.optimizer}, {setup.sharding})"
    return memory_findings(device_memory(node.vendor.value), need, what)


def no_accelerator(need: int, per_node: int | None) -> Finding:
    """--here on a CPU-only host: no device to compare with, said plainly; for a CPU job
    (``per_node`` processes), what this host's memory holds."""
    from distrun.cli.memcheck import host_memory

    free = None if per_node is None else host_memory()[0].free_bytes
    host = "" if free is None or per_node is None else (
        f"; on CPU the {per_node} process(es) per node share this host's "
        f"{free / GIB:.1f} GiB of free memory, and need {need * per_node / GIB:.1f} GiB")
    return Finding(id="no-accelerator", severity="info", status="unknown",
                   message="no accelerator on this host: the per-device memory check of --here "
                           f"is skipped{host}",
                   fix="run 'distrun estimate --here' on a node with the job's devices")


def with_activations(states: ModelStates, batch: int | None, per_sample: str | None
                     ) -> ModelStates:
    if batch is None and per_sample is None:
        return states
    if batch is None or per_sample is None or batch < 1:
        raise UsageError(f"--batch-size {batch} --activation-bytes {per_sample}",
                         "both, with a batch size >= 1",
                         "pass e.g. --batch-size 16 --activation-bytes 24MiB")
    return replace(states, activations=batch * parse_bytes(per_sample))


def as_json(setup: Setup, states: ModelStates, rows: tuple[DeviceFit, ...]) -> dict[str, object]:
    return {"setup": asdict(setup),
            "per_device_bytes": {"params": states.params, "grads": states.grads,
                                 "optimizer": states.optimizer, "working": states.working,
                                 "activations": states.activations, "total": states.total},
            "shard_group": states.shard_group,
            "devices": [asdict(r) for r in rows]}


def human(setup: Setup, states: ModelStates, rows: tuple[DeviceFit, ...]) -> str:
    lines = [f"{setup.params / 1e6:,.0f}M parameters, {setup.optimizer}, {setup.precision}, "
             f"{setup.sharding} over {setup.world_size} devices ({setup.per_node} per node)",
             "per device, model states and activations:" if states.activations else
             "model states per device (activations not included):"]
    for label, value in (("parameters", states.params), ("gradients", states.grads),
                         ("optimizer states", states.optimizer),
                         ("gathered layer", states.working),
                         *((("activations", states.activations),) if states.activations else ()),
                         ("total", states.total)):
        lines.append(f"  {label:<17} {value / GIB:10.2f} GiB")
    for (name, mem, fit), n in Counter((r.name, r.memory_bytes, r.fits) for r in rows).items():
        size = "unknown memory" if mem is None else f"{mem / GIB:.0f} GiB"
        verdict = {True: "fits", False: "does NOT fit", None: "unknown"}[fit]
        lines.append(f"  {n} x {name} ({size}): {verdict}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
