"""Human rendering shared by the subcommands (rich, to the console given).

Every command's console is :class:`Console` from here, never rich's own: on a closed stdout
(``distrun doctor | head -0``) rich ends the program with status 1; this one raises
BrokenPipeError, which ``distrun.cli.main`` turns into a quiet exit 141 like every other write.
"""

from __future__ import annotations

from rich import console as rich_console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from distrun.model.plan import Finding, LaunchPlan


class Console(rich_console.Console):
    """rich's console, but a reader that left is a BrokenPipeError (exit 141), not exit 1."""

    def on_broken_pipe(self) -> None:
        self.quiet = True  # nothing more to write: what is still buffered is dropped
        raise BrokenPipeError("the reader of the output left")


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
