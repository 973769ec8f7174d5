"""Render a `ReportPage` to one self-contained HTML page (inline CSS, SVG and script).

The template is package data (`templates/report.html.j2`) rendered with autoescaping on, so
every string from a record (case ids, model names, replies, reasons) is escaped; only the SVG
produced by `_plots` is inserted as markup. The only script is the inline table filter, and the
page reads completely without it. The page opens on one verdict per subject, instruments apart;
per-configuration detail is folded into `<details>` elements.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from markupsafe import Markup

from trustbench.core._outputs import write_atomically
from trustbench.core.figures import Figure, FigureKind, Interval
from trustbench.core.gates import GateResult
from trustbench.core.report._verdict import (
    Block,
    ConfusionBlock,
    FiguresBlock,
    ForestBlock,
    ProfileBlock,
    ReportPage,
    TableBlock,
    TextBlock,
    Verdict,
    gate_names,
    release_blocked,
    report_exit_code,
    subject_verdicts,
)

if TYPE_CHECKING:
    from jinja2 import Environment

    from trustbench.core.report._system import ConfigurationUnderTest, SystemUnderTest


# ------------------------------------------------------------------------------------------------
# Text formatting of figures and intervals for the report (also usable in CLI output).

_METHOD_NAMES = {
    "clopper_pearson": "Clopper-Pearson exact",
    "wilson": "Wilson score",
    "cluster_robust_t": "cluster-robust t",
    "cluster_bootstrap_percentile": "cluster bootstrap (percentile)",
    "sign_flip_exact": "sign-flip exact",
    "sign_flip_monte_carlo": "sign-flip Monte Carlo",
    "kappa_asymptotic_normal": "asymptotic normal",
}


def format_value(value: float | None, kind: FigureKind) -> str:
    """A rate as a percentage with two decimals, anything else to four significant digits."""
    if value is None:
        return "n/a"
    if kind == "rate":
        return f"{value * 100:.2f}%"
    return f"{value:.4g}"


def format_interval(interval: Interval, kind: FigureKind) -> str:
    """One line: level, sidedness, method, bounds, and seed/resamples/clusters where relevant."""
    level = f"{interval.confidence * 100:g}%"
    method = _METHOD_NAMES.get(interval.method, interval.method)
    if interval.not_computable:
        return f"{level} {method}: not computable ({interval.not_computable})"
    if interval.sidedness == "upper":
        bounds = f"upper bound {format_value(interval.upper, kind)}"
        if interval.upper is None:
            bounds = "upper bound unbounded"
    elif interval.sidedness == "lower":
        bounds = f"lower bound {format_value(interval.lower, kind)}"
        if interval.lower is None:
            bounds = "lower bound unbounded"
    else:
        low = "-inf" if interval.lower is None else format_value(interval.lower, kind)
        high = "+inf" if interval.upper is None else format_value(interval.upper, kind)
        bounds = f"[{low}, {high}]"
    extras = []
    if interval.groups is not None:
        extras.append(f"G={interval.groups}")
    if interval.seed is not None:
        extras.append(f"seed {interval.seed}")
    if interval.resamples is not None:
        extras.append(f"{interval.resamples:,} resamples")
    tail = f" ({', '.join(extras)})" if extras else ""
    note = f"; {interval.note}" if interval.note else ""
    return f"{level} {method}: {bounds}{tail}{note}"


def format_estimate(figure: Figure) -> str:
    """The estimate cell: the value, "not run", "n/a" or "not evaluable"."""
    if figure.status == "not_run":
        return "not run"
    if figure.status == "not_applicable":
        return "n/a"
    if figure.status == "not_evaluable":
        return "not evaluable"
    return format_value(figure.estimate, figure.kind)


def format_counts(figure: Figure) -> str:
    """The numerator/denominator cell, e.g. "3 / 20"; empty when not run."""
    if figure.status == "not_run" or figure.denominator is None:
        return ""

    def number(value: float | int | None) -> str:
        if value is None:
            return "?"
        return f"{value:g}" if isinstance(value, float) else f"{value:,}"

    return f"{number(figure.numerator)} / {number(figure.denominator)}"


# Declared gate interval per metric: (method, confidence, sidedness as stored on the Interval).
_GateIntervals = dict[str, tuple[str, float, str]]

_GATE_ORDER = {"failed": 0, "not_evaluable": 1, "passed": 2}


@lru_cache(maxsize=1)
def _environment() -> Environment:
    from jinja2 import Environment, PackageLoader, StrictUndefined  # on first render

    environment = Environment(
        loader=PackageLoader("trustbench.core.report", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    environment.filters.update(
        estimate=format_estimate,
        counts=format_counts,
        interval=format_interval,
        value=format_value,
    )
    return environment


def _gate_intervals(gates: list[GateResult]) -> _GateIntervals:
    """Metric -> the interval its gate compares (the first bound gate declared on it)."""
    found: _GateIntervals = {}
    for result in gates:
        spec = result.spec
        if spec.bound == "estimate" or spec.metric in found:
            continue
        assert spec.interval_method is not None and spec.confidence is not None  # validator
        sided = "two_sided" if spec.sidedness == "two_sided" else spec.bound
        found[spec.metric] = (spec.interval_method, spec.confidence, sided)
    return found


def _primary(figure: Figure, declared: _GateIntervals) -> Interval | None:
    """The interval a cell shows first.

    The one a gate compares, else two-sided Clopper-Pearson (95% when there are several levels),
    else the first one recorded.
    """
    if figure.name in declared:
        found = figure.interval(*declared[figure.name])  # type: ignore[arg-type]
        if found is not None:
            return found
    exact = [
        i for i in figure.intervals if i.method == "clopper_pearson" and i.sidedness == "two_sided"
    ]
    exact.sort(key=lambda i: abs(i.confidence - 0.95))
    return (exact or figure.intervals or [None])[0]


def _figure_row(figure: Figure, declared: _GateIntervals | None = None) -> dict[str, Any]:
    primary = _primary(figure, declared or {})
    return {
        "figure": figure,
        "estimate": format_estimate(figure),
        "counts": format_counts(figure),
        "primary": format_interval(primary, figure.kind) if primary else None,
        "gated": primary is not None and figure.name in (declared or {}),
        "others": [format_interval(i, figure.kind) for i in figure.intervals if i is not primary],
    }


_UNMEASURED = {"not_evaluable": "not_evaluable"}
"""A figure status that is not "measured" -> the row's status in a forest plot (amber for not
evaluable; not run and not applicable rows stay uncoloured)."""


def _forest(
    block: ForestBlock, salt: str, gates: list[GateResult], unevaluable: set[str]
) -> dict[str, Any]:
    from trustbench.core.report import _plots  # matplotlib: loaded when a plot is drawn

    labels, estimates, pairs, rows = [], [], [], []
    # Draw the interval the gate on this metric compares when there is one, so a row's colour
    # (its gate outcome) and the bar against the threshold line always agree.
    declared = _gate_intervals(gates)
    method, confidence, sidedness = declared.get(
        block.metric or "", (block.interval_method, block.confidence, block.sidedness)
    )
    drawn = f"{confidence * 100:g}% {sidedness.replace('_', '-')} {method}"
    if block.metric in declared:
        drawn += " (the interval the gate compares)"
    figures = [
        f.model_copy(update={"status": "not_evaluable"})
        if f.name in unevaluable and f.status == "measured"
        else f
        for f in block.figures
    ]
    for figure in figures:
        interval = figure.interval(method, confidence, sidedness)  # type: ignore[arg-type]
        usable = interval is not None and not interval.not_computable
        suffix = {
            "not_run": " (not run)",
            "not_applicable": " (n/a)",
            "not_evaluable": " (not evaluable)",
        }.get(figure.status, "")
        labels.append(figure.name + suffix)
        # Only a measured figure is drawn: a withheld (not evaluable) estimate is a placeholder,
        # and a mark at 0 would read as the best possible rate.
        measured = figure.status == "measured"
        estimates.append(figure.estimate if measured else None)
        pairs.append((interval.lower, interval.upper) if usable and interval and measured else None)
        rows.append(_figure_row(figure))
    # Rows are subjects; the gates on `block.metric` give each row its pass/fail colour and the
    # thresholds to draw (one line per distinct threshold declared on the metric).
    # Rows named "<subject>: <metric>" (several metrics in one plot) take that gate's colour.
    # With several gates on one row the worst outcome wins (failures are applied last), and a
    # blocking gate's outcome wins over an informational one's (those are applied first).
    worst_last = sorted(gates, key=lambda g: (g.spec.blocking, -_GATE_ORDER[g.status]))
    mine = [g for g in worst_last if block.metric and g.spec.metric == block.metric]
    thresholds = sorted({g.spec.threshold for g in mine})
    outcome = {g.subject: g.status for g in mine if g.subject}
    outcome |= {f"{g.subject}: {g.spec.metric}": g.status for g in worst_last if g.subject}
    # A row that was not measured never takes a gate's colour: a "[passed]" in green beside a
    # not-evaluable subject would contradict its verdict.
    statuses = [
        outcome.get(figure.name) if figure.status == "measured" else _UNMEASURED.get(figure.status)
        for figure in figures
    ]
    svg = _plots.forest_svg(
        labels,
        estimates,
        pairs,
        xlabel=block.xlabel,
        salt=salt,
        reference=block.reference,
        thresholds=thresholds,
        statuses=statuses,
    )
    return {"block": block, "svg": Markup(svg), "rows": rows, "drawn": drawn}


def _profile(block: ProfileBlock, salt: str) -> dict[str, Any]:
    from trustbench.core.report import _plots  # matplotlib: loaded when a plot is drawn

    names = list(block.series)
    errors = [block.errors.get(n) for n in names] if block.errors else None
    bars = _plots.grouped_bar_svg(
        block.axes,
        [(n, block.series[n]) for n in names],
        [e or [None] * len(block.axes) for e in errors] if errors else None,
        ylabel=block.ylabel,
        salt=salt,
    )
    complete = [(n, v) for n, v in block.series.items() if all(x is not None for x in v)]
    skipped = [n for n in names if n not in dict(complete)]
    radar = None
    if block.radar and len(block.axes) >= 3 and complete:
        radar = Markup(_plots.radar_svg(block.axes, complete, salt=f"{salt}r"))  # type: ignore[arg-type]
    return {
        "block": block,
        "svg": Markup(bars),
        "radar": radar,
        "radar_skipped": skipped if block.radar else [],
    }


def _section(
    block: Block, index: int, gates: list[GateResult], unevaluable: set[str]
) -> dict[str, Any]:
    salt = f"tb{index}"
    declared = _gate_intervals(gates)
    if isinstance(block, FiguresBlock):
        return {"block": block, "rows": [_figure_row(f, declared) for f in block.figures]}
    if isinstance(block, TableBlock):
        return {"block": block, "id": f"table{index}"}
    if isinstance(block, ConfusionBlock):
        from trustbench.core.report import _plots  # matplotlib: loaded when a plot is drawn

        svg = _plots.confusion_svg(
            block.rows,
            block.columns,
            block.counts,
            row_title=block.row_title,
            column_title=block.column_title,
            salt=salt,
            kinds=block.cell_kinds(),
        )
        totals = [sum(row) for row in block.counts]
        return {"block": block, "svg": Markup(svg), "totals": totals}
    if isinstance(block, ForestBlock):
        return _forest(block, salt, gates, unevaluable)
    if isinstance(block, ProfileBlock):
        return _profile(block, salt)
    if isinstance(block, TextBlock):
        return {"block": block}
    raise TypeError(f"unknown block {type(block).__name__}")


# ------------------------------------------------------------------------------------------------
# The "System under test" block: one compact table under the verdicts (see `_system.py`).

NOT_DECLARED = "not declared"
"""What an optional declaration the spec left out reads as (never a guess)."""

_REVISION = {
    True: "yes (declared)",
    False: "no (declared): the id may serve other weights on another day",
    None: NOT_DECLARED,
}


def _attempts(count: int) -> str:
    return f"{count:,} attempt{'' if count == 1 else 's'}"


def _model_cell(row: ConfigurationUnderTest) -> str:
    """Requested id and every reported id with its attempts, or why there is no model."""
    if row.kind == "composite":
        return "not a model: assembled from the candidates above"
    if not row.is_model:
        what = "a person" if row.kind == "human" else "in-process code"
        named = f": model {row.in_process_model}" if row.in_process_model else ""
        return f"not a model ({what}{named})"
    reported = [f"{name} ({_attempts(count)})" for name, count in row.reported_models.items()]
    if row.attempts_without_reported_id:
        reported.append(f"none named ({_attempts(row.attempts_without_reported_id)})")
    return f"requested {row.requested_model}; reported {', '.join(reported) or 'nothing'}"


def _settings_cell(row: ConfigurationUnderTest) -> str:
    """The declared settings as `key=value`, and an in-process candidate's code and its hash."""
    import json

    settings = ", ".join(
        f"{key}={json.dumps(value, sort_keys=True)}"
        for key, value in sorted(row.serving_settings.items())
    )
    parts = [settings] if settings else []
    if row.entry:
        parts.append(
            f"code {row.entry}" + (f" sha256 {row.code_sha256[:12]}" if row.code_sha256 else "")
        )
    return "; ".join(parts) or ("none declared" if row.kind != "composite" else "-")


def _configuration_row(row: ConfigurationUnderTest) -> dict[str, Any]:
    composite = row.kind == "composite"
    tools = ", ".join(row.tools)
    if row.information_condition == "tools":
        access = f"tools: {tools or 'none'}"
    else:
        access = f"{row.information_condition}; " + (f"tools: {tools}" if tools else "no tools")
    if row.declared_limits:
        access += f"; {row.declared_limits}"
    return {
        "name": row.name,
        "type": row.subject_type,
        "model": _model_cell(row),
        "mismatch": row.mismatch_text(),
        "settings": _settings_cell(row),
        "access": access,
        "lineage": "-" if composite else row.lineage or NOT_DECLARED,
        "boundary": "-" if composite else row.administrative_boundary or NOT_DECLARED,
        "revision": "-" if composite or not row.is_model else _REVISION[row.immutable_revision],
    }


def system_under_test_view(system: SystemUnderTest | None) -> dict[str, Any] | None:
    """What the page's "System under test" block shows: one row per configuration, the hashes."""
    if system is None:
        return None
    hashes = [
        f"{what} {name} sha256 {digest[:12]}"
        for what, found in (("prompt", system.prompt_sha256), ("policy pin", system.policy_sha256))
        for name, digest in found.items()
    ]
    return {
        "rows": [_configuration_row(row) for row in system.configurations],
        "hashes": "; ".join(hashes) or "no prompt or policy file was frozen",
        "track": system.track,
    }


def sorted_gates(gates: list[GateResult]) -> list[GateResult]:
    """Failed gates first, then not evaluable, then passed; declaration order within each."""
    return sorted(gates, key=lambda result: _GATE_ORDER[result.status])


_HEADLINE_GATES = 3
"""Gates whose figures a verdict row shows (declaration order, blocking first): the spec's
first-declared gates are its headline measures (false approvals, unsupported permits...)."""


def _bound_text(gate: GateResult) -> str:
    value, metric = gate.value, gate.spec.metric
    if value is None:
        return "not evaluated"
    rate = "rate" in metric and 0.0 <= value <= 1.0
    return f"{value * 100:.2f}%" if rate else f"{value:.4g}"


def headline_figures(verdict: Verdict, declared: Sequence[GateResult]) -> list[str]:
    """A verdict row's figures: each headline gate's estimate and the interval bound it compares.

    Shown beside the verdict so the first screen carries the numbers with their intervals
    (e.g. `false-approvals: 1.25% (95% upper bound 6.76%; gate <= 5%)`), not only the words.

    Args:
        verdict: The subject's verdict (its gates).
        declared: Every gate result of the page, in declaration order.
    """
    from trustbench.core._analysis import VALID_RESPONSE_RATE

    order = {id(g): i for i, g in enumerate(declared)}
    # The valid-response rate has its own column; the headline figures are the error rates.
    gated = [g for g in verdict.gates if g.spec.metric != VALID_RESPONSE_RATE]
    mine = sorted(gated, key=lambda g: (not g.spec.blocking, order.get(id(g), 0)))
    lines = []
    for gate, name in zip(mine, gate_names(mine), strict=True):
        spec = gate.spec
        threshold = f"gate {spec.comparison} {_threshold_text(gate)}"
        point = gate.figure_estimate
        if point is None and spec.bound == "estimate":
            point = gate.value
        if point is None:
            lines.append(f"{name}: {gate.status.replace('_', ' ')} ({threshold})")
            continue
        estimate = _bound_text(gate.model_copy(update={"value": point}))
        level = "" if spec.confidence is None else f"{spec.confidence * 100:g}% "
        bound = (
            f"{level}{spec.bound} bound {_bound_text(gate)}; " if spec.bound != "estimate" else ""
        )
        lines.append(f"{name}: {estimate} ({bound}{threshold})")
    return lines[:_HEADLINE_GATES]


def _threshold_text(gate: GateResult) -> str:
    return _bound_text(gate.model_copy(update={"value": gate.spec.threshold}))


def next_steps(candidates: Sequence[Verdict], incomplete: str | None) -> list[str]:
    """What a reader does next, from the candidates' verdicts (first matching case first)."""
    statuses = {v.status for v in candidates}
    steps = []
    if incomplete:
        steps.append("Finish the run (`trustbench run RUN`) and report again.")
    if "not_evaluable" in statuses:
        steps.append(
            "Make the not-evaluable candidates answer validly first (see Evaluability: missing, "
            "invalid or cut replies); their error rates are withheld until they do."
        )
    if "blocked" in statuses:
        steps.append(
            "Open a blocked candidate's gates (Release gates by configuration) for the bound "
            "that missed its threshold, then its figures and confusion for the cases."
        )
    if statuses - {"passed"} and not steps:
        steps.append("Read each candidate's verdict: none of those not passed is released.")
    if not steps:
        steps.append(
            "Passing these gates is evidence at this sample size only: read what these "
            "results do not establish before a release."
        )
    return steps


PAGE_TEMPLATE = "report.html.j2"
"""The page's template, in the package's `templates/`."""


def compile_page_template() -> None:
    """Compile the page's template now: jinja2 keeps it for this process's later renders.

    Lexing, parsing and compiling the template take about 0.03 s; `report` has its second
    process do it while the report grades, and then write the page (`core/_report_run.py`).
    """
    _environment().get_template(PAGE_TEMPLATE)


def render_report_html(page: ReportPage) -> str:
    """Render the page to HTML text.

    Args:
        page: What to show.

    Returns:
        A complete HTML5 document with no external resources (its one script, the table filter,
        is inline).
    """
    template = _environment().get_template(PAGE_TEMPLATE)
    gates = sorted_gates(page.gates)
    verdicts = subject_verdicts(page)
    built_to_fail = {v.subject for v in verdicts if v.expected_to_fail}
    judged = [g for g in gates if g.subject not in built_to_fail]
    counted = [g for g in judged if g.spec.blocking]
    counts = {s: sum(1 for g in counted if g.status == s) for s in _GATE_ORDER}
    informational = [g for g in judged if not g.spec.blocking and g.status != "passed"]
    blocked = release_blocked(page.gates, verdicts)
    candidates = [v for v in verdicts if not v.instrument]
    # Rows of a subject with nothing valid to measure (a not-evaluable candidate, a sentinel
    # that never answered validly) are not drawn as measured: an error rate of 0 of 0 valid
    # answers is no evidence, and a green "[passed]" beside it would read as one.
    unevaluable = {v.subject for v in verdicts if v.status == "not_evaluable"} | {
        s for s, e in page.evaluability.items() if e.attempted and not e.valid
    }
    sections = [
        _section(block, i, page.gates, unevaluable) for i, block in enumerate(page.sections)
    ]
    return template.render(
        page=page,
        gates=gates,
        gate_counts=counts,
        informational=informational,
        blocked=blocked,
        exit_code=report_exit_code(page.incomplete is None, blocked),
        harness_problems=[v.subject for v in verdicts if v.status == "harness_problem"],
        candidates=candidates,
        all_passed=all(v.status == "passed" for v in candidates),
        next_steps=next_steps(candidates, page.incomplete),
        headlines={v.subject: headline_figures(v, page.gates) for v in verdicts},
        instruments=[v for v in verdicts if v.instrument],
        loose_gates=[g for g in gates if g.subject is None],
        lead_sections=[s for s in sections if s["block"].lead],
        sections=[s for s in sections if not s["block"].lead],
        has_filter=any(isinstance(b, TableBlock) and b.filterable for b in page.sections),
        system=system_under_test_view(page.system_under_test),
    )


def write_report_html(path: Path | str, page: ReportPage) -> Path:
    """Render the page and write it as UTF-8 (e.g. `RUN_DIR/report.html`).

    Written beside and renamed (`write_atomically`): a link left at `report.html` (to another
    run's ledger, say) is replaced, never written through.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(target, render_report_html(page).encode("utf-8"))
    return target


# ------------------------------------------------------------------------------------------------
# Tables a track builds from figures it already computed (presentation only).


def _cell(figure: Figure) -> str:
    counts = format_counts(figure)
    return f"{format_estimate(figure)} ({counts})" if counts else format_estimate(figure)


def breakdown_table(
    title: str, by: str, figures: Mapping[str, Sequence[Figure]], *, note: str = ""
) -> TableBlock:
    """A per-group / per-variant table: one row per value, one column per figure name.

    Each cell is the estimate with its numerator / denominator ("not run" and "n/a" as such);
    a figure missing for one value reads "not computed". The table is folded: it is detail.

    Args:
        title: Section heading.
        by: What the rows are (e.g. `group`, `variant`), the first column's heading.
        figures: Row value -> its figures.
        note: Text under the heading (where the intervals are, what one row holds).

    Returns:
        A folded `TableBlock`.
    """
    names = list(dict.fromkeys(f.name for figs in figures.values() for f in figs))
    rows = []
    for value, figs in figures.items():
        cells = {f.name: f for f in figs}
        rows.append(
            [
                value,
                *[_cell(cells[n]) if n in cells else "not computed" for n in names],
            ]
        )
    return TableBlock(title=title, columns=[by, *names], rows=rows, folded=True, note=note)
