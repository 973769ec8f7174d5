"""Tables and value formatting the `trustbench trb` commands print (rich, imported on use)."""

from __future__ import annotations

from collections.abc import Sequence
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


def fits_unfolded(
    width: int, fixed: Sequence[Sequence[str]], wrapped: Sequence[Sequence[str]]
) -> bool:
    """Whether a rich table fits `width` columns without folding a word, a figure mid-number.

    rich wraps a cell at its spaces, then folds a word longer than its column: `0.013` in a
    four-character column read `0.01` over `3`, and the TRB tables did so at 80 and at 120
    columns. Too wide, rich narrows the widest wrapping columns to one level, so each keeps at
    least an equal share of what the borders, padding and no-wrap columns leave; the table
    reads whole when that share holds the longest word of every wrapping column.

    Args:
        width: The console's width.
        fixed: Each no-wrap column's texts (header and cells).
        wrapped: Each wrapping column's texts (header and cells).
    """
    columns = len(fixed) + len(wrapped)
    rules_and_padding = columns + 1 + 2 * columns  # rich's default box, one space each side
    left = width - rules_and_padding - sum(max(map(len, texts), default=0) for texts in fixed)
    words = [len(word) for texts in wrapped for text in texts for word in text.split()]
    return left // max(len(wrapped), 1) >= max(words, default=0)


def _print_table_or_lines(
    console: Any, title: str, header: Sequence[str], rows: Sequence[Sequence[str]], names: int
) -> None:
    """`rows` as a table when it fits the terminal unfolded, else one line per row.

    The first `names` columns name the row (never wrapped: `trace-ai-full` and
    `trace-ai-ablation` both read `trace-…` once); the others are figures. A terminal too
    narrow for the table gets each row as `name (header name): header value; ...`, wrapped at
    its spaces, so no figure is cut.
    """
    from rich.markup import escape
    from rich.table import Table

    columns = [[head, *(row[i] for row in rows)] for i, head in enumerate(header)]
    if fits_unfolded(console.width, columns[:names], columns[names:]):
        table = Table(title=title)
        for index, head in enumerate(header):
            table.add_column(head, no_wrap=index < names)
        for row in rows:
            table.add_row(*(escape(cell) for cell in row))
        console.print(table)
        return
    console.print(f"{title}, one row a line:")
    for row in rows:
        others = ", ".join(
            f"{head} {name}" for head, name in zip(header[1:names], row[1:names], strict=True)
        )
        named = f"{row[0]} ({others})" if others else row[0]
        figures = "; ".join(
            f"{head} {cell}" for head, cell in zip(header[names:], row[names:], strict=True)
        )
        console.print(escape(f"{named}: {figures}"))


def _print_profile_record(record: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.markup import escape

    console = Console()
    trb = record["trb"]
    _print_head(console, record)
    axes_order = ("G", "ground", "attr", "viab", "nav", "trans")

    def cell(a: dict[str, Any] | None) -> str:
        if not a or a.get("value") is None:
            return "not run"
        bounds = "" if a.get("lower") is None else f" [{a['lower']:.3f}, {a['upper']:.3f}]"
        return f"{a['value']:.3f}{bounds}"

    _print_table_or_lines(
        console,
        "Profile vector, eval split (95% trace-clustered bootstrap)",
        ("candidate", "tier", *axes_order),
        [
            [name, str(trb["adapters"][name]["tier"]), *(cell(axes.get(a)) for a in axes_order)]
            for name, axes in trb["profile"].items()
        ],
        names=1,
    )
    rows = []
    slot_lines = []
    for b in trb["baselines"]:
        profile = b.get("profile") or {}
        rows.append([
            b["baseline"], str(b["candidate"] or "-"), b["adapter_tier"], b["status"],
            *[_fmt((profile.get(axis) or {}).get("value")) for axis in axes_order],
        ])  # fmt: skip
        slots = b.get("slot_accuracy") or {}
        if b["status"] == "run" and slots:
            slot_lines.append(
                f"slot accuracy beside G, {b['baseline']}: "
                + ", ".join(f"{k} {_fmt(v.get('value'))}" for k, v in slots.items())
            )
    _print_table_or_lines(
        console,
        "Baselines (spec §4), eval split (intervals in the report)",
        ("baseline", "candidate", "tier", "status", *axes_order),
        rows,
        names=2,
    )
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
