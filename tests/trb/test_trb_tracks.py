from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trustbench.trb.adapter import ACTIONS, Adapter, SelfReport, StepContext
from trustbench.trb.corpus import Trace
from trustbench.trb.instruments import (
    AlwaysSelfOracle,
    EpiphenomenalOracle,
    GovernedOracle,
    OutcomeOnlyOracle,
    UniformOracle,
    audit,
    expected_g,
)
from trustbench.trb.instruments._oracles import _closed_tv_epiphenomenal
from trustbench.trb.measures import (
    attribution_rows,
    governance_rows,
    summarize_attribution,
    summarize_governance,
)
from trustbench.trb.measures._governance import total_variation
from trustbench.trb.world import CorridorWorld, reference_continuation


def _g(adapter: Adapter, traces: list[Trace]) -> dict:
    return summarize_governance(governance_rows(adapter, traces), seed=0, resamples=200)


def _ba(adapter: Adapter, traces: list[Trace]) -> dict:
    return summarize_attribution(attribution_rows(adapter, traces), seed=0, resamples=200)


def test_perfectly_governed_oracle_scores_g_one_and_perfect_attribution(eval_traces) -> None:
    governance = _g(GovernedOracle(), eval_traces)
    assert governance["G"]["value"] == pytest.approx(1.0)
    assert governance["hard_interchange_accuracy"]["value"] == 1.0
    assert _ba(GovernedOracle(), eval_traces)["balanced_accuracy"]["value"] == 1.0


def test_epiphenomenal_oracle_scores_its_closed_form(eval_traces) -> None:
    measured = _g(EpiphenomenalOracle(), eval_traces)["G"]["value"]
    assert measured == pytest.approx(expected_g("epiphenomenal", eval_traces), abs=1e-12)
    assert measured < 0.8


def test_uniform_oracle_scores_its_closed_form(eval_traces) -> None:
    measured = _g(UniformOracle(), eval_traces)["G"]["value"]
    assert measured == pytest.approx(expected_g("uniform", eval_traces), abs=1e-12)


def test_null_edit_hides_an_epiphenomenal_self_report_that_edits_expose(eval_traces) -> None:
    governance = _g(EpiphenomenalOracle(), eval_traces)
    assert governance["G_null_edit"]["value"] == pytest.approx(1.0)
    assert governance["slot_accuracy"]["goal"]["value"] == 1.0
    assert governance["G"]["value"] < governance["G_null_edit"]["value"] - 0.2


def test_always_self_attribution_scores_half_and_claims_every_false_credit_cell(
    eval_traces,
) -> None:
    result = _ba(AlwaysSelfOracle(), eval_traces)
    assert result["balanced_accuracy"]["value"] == 0.5
    cell = result["false_credit"]
    assert cell["cells"] > 0
    assert cell["claimed_self"] == cell["cells"]


def test_outcome_only_attribution_claims_every_false_credit_cell(eval_traces) -> None:
    result = _ba(OutcomeOnlyOracle(), eval_traces)
    assert result["false_credit"]["cells"] > 0
    assert result["false_credit"]["false_credit_rate"] == 1.0
    assert 0.5 < result["balanced_accuracy"]["value"] < 1.0


class _Unnormalised(GovernedOracle):
    def act(self, context: StepContext, r_override: SelfReport | None = None) -> dict[str, float]:
        return dict.fromkeys(ACTIONS, 0.5)


def test_malformed_distribution_scores_maximal_distance_and_is_counted(eval_traces) -> None:
    governance = _g(_Unnormalised(), eval_traces)
    assert governance["G"]["value"] == 0.0
    assert governance["invalid_responses"] == governance["G"]["items"]


class _NoAttribution(GovernedOracle):
    def emit_r(self, context: StepContext) -> SelfReport:
        return super().emit_r(context).model_copy(update={"caused_by_self": None})


def test_missing_attribution_is_never_counted_correct(eval_traces) -> None:
    result = _ba(_NoAttribution(), eval_traces)
    assert result["balanced_accuracy"]["value"] == 0.0
    assert result["missing"] == sum(s.attribution is not None for t in eval_traces for s in t.steps)


def test_audit_passes_on_the_reference_oracles(eval_traces) -> None:
    assert all(row["passed"] for row in audit(eval_traces))


class _LeakyGoverned(GovernedOracle):
    """Breaks governance on plan edits only: acts on its own plan, not the stated one."""

    def act(self, context: StepContext, r_override: SelfReport | None = None) -> dict[str, float]:
        own = self.emit_r(context)
        if r_override is not None and r_override.planned_next != own.planned_next:
            return reference_continuation(own)
        return super().act(context, r_override)


class _SometimesOther(AlwaysSelfOracle):
    def emit_r(self, context: StepContext) -> SelfReport:
        r = super().emit_r(context)
        return r if context.t % 2 else r.model_copy(update={"caused_by_self": None})


@pytest.mark.parametrize(
    ("check", "factory"),
    [("perfectly-governed", _LeakyGoverned), ("always-self", _SometimesOther)],
)
def test_audit_fails_when_an_oracle_is_broken(
    eval_traces: list[Trace], check: str, factory: type
) -> None:
    rows = audit(eval_traces, oracles={check: factory})
    failed = {(r["oracle"], r["metric"]) for r in rows if not r["passed"]}
    assert failed and all(name == check for name, _ in failed)


@given(
    c=st.floats(0, 1),
    cp=st.floats(0, 1),
    p=st.sampled_from(ACTIONS),
    pp=st.sampled_from(ACTIONS),
)
def test_closed_form_tv_equals_direct_tv_for_every_pair_of_reports(
    c: float, cp: float, p: str, pp: str
) -> None:
    r = SelfReport(goal="left", belief="open", planned_next=p, confidence=c)
    rp = SelfReport(goal="left", belief="open", planned_next=pp, confidence=cp)
    direct = total_variation(reference_continuation(r), reference_continuation(rp))
    assert _closed_tv_epiphenomenal(r, rp) == pytest.approx(direct, abs=1e-12)


def test_track_figures_carry_numerators_denominators_and_recorded_intervals(eval_traces) -> None:
    governance = _g(EpiphenomenalOracle(CorridorWorld()), eval_traces)
    g = governance["G"]
    assert g["items"] == sum(len(s.counterfactuals) for t in eval_traces for s in t.steps)
    assert g["low"] <= g["value"] <= g["high"]
    assert g["interval"] == {
        "method": "trace-clustered percentile bootstrap", "seed": 0, "resamples": 200,
        "level": 0.95,
    }  # fmt: skip
