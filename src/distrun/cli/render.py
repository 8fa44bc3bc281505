"""Human rendering shared by the subcommands (rich, to the console given)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from distrun.model.plan import Finding, LaunchPlan

STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan", "ok": "green"}


def findings(console: Console, items: list[Finding]) -> None:
    for f in items:
        tag = "unknown" if f.status == "unknown" else f.severity
        console.print(f"[{STYLE[f.severity]}]{tag:>7}[/] {escape(f'[{f.id}]')} {escape(f.message)}",
                      highlight=False)
        if f.fix:
            console.print(f"        fix: {escape(f.fix)}", highlight=False)


def ranks_text(ranks: list[int]) -> str:
    if not ranks:
        return "-"
    return f"{ranks[0]}-{ranks[-1]}" if len(ranks) > 1 else str(ranks[0])


def plan(console: Console, p: LaunchPlan) -> None:
    console.print(
        f"world size {p.world_size} = {p.nnodes} node(s) x {p.nproc_per_node} process(es); "
        f"backend {p.backend}; device {p.device_type}; "
        f"master {p.master_addr}:{p.master_port or '(port picked at start)'} ({p.rdzv_backend})",
        highlight=False, markup=False,
    )
    table = Table("node", "host", "procs", "ranks", "visible devices", box=None)
    for n in p.nodes[:16]:
        table.add_row(str(n.node_rank), Text(n.host), str(n.nproc), ranks_text(n.ranks),
                      ",".join(map(str, n.visible_devices)) or "-")
    console.print(table)
    if len(p.nodes) > 16:
        console.print(f"... and {len(p.nodes) - 16} more nodes")
    console.print("commands:")
    for cmd in p.commands[:4]:
        console.print(f"  {cmd}", highlight=False, soft_wrap=True, markup=False)
    if len(p.commands) > 4:
        console.print(f"  ... one per node, {len(p.commands)} in all (--json lists every one)")
    findings(console, p.findings)
