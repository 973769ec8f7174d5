"""A review metric declared once, outside the package, reaches figures, counts, gates, report."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.rtb.test_review_track import figures, inprocess, run_spec, spec_text

from trustbench.core import report_run
from trustbench.errors import AlreadyRegistered, InputError
from trustbench.rtb.corpus import Decision
from trustbench.rtb.review import (
    Outcome,
    ReviewRate,
    register_review_metric,
    unregister_review_metric,
)

DENY_ON_PERMIT = ReviewRate(
    name="deny_on_permit_rate",
    label="deny on permit / reference permit",
    description="observed deny / evaluated trials whose reference decision is permit",
    population=lambda row: row.reference is Decision.PERMIT,
    event=lambda row: row.observed is Outcome.DENY,
    reduction="any",
)
"""A metric no built-in declares: always-deny denies every one of the 4 permit cases."""

GATE = """
[[gates]]
name = "few-denials-of-permitted-work"
metric = "deny_on_permit_rate"
comparison = "<="
threshold = 0.25
"""


@pytest.fixture
def registered() -> Iterator[ReviewRate]:
    register_review_metric(DENY_ON_PERMIT)
    yield DENY_ON_PERMIT
    unregister_review_metric(DENY_ON_PERMIT.name)


def test_a_metric_registered_outside_reaches_figures_counts_gates_and_report(
    tmp_path: Path, registered: ReviewRate
) -> None:
    candidates = inprocess("always-deny", "always-deny") + inprocess("policy", "reference-policy")
    run_dir = run_spec(tmp_path, spec_text(candidates, gates=GATE))
    result = report_run(run_dir)
    record = json.loads((run_dir / "record.json").read_text())
    figure = figures(record, "always-deny")[registered.name]
    assert (figure["numerator"], figure["denominator"], figure["unit"]) == (4, 4, "case")
    per_trial = figures(record, "always-deny")[registered.name + "_per_trial"]
    assert (per_trial["numerator"], per_trial["denominator"], per_trial["unit"]) == (4, 4, "trial")
    assert figures(record, "policy")[registered.name]["numerator"] == 0
    counts = record["review"]["configurations"]["always-deny"]["counts"]["overall"]["rates"]
    assert (counts[registered.name]["numerator"], counts[registered.name]["denominator"]) == (4, 4)
    gates = {g.subject: g.status for g in result.gates if g.spec.metric == registered.name}
    assert gates == {"always-deny": "failed", "policy": "passed"}
    page = next(run_dir.glob("*.html")).read_text()
    assert registered.name in page


def test_a_second_declaration_of_a_metric_name_is_refused(registered: ReviewRate) -> None:
    with pytest.raises(AlreadyRegistered, match="already registered"):
        register_review_metric(registered)
    with pytest.raises(AlreadyRegistered, match="built in"):
        register_review_metric(
            ReviewRate("false_approval_rate", "x", "x", lambda r: True, lambda r: True, "any")
        )


def test_a_metric_named_like_a_trial_level_figure_is_refused() -> None:
    # `<rate>_per_trial` is every rate's secondary figure: a metric of that name would shadow it.
    with pytest.raises(InputError, match="_per_trial"):
        register_review_metric(
            ReviewRate(
                "false_approval_rate_per_trial", "x", "x", lambda r: True, lambda r: True, "any"
            )
        )
