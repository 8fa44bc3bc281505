"""``distrun doctor [--json]``: what is here and what is wrong with it.

Devices per vendor (with memory), the cluster environment, Python / torch / driver
versions, the collective backends this torch build has, libuv in its TCPStore, /dev/shm,
network interfaces; then findings with fixes. Exit 0, or 3 when a finding is an error.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import sys
from collections.abc import Mapping
from typing import Any

import psutil
from rich.table import Table
from rich.text import Text

from distrun import __version__, cluster
from distrun.accelerators.detect import Detection, detect
from distrun.accelerators.vendors import KNOWN_BACKENDS
from distrun.checks import frameworks
from distrun.checks.host import HostContext, host_findings, shm_bytes
from distrun.checks.preflight import checked_plan
from distrun.cli import exitcodes, render
from distrun.cli.args import OneLineParser
from distrun.cli.render import Console
from distrun.model.plan import Finding, Request


def software() -> dict[str, Any]:
    info: dict[str, Any] = {"distrun": __version__, "python": platform.python_version(),
                            "platform": platform.platform(), "torch": None}
    try:
        import torch
    except ImportError:
        return info
    info.update(torch=torch.__version__, torch_cuda=torch.version.cuda,
                torch_hip=getattr(torch.version, "hip", None))
    return info


def backends() -> dict[str, bool | None]:
    try:
        import torch.distributed as dist
    except ImportError:
        return dict.fromkeys(KNOWN_BACKENDS)
    return {b: bool(dist.is_available() and dist.is_backend_available(b)) for b in KNOWN_BACKENDS}


def interfaces() -> list[dict[str, Any]]:
    stats = psutil.net_if_stats()
    out = []
    for name, addrs in sorted(psutil.net_if_addrs().items()):
        ips = [a.address for a in addrs if a.family in (socket.AF_INET, socket.AF_INET6)]
        up = stats[name].isup if name in stats else None
        out.append({"name": name, "up": up, "addresses": ips})
    return out


def shm_total(path: str = "/dev/shm") -> int | None:
    try:
        return shm_bytes(path)
    except OSError:
        return None


def cluster_info(env: Mapping[str, str]) -> dict[str, Any]:
    try:
        facts = cluster.detect(env).facts()
    except cluster.ClusterEnvError as err:
        return {"environment": "invalid", "error": err.one_line()}
    return dict(vars(facts))


def probe_findings(found: Detection) -> list[Finding]:
    out = [Finding(id=f"probe-{r.vendor.value}", severity="warning",
                   message=f"{r.source or r.vendor.value} failed: {r.detail}",
                   fix="check the vendor driver and tool installation")
           for r in found.results if r.status == "error"]
    if not found.node.is_accelerated:
        out.append(Finding(id="cpu-only", severity="info",
                           message="no accelerator found: jobs run on CPU with gloo"))
    return out


def gather(env: Mapping[str, str]) -> dict[str, Any]:
    found = detect(env)
    plan = checked_plan(Request(script="train.py"), (found.node,))
    installed = frameworks.versions()
    findings = [*plan.findings, *probe_findings(found),
                *host_findings(plan, HostContext(0, env)),
                *frameworks.findings(installed, found.node, plan.nodes[0].nproc, env)]
    return {
        "host": socket.gethostname(),
        "devices": {r.vendor.value: {"status": r.status, "source": r.source, "detail": r.detail,
                                     "driver": r.driver, "devices": [vars(d) for d in r.devices]}
                    for r in found.results},
        "node": {"vendor": found.node.vendor.value, "count": found.node.count,
                 "visible": [d.index for d in found.node.devices], "cpus": found.node.cpus,
                 "memory_bytes": found.node.memory_bytes},
        "cluster": cluster_info(env),
        "software": software(),
        "frameworks": installed,
        "backends": backends(),
        "libuv": not any(f.id == "libuv-missing" for f in findings),
        "shm_bytes": shm_total(),
        "interfaces": interfaces(),
        "findings": [f.model_dump() for f in findings],
    }


def show(console: Console, data: dict[str, Any]) -> None:
    table = Table("vendor", "status", "devices", "memory", "source / detail", box=None)
    for vendor, r in data["devices"].items():
        mem = sum(d["memory_bytes"] or 0 for d in r["devices"])
        names = ", ".join(sorted({d["name"] for d in r["devices"]}))
        table.add_row(vendor, r["status"], Text(f"{len(r['devices'])} {names}".strip()),
                      f"{mem / 2**30:.0f} GiB" if mem else "-",
                      Text(str(r["source"] or r["detail"] or "")))
    console.print(table)
    sw, cl = data["software"], data["cluster"]
    console.print(f"software: python {sw['python']}, torch {sw['torch'] or 'not installed'}, "
                  f"distrun {sw['distrun']}", highlight=False, markup=False)
    fws = [f"{name} {v}" for name, v in data["frameworks"].items() if v]
    console.print(f"frameworks: {', '.join(fws) or 'none of ' + ', '.join(data['frameworks'])}",
                  highlight=False, markup=False)
    console.print(f"cluster: {cl['environment']}", highlight=False, markup=False)
    have = [b for b, ok in data["backends"].items() if ok]
    console.print(f"backends in this torch build: {', '.join(have) or 'none'}; "
                  f"TCPStore libuv: {'yes' if data['libuv'] else 'no'}", highlight=False)
    shm = data["shm_bytes"]
    console.print(f"/dev/shm: {shm / 2**30:.1f} GiB" if shm else "/dev/shm: not found")
    nics = [f"{i['name']} {','.join(i['addresses'])}" for i in data["interfaces"] if i["up"]]
    console.print(f"interfaces up: {'; '.join(nics)}", highlight=False, markup=False)
    render.findings(console, [Finding(**f) for f in data["findings"]])


def main(argv: list[str]) -> int:
    parser = OneLineParser(prog="distrun doctor", description=__doc__)
    parser.add_argument("--json", action="store_true", help="machine output on stdout")
    ns = parser.parse_args(argv)
    data = gather(os.environ)
    if ns.json:
        print(json.dumps(data, indent=2, default=str))
    else:
        show(Console(soft_wrap=True), data)
    errors = [f for f in data["findings"] if f["severity"] == "error"]
    return exitcodes.PREFLIGHT if errors else exitcodes.OK


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
