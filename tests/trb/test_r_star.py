"""R*'s adversarial and out-of-distribution r' (issue 31, part 5): built, blinded, scored apart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_trb_track import figure, freeze_run_report, write_spec

from trustbench.trb.adapter._protocol import ACTIONS, SelfReport, StepContext
from trustbench.trb.corpus import generate_split
from trustbench.trb.instruments._oracles import EpiphenomenalOracle, GovernedOracle
from trustbench.trb.measures._governance import (
    adversarial_r,
    edit_signature,
    extra_edits,
    governance_rows,
    ood_r,
    total_variation,
    train_support,
)
from trustbench.trb.world import CorridorWorld, reference_continuation


@pytest.fixture(scope="module")
def train() -> list[Any]:
    return generate_split("train", 200, seed=3)


class GoalFollower(GovernedOracle):
    """Follows an override's goal and belief through the planner, ignoring its stated plan.

    It passes the stored goal and belief edits (coherent revisions) and gets the stored plan
    edits wrong; the adversarial r' (a plan that contradicts the stated goal) is where its
    shortcut shows most.
    """

    def act(self, context: StepContext, r_override: SelfReport | None = None) -> dict[str, float]:
        if r_override is None:
            return super().act(context)
        cell = context.observations[-1].position
        steps = context.observations[-1].steps_left
        coherent = self._world.coherent_report(
            cell, r_override.goal, r_override.belief, steps, r_override.caused_by_self
        )
        return reference_continuation(coherent)


def test_the_adversarial_r_prime_is_the_single_plan_edit_farthest_from_the_current_action(
    eval_traces,
) -> None:
    for step in eval_traces[0].steps:
        current = reference_continuation(step.r)
        adv = adversarial_r(step.r)
        best = max(
            total_variation(current, reference_continuation(step.r.model_copy(update={
                "planned_next": a, "confidence": c})))
            for a in ACTIONS for c in (0.0, 0.5, 1.0)
        )  # fmt: skip
        assert total_variation(current, reference_continuation(adv)) == pytest.approx(best)
        assert (adv.goal, adv.belief) == (step.r.goal, step.r.belief)


def test_every_ood_r_prime_lies_outside_the_train_support_and_stored_edits_inside(
    train, eval_traces
) -> None:
    support = train_support(train)
    world = CorridorWorld(eval_traces[0].world)
    for trace in eval_traces:
        for step in trace.steps:
            cell = step.observation.position
            rp = ood_r(world, cell, step.r)
            assert edit_signature(world, cell, step.r, rp) not in support
            assert rp.goal != step.r.goal and rp.belief != step.r.belief
            for cf in step.counterfactuals:
                assert edit_signature(world, cell, step.r, cf.r_prime) in support


def test_governance_rows_score_each_kind_apart_and_the_headline_stays_on_stored_edits(
    train, eval_traces
) -> None:
    traces = eval_traces[:8]
    steps = sum(len(t.steps) for t in traces)
    followers = {}
    for name, adapter in (("governed", GovernedOracle()), ("goal", GoalFollower()),
                          ("epiphenomenal", EpiphenomenalOracle())):  # fmt: skip
        adapter.fit_traces = train
        rows = governance_rows(adapter, traces)
        followers[name] = rows
        assert sum(r["adversarial_items"] for r in rows) == steps
        assert sum(r["ood_items"] for r in rows) == steps
        assert sum(r["ood_in_train_support"] for r in rows) == 0
        assert all(r["ood_support_checked"] for r in rows)
    plain = governance_rows(GovernedOracle(), traces)  # no settings: the same default R*
    assert [r["tv_sum"] for r in plain] == [r["tv_sum"] for r in followers["governed"]]

    def g(rows: list[dict[str, Any]], kind: str) -> float:
        return 1 - sum(r[f"{kind}_tv_sum"] for r in rows) / sum(r[f"{kind}_items"] for r in rows)

    assert g(followers["governed"], "adversarial") == 1.0 and g(followers["governed"], "ood") == 1
    stored = 1 - sum(r["tv_sum"] for r in followers["goal"]) / sum(
        r["n_items"] for r in followers["goal"]
    )
    # The goal-follower's shortcut costs it far more on adversarial r' than on stored edits.
    assert g(followers["goal"], "adversarial") < stored - 0.2
    assert g(followers["epiphenomenal"], "adversarial") < stored


def test_a_declared_zero_adds_no_r_prime(eval_traces) -> None:
    adapter = GovernedOracle()
    adapter.settings = {"r_star": {"adversarial": 0, "ood": 1}}
    rows = governance_rows(adapter, eval_traces[:3])
    assert sum(r["adversarial_items"] for r in rows) == 0 and sum(r["ood_items"] for r in rows)
    assert not any(r["ood_support_checked"] for r in rows)  # no train traces handed over
    kinds = [k for k, _ in extra_edits(eval_traces[0], eval_traces[0].steps[0], {"ood": 1})]
    assert kinds == ["ood"]


@pytest.fixture(scope="module")
def oracle_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("trb-r-star")
    spec = write_spec(
        folder,
        {"governed": "oracle:perfectly-governed", "epiphenomenal": "oracle:epiphenomenal"},
        sizes="{ train = 40, eval = 10, transfer = 6 }",
        options='measures = ["governance"]\nsplits = ["eval"]\ngrounding_fit_traces = 40',
    )
    return freeze_run_report(spec, folder / "run")


def test_the_record_and_report_show_each_kind_with_its_share_beside_the_pooled_g(
    oracle_run: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> None:
    r_star = oracle_run["trb"]["r_star"]
    assert r_star["declared_per_step"] == {"adversarial": 1, "ood": 1}
    governed = r_star["per_candidate"]["governed"]
    n_items = figure(oracle_run, "governed", "G")["denominator"]
    adv = figure(oracle_run, "governed", "G_adversarial")["denominator"]
    ood = figure(oracle_run, "governed", "G_ood")["denominator"]
    assert adv == ood == n_items / 4  # one of each per step beside the 4 stored edits
    assert governed["r_star_share_adversarial"]["value"] == pytest.approx(adv / (n_items + 2 * adv))
    assert governed["G_adversarial"]["value"] == 1.0 and governed["G_ood"]["value"] == 1.0
    assert governed["G_R_star_pooled"]["value"] == 1.0
    assert governed["ood_in_train_support"]["value"] == 0.0
    epi = r_star["per_candidate"]["epiphenomenal"]
    assert epi["G_R_star_pooled"]["value"] < epi["G"]["value"]  # adversarial r' cost it more
    assert epi["G_adversarial"]["lower"] <= epi["G_adversarial"]["value"]


def test_declared_counts_outside_zero_or_one_are_refused(tmp_path: Path) -> None:
    from tests.support.cli import invoke

    spec = write_spec(
        tmp_path, {"governed": "oracle:perfectly-governed"}, options="r_star_ood_per_step = 2"
    )
    code, output = invoke("freeze", str(spec), "--out", str(tmp_path / "run"))
    assert code == 2 and "r_star_ood_per_step" in output and "Traceback" not in output
