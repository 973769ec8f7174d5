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


def print_audit_table(title: str, columns: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    """Print one audit's table of `rows` (cells already formatted; long text folds)."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for column in columns:
        table.add_column(column, overflow="fold")
    for cells in rows:
        table.add_row(*cells)
    Console().print(table)


def verdict_cell(passed: bool, good: str, bad: str) -> str:
    """An audit row's result: `good` in green when it passed, else `bad` in bold red."""
    return f"[green]{good}[/]" if passed else f"[bold red]{bad}[/]"


def _print_goodhart(rows: list[dict[str, Any]]) -> None:
    from rich.markup import escape

    print_audit_table(
        "TRB Goodhart audit (cheating adapters vs their expected signature)",
        ("adapter", "signature that must hold", "measured", "result"),
        [
            (escape(r["adapter"]), escape(r["signature"]), escape(r["measured"]),
             verdict_cell(r["passed"], "holds", "FAILS"))
            for r in rows
        ],
    )  # fmt: skip


def _print_audit(rows: list[dict[str, Any]]) -> None:
    print_audit_table(
        "TRB harness audit (oracle adapters vs closed form)",
        ("oracle", "metric", "expected", "measured", "deviation", "result"),
        [
            (r["oracle"], r["metric"], f"{r['expected']:.6f}", _fmt(r["measured"], 6),
             _fmt(r["deviation"], 2) if r["deviation"] is None else f"{r['deviation']:.1e}",
             verdict_cell(r["passed"], "pass", "FAIL"))
            for r in rows
        ],
    )  # fmt: skip


def format_failure_lines(trb: dict[str, Any]) -> list[str]:
    """Each candidate's format-failure line (its verdict's first reason when it has one)."""
    out = []
    for name, verdict in (trb.get("verdicts") or {}).items():
        first = (verdict.get("reasons") or [""])[0]
        if first.startswith("format failure"):
            out.append(f"{name}: {first}")
    return out


def _print_head(console: Any, record: dict[str, Any]) -> None:
    """Format failures first (they qualify every figure), then the version and first caveat."""
    from rich.markup import escape

    trb = record["trb"]
    for line in format_failure_lines(trb):
        console.print(f"[bold red]{escape(line)}[/]")
    console.print(f"[bold]{trb['version']}[/]  corpus sha256 {trb['corpus']['sha256']}")
    for line in record["qualifications"][:1]:
        console.print(f"[yellow]{escape(line)}[/]")


def _print_profile_record(record: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console()
    trb = record["trb"]
    _print_head(console, record)
    table = Table(title="Profile vector, eval split (95% trace-clustered bootstrap)")
    axes_order = ("G", "ground", "attr", "viab", "nav", "trans")
    # Names are never cut (`trace-ai-full` and `trace-ai-ablation` both read `trace-…` once):
    # the name columns keep their full width and the figure columns wrap to fit the terminal.
    names = max((len(name) for name in trb["profile"]), default=9)
    table.add_column("candidate", no_wrap=True, min_width=names)
    for column in ("tier", *axes_order):
        table.add_column(column, overflow="fold")

    def cell(a: dict[str, Any] | None) -> str:
        if not a or a.get("value") is None:
            return "not run"
        bounds = "" if a.get("lower") is None else f" [{a['lower']:.3f}, {a['upper']:.3f}]"
        return f"{a['value']:.3f}{bounds}"

    for name, axes in trb["profile"].items():
        cells = [cell(axes.get(axis)) for axis in axes_order]
        table.add_row(escape(name), str(trb["adapters"][name]["tier"]), *cells)
    console.print(table)
    baselines = Table(title="Baselines (spec §4), eval split (intervals in the report)")
    baselines.add_column("baseline", no_wrap=True)
    candidates = max((len(str(b["candidate"] or "-")) for b in trb["baselines"]), default=9)
    baselines.add_column("candidate", no_wrap=True, min_width=candidates)
    for column in ("tier", "status", *axes_order):
        baselines.add_column(column, overflow="fold")
    slot_lines = []
    for b in trb["baselines"]:
        profile = b.get("profile") or {}
        baselines.add_row(
            b["baseline"], escape(str(b["candidate"] or "-")), b["adapter_tier"], b["status"],
            *[_fmt((profile.get(axis) or {}).get("value")) for axis in axes_order],
        )  # fmt: skip
        slots = b.get("slot_accuracy") or {}
        if b["status"] == "run" and slots:
            slot_lines.append(
                f"slot accuracy beside G, {b['baseline']}: "
                + ", ".join(f"{k} {_fmt(v.get('value'))}" for k, v in slots.items())
            )
    console.print(baselines)
    for line in slot_lines:
        console.print(escape(line))
    gap = trb["governance_gap"]
    if gap.get("status") == "run":
        boot, test = gap["bootstrap"], gap["sign_flip_test"]
        console.print(
            f"Delta_gov = G({gap['full']}) - G({gap['ablation']}) = {gap['estimate']:.3f}, 95% CI "
            f"[{_fmt(boot['lower'])}, {_fmt(boot['upper'])}] (trace-clustered bootstrap, seed "
            f"{boot['seed']}, {boot['resamples']} resamples, {gap['paired_traces']} traces); "
            f"sign-flip p = {test['p_value']:.4g} ({test['method']})"
        )
    else:
        console.print(f"Delta_gov: {gap.get('status', 'not run')} ({gap.get('reason')})")
    for flag in trb["flags"]:
        console.print(f"flag: {escape(flag)}")
