"""Report v2: a verdict per subject, instruments apart, gate configuration, tables, plots."""

from __future__ import annotations

import re

import matplotlib as mpl

from trustbench.core._analysis import Evaluability
from trustbench.core.figures import not_run_figure, rate_figure
from trustbench.core.gates import GateResult, GateSpec, evaluate_gates
from trustbench.core.report import (
    ConfusionBlock,
    FiguresBlock,
    ForestBlock,
    ProfileBlock,
    ReportPage,
    TableBlock,
    TextBlock,
    breakdown_table,
    release_blocked,
    render_report_html,
    subject_verdicts,
)
from trustbench.core.report._plots import cell_colour, confusion_svg, forest_svg, grouped_bar_svg

UPPER_GATE = GateSpec(
    name="false-approvals",
    metric="false_approval_rate",
    threshold=0.15,
    comparison="<=",
    bound="upper",
    interval_method="clopper_pearson",
    confidence=0.95,
)
UTILITY_GATE = GateSpec(name="utility", metric="utility_loss_rate", threshold=0.2, comparison="<=")


def _gates(subject: str, false_approvals: int, utility_losses: int) -> list[GateResult]:
    """Both gates for one subject on 20 cases, tagged with the subject as core tags them."""
    figures = [
        rate_figure(
            "false_approval_rate",
            false_approvals,
            20,
            unit="case",
            one_sided_upper=True,
            description="d",
        ),
        rate_figure("utility_loss_rate", utility_losses, 20, unit="case", description="d"),
    ]
    return [
        g.model_copy(update={"subject": subject})
        for g in evaluate_gates([UPPER_GATE, UTILITY_GATE], figures)
    ]


def _page(**extra: object) -> ReportPage:
    gates = (
        _gates("good", 0, 0)
        + _gates("always-permit", 20, 0)
        + _gates("always-deny", 0, 20)
        + _gates("broken-sentinel", 0, 0)
    )
    fields: dict[str, object] = {
        "title": "v2",
        "gates": gates,
        "subjects": ["good", "always-permit", "always-deny", "broken-sentinel"],
        "instruments": ["always-permit", "always-deny", "broken-sentinel"],
        "expected_to_fail": ["always-permit", "always-deny", "broken-sentinel"],
    }
    return ReportPage(**{**fields, **extra})  # type: ignore[arg-type]


def _statuses(page: ReportPage) -> dict[str, str]:
    return {v.subject: v.status for v in subject_verdicts(page)}


def test_failing_instruments_are_as_expected_and_one_passing_every_gate_is_a_harness_problem() -> (
    None
):
    assert _statuses(_page()) == {
        "good": "passed",
        "always-permit": "as_expected",
        "always-deny": "as_expected",
        "broken-sentinel": "harness_problem",
    }


def test_an_instrument_not_built_to_fail_gets_the_ordinary_reading_shown_apart() -> None:
    # e.g. a reckless scripted agent against an enforcing boundary: passing is correct
    verdicts = subject_verdicts(_page(expected_to_fail=["always-permit", "always-deny"]))
    sentinel = next(v for v in verdicts if v.subject == "broken-sentinel")
    assert (sentinel.status, sentinel.instrument) == ("passed", True)


def test_release_is_blocked_by_candidates_and_harness_problems_not_expected_failures() -> None:
    page = _page()
    # the sentinels fail as built and "good" passes, but the broken sentinel passes everything
    assert release_blocked(page.gates, subject_verdicts(page))
    fine = _page(
        instruments=["always-permit", "always-deny"],
        expected_to_fail=["always-permit", "always-deny"],
        gates=_gates("good", 0, 0) + _gates("always-permit", 20, 0) + _gates("always-deny", 0, 20),
        subjects=["good", "always-permit", "always-deny"],
    )
    assert not release_blocked(fine.gates, subject_verdicts(fine))
    as_candidate = _page(instruments=[], expected_to_fail=[])
    assert release_blocked(as_candidate.gates, subject_verdicts(as_candidate))


def test_the_same_failing_subject_is_blocked_when_it_is_a_candidate() -> None:
    verdicts = subject_verdicts(_page(instruments=[], expected_to_fail=[]))
    permit = next(v for v in verdicts if v.subject == "always-permit")
    assert permit.status == "blocked" and "false-approvals" in permit.headline


def test_a_not_evaluable_gate_outranks_a_failed_one_and_not_run_outranks_both() -> None:
    unreadable = GateResult(
        spec=UTILITY_GATE,
        status="not_evaluable",
        value=None,
        reason="valid-response rate 0.40 below the declared minimum 0.9",
        subject="always-permit",
    )
    page = _page(instruments=[], expected_to_fail=[], gates=[*_page().gates, unreadable])
    assert _statuses(page)["always-permit"] == "not_evaluable"
    candidates = _page(instruments=[], expected_to_fail=[], not_run=["always-permit"])
    assert _statuses(candidates)["always-permit"] == "not_run"


def test_a_subject_no_gate_applies_to_is_never_called_passed() -> None:
    page = ReportPage(title="t", subjects=["lonely"])
    assert _statuses(page) == {"lonely": "no_gates"}


def test_gate_results_carry_the_figure_estimate_unit_and_compared_bound() -> None:
    result = _gates("good", 1, 0)[0]
    assert result.subject == "good"
    assert result.figure_estimate == 0.05 and result.figure_unit == "case"
    assert result.compared == "upper bound of the one-sided 0.95 clopper_pearson interval"
    assert result.value is not None and result.value > result.figure_estimate


def test_page_opens_on_candidate_verdicts_with_instruments_in_their_own_section() -> None:
    html = render_report_html(
        _page(evaluability={"good": Evaluability(attempted=40, valid=38, missing=2)})
    )
    verdicts = html.index('id="verdicts"')
    instruments = html.index('id="instruments"')
    gates = html.index('id="gates"')
    assert verdicts < instruments < gates
    candidate_table = html[verdicts:instruments]
    assert "good" in candidate_table and "always-permit" not in candidate_table
    assert "38 / 40 (95.0%)" in candidate_table and "2 missing" in candidate_table
    assert "expected to fail" in html[instruments:gates]
    assert "HARNESS PROBLEM" in html[instruments:gates]
    # Each gate row names its configuration: subject, metric, bound, comparator, threshold.
    assert re.search(r"subject good; metric false_approval_rate; upper of the one-sided 95%", html)


def test_figure_cell_shows_the_gate_interval_first_and_folds_the_others() -> None:
    figure = rate_figure(
        "false_approval_rate", 3, 20, unit="case", one_sided_upper=True, description="d"
    )
    page = ReportPage(
        title="t", gates=_gates("good", 3, 0), sections=[FiguresBlock(title="F", figures=[figure])]
    )
    html = render_report_html(page)
    cell = html[html.index('<td class="intervals">') :]
    cell = cell[: cell.index("</td>")]
    first, folded = cell.split("<details", 1)
    assert "95% Clopper-Pearson exact: upper bound" in first and "gate" in first
    assert "Wilson" not in first and "Wilson" in folded


def test_drilldown_table_escapes_replies_and_filters_only_with_script_on() -> None:
    reply = "<img src=x onerror=alert(1)> permit it"
    table = TableBlock(
        title="Case drill-down",
        columns=["case id", "reply excerpt"],
        rows=[["case-001", reply], ["case-002", "deny"]],
        filterable=True,
    )
    html = render_report_html(ReportPage(title="t", sections=[table]))
    assert "<img src=x" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert 'class="filter"' in html and html.count("<script>") == 1
    # Rows are plain HTML: with scripts off every row is on the page.
    assert html.count("<tr><td") == 2
    plain = render_report_html(
        ReportPage(title="t", sections=[table.model_copy(update={"filterable": False})])
    )
    assert "<script>" not in plain


def test_folded_block_is_a_closed_details_element_holding_its_content() -> None:
    block = FiguresBlock(
        title="Figures: x", figures=[rate_figure("r", 1, 2, description="d")], folded=True
    )
    html = render_report_html(ReportPage(title="t", sections=[block]))
    assert '<details class="fold"><summary>Figures: x</summary>' in html
    assert html.index("<summary>Figures: x") < html.index('<table class="figures">')


def test_confusion_heatmap_gives_errors_red_and_agreements_green() -> None:
    svg = confusion_svg(
        ["permit", "deny"],
        ["permit", "deny", "missing"],
        [[10, 0, 0], [0, 0, 10]],
        row_title="reference",
        column_title="observed",
        salt="t",
    )
    full_error = cell_colour(False, 1.0)
    full_agreement = cell_colour(True, 1.0)
    assert full_error != full_agreement
    assert full_error in svg and full_agreement in svg
    red, green = mpl.colors.to_rgb(full_error), mpl.colors.to_rgb(full_agreement)
    assert red[0] > red[1] and green[1] > green[0]


def test_heatmap_cells_keep_the_colours_matplotlibs_colour_maps_gave_them() -> None:
    # The heatmap is written without matplotlib (issue 55: it was most of report's CPU); its
    # fills must stay what "Greens", "Reds" and "Greys" gave at every share.
    for agrees, name in ((True, "Greens"), (False, "Reds"), (None, "Greys")):
        for share in (i / 200 for i in range(201)):
            expected = mpl.colors.to_hex(mpl.colormaps[name](0.08 + 0.8 * share))
            assert cell_colour(agrees, share) == expected, (name, share)


def test_the_review_plots_are_plain_svg_with_escaped_text_and_one_id() -> None:
    svg = confusion_svg(
        ["<permit>"], ["a & b"], [[3]], row_title="reference", column_title="observed", salt="c"
    )
    assert "&lt;permit&gt;" in svg and "a &amp; b" in svg and "<permit>" not in svg
    forest = forest_svg(["x"], [0.2], [(0.1, None)], xlabel="rate", salt="f", thresholds=[0.5])
    for drawn, salt in ((svg, "c"), (forest, "f")):
        assert drawn.startswith(f'<svg id="{salt}"') and drawn.count(" id=") == 1
    assert "gate 0.5" in forest


def test_profile_draws_one_panel_per_axis_and_one_legend_colour_per_series() -> None:
    block = ProfileBlock(
        title="p",
        axes=["auc", "retention", "lift"],
        series={"a": [0.7, 4.0, 0.1], "b": [0.5, None, 0.2]},
    )
    svg = grouped_bar_svg(block.axes, list(block.series.items()), None, ylabel="v", salt="p")
    assert len(re.findall(r'id="p-axes_\d+"', svg)) == 3
    assert "not run" in svg
    assert len(re.findall(r'id="p-legend_\d+"', svg)) == 1


def test_forest_rows_take_their_gate_colour_and_draw_the_threshold() -> None:
    rows = [
        rate_figure("good", 0, 20, unit="case", one_sided_upper=True, description="d"),
        rate_figure("always-permit", 20, 20, unit="case", one_sided_upper=True, description="d"),
    ]
    block = ForestBlock(title="f", figures=rows, metric="false_approval_rate")
    gates = _gates("good", 0, 0) + _gates("always-permit", 20, 0)
    html = render_report_html(ReportPage(title="t", gates=gates, sections=[block]))
    assert "good  [passed]" in html and "always-permit  [failed]" in html
    assert "gate 0.15" in html
    assert "upper clopper_pearson (the interval the gate compares)" in html


def test_confusion_without_matching_labels_is_grey_not_all_red() -> None:
    block = ConfusionBlock(
        title="by path", rows=["direct", "replay"], columns=["prevented", "unresolved"],
        counts=[[3, 1], [2, 2]],
    )  # fmt: skip
    assert block.cell_kinds() == [[None, None], [None, None]]
    html = render_report_html(ReportPage(title="t", sections=[block]))
    assert cell_colour(False, 0.5) not in html and cell_colour(None, 0.5) in html


def test_breakdown_table_says_not_run_and_not_computed_instead_of_zero() -> None:
    table = breakdown_table(
        "Per-group breakdown: x",
        "group",
        {
            "g1": [rate_figure(name, k, 4, description="d") for name, k in (("r", 1), ("s", 0))],
            "g2": [not_run_figure("r", description="d", reason="interrupted")],
        },
    )
    assert table.columns == ["group", "r", "s"]
    assert table.rows == [
        ["g1", "25.00% (1 / 4)", "0.00% (0 / 4)"],
        ["g2", "not run", "not computed"],
    ]


def test_each_candidate_verdict_row_shows_its_headline_figures_with_the_bound_its_gate_reads() -> (
    None
):
    html = render_report_html(_page())
    row = html[html.index('id="verdicts"') : html.index('id="instruments"')]
    # 0 of 20: estimate 0, one-sided 95% exact upper bound 13.91% against the 15% gate.
    assert "false-approvals: 0.00% (95% upper bound 13.91%; gate &lt;= 15.00%)" in row
    assert "utility: 0.00% (gate &lt;= 20.00%)" in row
    assert row.index("Headline figures") < row.index("Valid responses")


def test_details_are_folded_below_the_verdicts_and_system_under_test() -> None:
    text = TextBlock(title="What was run", paragraphs=["p"])
    figures = FiguresBlock(title="Figures: good", figures=[], folded=True)
    html = render_report_html(_page(sections=[text, figures]))
    assert '<details class="fold"><summary>What was run</summary>' in html
    assert '<details class="fold"><summary>Figures: good</summary>' in html
    assert "<h2>What was run</h2>" not in html
    for folded in ("Qualification instruments", "Release gates by configuration",
                   "Manifest summary", "What these results do not establish"):  # fmt: skip
        assert f'<details class="fold"><summary>{folded}' in html, folded
    assert html.index('<p class="next">') < html.index('id="instruments"')


def test_a_lead_block_opens_right_under_the_verdict_banner() -> None:
    lead = TableBlock(title="Verdict per adapter", columns=["c"], rows=[["x"]], lead=True)
    html = render_report_html(_page(sections=[TextBlock(title="t", paragraphs=["p"]), lead]))
    assert "<h2>Verdict per adapter</h2>" in html
    assert (
        html.index('class="next"')
        < html.index("Verdict per adapter")
        < html.index('id="instruments"')
    )


def test_no_green_banner_while_a_candidate_is_not_passed_even_with_no_gate_failed() -> None:
    good = {"gates": _gates("good", 0, 0), "instruments": [], "expected_to_fail": []}
    assert '<p class="verdict clear">' in render_report_html(_page(subjects=["good"], **good))
    # "ungated" is a candidate no gate names: no gate failed, yet nothing is released for it.
    html = render_report_html(_page(subjects=["good", "ungated"], **good))
    assert '<p class="verdict clear">' not in html
    assert "No candidate released (not every candidate passed: ungated)" in html


def test_forest_draws_no_estimate_or_green_pass_for_a_subject_with_no_valid_answer() -> None:
    # A sentinel that never answered validly has 0 false approvals of its valid answers: its
    # gate passes, but the plot must not show a measured 0 marked "[passed]".
    empty = rate_figure("empty", 0, 20, unit="case", one_sided_upper=True, description="d")
    block = ForestBlock(title="f", figures=[empty], metric="false_approval_rate")
    page = ReportPage(
        title="t", gates=_gates("empty", 0, 0), sections=[block],
        evaluability={"empty": Evaluability(attempted=40, valid=0, invalid=40)},
    )  # fmt: skip
    html = render_report_html(page)
    assert "[passed]" not in html
    assert "empty (not evaluable)  [not evaluable]" in html
