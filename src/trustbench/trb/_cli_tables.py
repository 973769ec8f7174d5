"""Tables and value formatting the `trustbench trb` commands print (rich, imported on use)."""

from __future__ import annotations

from typing import Any


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "not run"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _interval(fig: dict[str, Any]) -> str:
    if fig.get("low") is None:
        return "—"
    return f"[{fig['low']:.3f}, {fig['high']:.3f}]"


def _print_goodhart(rows: list[dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="TRB Goodhart audit (cheating adapters vs their expected signature)")
    for column in ("adapter", "signature that must hold", "measured", "result"):
        table.add_column(column, overflow="fold")
    for r in rows:
        table.add_row(
            escape(r["adapter"]), escape(r["signature"]), escape(r["measured"]),
            "[green]holds[/]" if r["passed"] else "[bold red]FAILS[/]",
        )  # fmt: skip
    Console().print(table)


def _print_audit(rows: list[dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="TRB harness audit (oracle adapters vs closed form)")
    for column in ("oracle", "metric", "expected", "measured", "deviation", "result"):
        table.add_column(column, overflow="fold")
    for r in rows:
        table.add_row(
            r["oracle"],
            r["metric"],
            f"{r['expected']:.6f}",
            _fmt(r["measured"], 6),
            _fmt(r["deviation"], 2) if r["deviation"] is None else f"{r['deviation']:.1e}",
            "[green]pass[/]" if r["passed"] else "[bold red]FAIL[/]",
        )
    Console().print(table)
