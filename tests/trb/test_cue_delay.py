"""Cue delay (issue 16, Track 6): the cue at step k > 0 after an unevaluated lead-in."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest
from pydantic import ValidationError
from trb_broken_adapters import FirstObservationCue

from trustbench.errors import InputError
from trustbench.trb.adapter import SelfReport, StepContext
from trustbench.trb.corpus import Trace, corpus_json_schema, generate_split
from trustbench.trb.corpus._generate import CUE_DELAY_STEPS, TRANSFER_FAMILIES
from trustbench.trb.corpus._store import manifest_for, read_corpus, split_bytes, write_corpus
from trustbench.trb.instruments import GovernedOracle
from trustbench.trb.instruments._oracles import audit
from trustbench.trb.measures._governance import (
    attribution_rows,
    governance_rows,
    summarize_governance,
)
from trustbench.trb.reference._train import TrainConfig, train_reference_model
from trustbench.trb.track._measures import StatsPlan
from trustbench.trb.track._profile import split_figures
from trustbench.trb.world import CorridorConfig, CorridorWorld

DELAYED = TRANSFER_FAMILIES["cue_delay"]
K = DELAYED.cue_step


@pytest.fixture(scope="module")
def delayed() -> list[Trace]:
    return generate_split("transfer_cue_delay", 6, seed=5, config=DELAYED)


class Recording(GovernedOracle):
    """The governed oracle, recording every context it is asked about."""

    def __init__(self, world: CorridorWorld) -> None:
        super().__init__(world)
        self.asked: list[tuple[str, StepContext]] = []

    def emit_r(self, context: StepContext) -> SelfReport:
        self.asked.append(("emit_r", context))
        return super().emit_r(context)

    def act(self, context: StepContext, r_override: SelfReport | None = None) -> dict[str, float]:
        self.asked.append(("act", context))
        return super().act(context, r_override)


def test_cue_step_zero_generates_byte_identical_splits_to_before() -> None:
    # Hashes recorded from the commit before cue delay existed (b22acbb): an undelayed world
    # serialises without `cue_step` or `lead_in`, so existing corpora keep their hashes.
    eval_split = generate_split("eval", 5, seed=3)
    length = generate_split("transfer_length", 3, seed=7, config=TRANSFER_FAMILIES["length"])
    assert hashlib.sha256(split_bytes(eval_split)).hexdigest() == (
        "eef074796ce05e57d4438b2abdf8b6edd0cb0ebd6454e8495ea1e2cc18eb5682"
    )
    assert hashlib.sha256(split_bytes(length)).hexdigest() == (
        "13b85d9e4514f32fcbd8c1442cbdb34d0bdc9920daafb751b3a17c5db854aad6"
    )
    assert '"lead_in"' not in split_bytes(eval_split).decode()
    assert '"cue_step"' not in split_bytes(eval_split).decode()


def test_cue_delay_trace_round_trips_with_its_lead_in(tmp_path: Path, delayed) -> None:
    written = write_corpus(tmp_path, {"transfer_cue_delay": delayed})
    manifest, loaded = read_corpus(tmp_path)
    assert loaded["transfer_cue_delay"] == delayed
    assert manifest.corpus_sha256 == written.corpus_sha256
    line = json.loads((tmp_path / "transfer_cue_delay.jsonl").read_text().splitlines()[0])
    assert line["world"]["cue_step"] == K == CUE_DELAY_STEPS
    assert [s["action"] for s in line["lead_in"]] == ["stay"] * K
    assert all(0 <= s["gust_draw"] < 1 for s in line["lead_in"])
    jsonschema.Draft202012Validator(corpus_json_schema()).validate(line)


def test_lead_in_shows_no_cue_and_the_cue_step_starts_the_evaluated_steps(delayed) -> None:
    for trace in delayed:
        assert all(s.observation.goal_cue is None for s in trace.lead_in)
        first = trace.steps[0]
        assert first.t == K and first.observation.goal_cue == trace.goal
        assert first.observation.door_cue == trace.door
        # The horizon counts from the cue: reach probabilities match an undelayed world.
        assert first.observation.steps_left == DELAYED.horizon
        assert len(trace.steps) == DELAYED.horizon
        # The transition into the cue step was the scripted stay: nothing to attribute.
        assert first.attribution is None and first.r.caused_by_self is None
        assert first.observation.last_action == "stay"


def test_lead_in_must_match_the_worlds_cue_step(delayed) -> None:
    data = delayed[0].model_dump(mode="json")
    data["lead_in"] = data["lead_in"][:-1]
    with pytest.raises(ValidationError, match="lead_in holds"):
        Trace.model_validate(data)


def test_a_lead_in_step_is_never_a_context(delayed) -> None:
    with pytest.raises(ValueError, match="not an evaluated step"):
        delayed[0].context(K - 1)


def test_lead_in_steps_are_never_asked_by_any_track(delayed) -> None:
    adapter = Recording(CorridorWorld(DELAYED))
    governance_rows(adapter, delayed)
    attribution_rows(adapter, delayed)
    rollouts = split_figures(
        adapter, delayed, ["viability", "navigability"], fit_traces=delayed,
        settings={"viability_rollouts": 2, "max_enumeration_nodes": 100},
        stats=StatsPlan(0.95, 0, 10),
    )  # fmt: skip
    ran = [name for name, f in rollouts.items() if f.status == "measured"]
    assert any(n.endswith("completion_r_mediated") for n in ran)
    assert any(n.endswith("steered_reach") for n in ran)
    assert {kind for kind, _ in adapter.asked} == {"emit_r", "act"}
    for _kind, context in adapter.asked:
        assert context.t >= K and len(context.observations) == context.t + 1
        # Every rollout starts at or after the cue step, so the cue is already in its history.
        assert context.observations[K].goal_cue is not None


def test_oracle_closed_forms_stay_exact_on_the_cue_delay_world(delayed) -> None:
    assert all(row["passed"] for row in audit(delayed)), audit(delayed)


def _g_star(adapter: Any, traces: list[Trace]) -> float:
    return summarize_governance(governance_rows(adapter, traces), seed=0, resamples=0)["G_star"][
        "value"
    ]


def test_observation_zero_cue_cheat_is_governed_on_eval_and_collapses_under_cue_delay(
    delayed,
) -> None:
    eval_traces = generate_split("eval", 6, seed=5)
    cheat = FirstObservationCue(CorridorWorld(DELAYED))
    assert _g_star(cheat, eval_traces) > 0.99
    assert _g_star(cheat, delayed) < 0.2
    # The honest governed oracle carries the late cue: no drop at all.
    assert _g_star(GovernedOracle(CorridorWorld(DELAYED)), delayed) > 0.99


def test_undelayed_world_has_no_lead_in() -> None:
    episode = CorridorWorld(CorridorConfig()).simulate(np.random.default_rng(0))
    assert episode.lead_in == () and episode.steps[0].observation.goal_cue is not None


def test_reference_training_refuses_a_delayed_trace_instead_of_dropping_its_lead_in(
    delayed,
) -> None:
    train = [t.model_copy(update={"split": "train", "trace_id": f"train-{i}"}) for i, t in
             enumerate(delayed)]  # fmt: skip
    with pytest.raises(InputError, match="lead-in of 2 steps"):
        train_reference_model(train, manifest_for({"train": train}), "full", TrainConfig())
