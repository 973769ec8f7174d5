"""A subject that never answered shows no estimate anywhere: not in a table, a plot or a gate.

The cheating candidate these tests stand for is the cheapest one there is: a reviewer whose
endpoint is dead. It never approves anything, so every error rate it has is 0%, the best value
a table or forest plot can show. Its numbers must be withheld wherever they appear, and an
evaluable subject with the very same numbers must keep its own.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from trustbench.core._analysis import Evaluability, TrackAnalysis
from trustbench.core._evaluability import (
    VALID_RESPONSE_RATE,
    apply_evaluability,
    gate_on_evaluability,
    withheld_figure,
    withhold_not_evaluable,
)
from trustbench.core.figures import Figure, rate_figure
from trustbench.core.gates import GateSpec, evaluate_gate
from trustbench.core.report import (
    FiguresBlock,
    ForestBlock,
    ReportPage,
    TextBlock,
    format_estimate,
    subject_verdicts,
)

DEAD, LIVE = "dead", "live"


def _zero_of_twenty(name: str = "false_approval_rate") -> Figure:
    return rate_figure(name, 0, 20, description="deny cases approved", unit="case")


def _analysis() -> TrackAnalysis:
    dead, live = [_zero_of_twenty()], [_zero_of_twenty()]  # the same numbers, two subjects
    renamed = [f.model_copy(update={"name": n}) for n, f in ((DEAD, dead[0]), (LIVE, live[0]))]
    return TrackAnalysis(
        title="t",
        subtitle="s",
        subjects={DEAD: dead, LIVE: live},
        sections=[
            FiguresBlock(title=f"Figures: {DEAD}", figures=dead),  # the same objects
            FiguresBlock(title=f"Figures: {LIVE}", figures=live),
            ForestBlock(title="by configuration", figures=renamed, metric="false_approval_rate"),
            FiguresBlock(
                title="several metrics per configuration",
                figures=[
                    _zero_of_twenty(f"{DEAD}: false_approval_rate"),
                    _zero_of_twenty(f"{DEAD} · revoked_approval"),
                    _zero_of_twenty(f"{LIVE}: false_approval_rate"),
                    _zero_of_twenty(f"{DEAD}x: false_approval_rate"),  # another name entirely
                ],
            ),
            ForestBlock(
                title=f"{DEAD}: by variant",
                subject=DEAD,
                figures=[_zero_of_twenty("revoked_approval: false_approval_rate")],
            ),
            TextBlock(title="what was run", paragraphs=["unchanged"]),
        ],
        evaluability={
            DEAD: Evaluability(attempted=20, valid=0, transport_failed=20),
            LIVE: Evaluability(attempted=20, valid=20),
        },
    )


def _withheld(analysis: TrackAnalysis) -> TrackAnalysis:
    verdict = apply_evaluability(analysis, 0.95, 0.95)
    withhold_not_evaluable(analysis, verdict)
    return analysis


def _statuses(figures: list[Figure]) -> dict[str, str]:
    return {f.name: f.status for f in figures}


def test_a_not_evaluable_subject_keeps_its_counts_but_shows_no_estimate() -> None:
    analysis = _withheld(_analysis())
    valid, fa = analysis.subjects[DEAD]
    assert (valid.name, valid.status, valid.estimate) == (VALID_RESPONSE_RATE, "measured", 0.0)
    assert (fa.status, fa.estimate, fa.intervals) == ("not_evaluable", None, [])
    assert (fa.numerator, fa.denominator) == (0, 20)
    assert fa.reason is not None and "dead is not evaluable" in fa.reason
    assert format_estimate(fa) == "not evaluable"


def test_an_evaluable_subject_with_the_same_numbers_keeps_its_estimate() -> None:
    analysis = _withheld(_analysis())
    live = analysis.subjects[LIVE][1]
    assert (live.status, live.estimate) == ("measured", 0.0)
    assert live.intervals


def test_every_block_showing_the_subject_withholds_it_and_no_other() -> None:
    sections = _withheld(_analysis()).sections
    own, other, forest, several, detail, text = sections
    assert isinstance(own, FiguresBlock) and isinstance(other, FiguresBlock)
    assert _statuses(own.figures) == {"false_approval_rate": "not_evaluable"}
    assert _statuses(other.figures) == {"false_approval_rate": "measured"}
    assert isinstance(forest, ForestBlock)
    assert _statuses(forest.figures) == {DEAD: "not_evaluable", LIVE: "measured"}
    assert isinstance(several, FiguresBlock)
    assert _statuses(several.figures) == {
        f"{DEAD}: false_approval_rate": "not_evaluable",
        f"{DEAD} · revoked_approval": "not_evaluable",
        f"{LIVE}: false_approval_rate": "measured",
        f"{DEAD}x: false_approval_rate": "measured",
    }
    assert isinstance(detail, ForestBlock)
    assert _statuses(detail.figures) == {"revoked_approval: false_approval_rate": "not_evaluable"}
    assert text == TextBlock(title="what was run", paragraphs=["unchanged"])


def test_a_gate_reading_a_withheld_figure_is_not_evaluable_and_carries_no_estimate() -> None:
    figure = withheld_figure(_zero_of_twenty(), DEAD, "no valid response in 20 trials")
    spec = GateSpec(
        name="fa",
        metric="false_approval_rate",
        threshold=0.6,
        comparison="<=",
        bound="upper",
        interval_method="clopper_pearson",
        confidence=0.95,
    )
    result = evaluate_gate(spec, [figure])
    assert (result.status, result.value, result.figure_estimate) == ("not_evaluable", None, None)
    assert "not evaluable" in result.reason


def test_a_not_evaluable_candidate_without_declared_gates_is_not_evaluable_not_ungated() -> None:
    analysis = _analysis()
    verdict = apply_evaluability(analysis, 0.95, 0.95)
    gates = gate_on_evaluability([], verdict)
    assert {g.spec.name: g.subject for g in gates} == {
        f"evaluability ({DEAD})": DEAD,
        f"evaluability ({LIVE})": LIVE,
    }
    page = ReportPage(title="t", gates=gates, subjects=[DEAD, LIVE])
    verdicts = {v.subject: v for v in subject_verdicts(page)}
    assert verdicts[DEAD].status == "not_evaluable"
    assert "no valid response in 20 attempted trial(s)" in verdicts[DEAD].headline
    # An evaluable subject whose only gate is the implicit evaluability check has no declared
    # release gate: it reads "no release gate applies", never "passed all gates".
    assert verdicts[LIVE].status == "no_gates"


def test_a_not_evaluable_figure_must_say_why_and_carry_no_estimate() -> None:
    base = _zero_of_twenty().model_dump()
    with pytest.raises(ValidationError, match="says why"):
        Figure.model_validate(
            {**base, "status": "not_evaluable", "estimate": None, "intervals": []}
        )
    with pytest.raises(ValidationError, match="no estimate or interval"):
        Figure.model_validate({**base, "status": "not_evaluable", "reason": "dead"})


def test_response_counts_and_instruments_stay_shown() -> None:
    # What makes a subject not evaluable (its missing rate) is shown; so is every figure of an
    # instrument (a sentinel built never to answer), whose gates read them as its signature.
    missing = rate_figure("missing_rate", 20, 20, description="no reply", unit="trial")
    per_split = rate_figure("wind.missing_rate", 20, 20, description="no reply", unit="trial")
    analysis = _analysis()
    analysis.subjects[DEAD] += [missing, per_split]
    analysis.subjects["sentinel"] = [_zero_of_twenty()]
    analysis.evaluability["sentinel"] = Evaluability(attempted=20, valid=0, missing=20)
    analysis.instruments = frozenset({"sentinel"})
    analysis.response_figures = frozenset({"missing_rate"})
    _withheld(analysis)
    assert _statuses(analysis.subjects[DEAD]) == {
        VALID_RESPONSE_RATE: "measured",
        "false_approval_rate": "not_evaluable",
        "missing_rate": "measured",
        "wind.missing_rate": "measured",
    }
    assert _statuses(analysis.subjects["sentinel"]) == {
        VALID_RESPONSE_RATE: "measured",
        "false_approval_rate": "measured",
    }
