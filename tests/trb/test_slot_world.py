"""A world with its own slots, actions and no exact reference: imported, measured, refused clearly.

The world is `tests/support/triage_world.py` (a support-ticket desk: slots `priority`,
`suspected_cause`, `eta_hours`, `caused_by_self`; four actions; discrete observations, the default
text rendering), the same code as docs/trb.md's "A world with its own slots". Its sessions record
people's continuations, which follow the desk's runbook, so the governed slot oracle's G is 1
and the r-ignoring one's G* sits at its floor, 0.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from tests.support.cli import invoke
from tests.support.trb_spec import world_profile_spec
from tests.support.triage_world import (
    TRIAGE_DECLARATION,
    TriageWorld,
    registered_triage_world,
    triage_session,
)

from trustbench.errors import InputError
from trustbench.trb.corpus import SlotTrace, read_corpus, read_corpus_of_any_world
from trustbench.trb.instruments import SlotGovernedOracle, SlotRIgnoringOracle
from trustbench.trb.measures._governance import (
    min_sum_tv,
    min_sum_tv_over,
    slot_governance_counts,
)
from trustbench.trb.track import freeze_run_report
from trustbench.trb.track._measures import ATTRIBUTION, GOVERNANCE, MeasureRow, StatsPlan
from trustbench.trb.world import SlotContext, SlotReport, register_world, unregister_world


def _session_file(tmp_path: Path, sessions: list[dict[str, Any]] | None = None) -> Path:
    """Four eval sessions of three steps each."""
    sessions = sessions or [triage_session(i, seed=3) for i in range(4)]
    path = tmp_path / "desk.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in sessions))
    return path


def _import(tmp_path: Path, path: Path, out: str = "corpus") -> tuple[int, str]:
    return invoke("trb", "import", str(path), "--out", str(tmp_path / out), "--world", "triage")


def test_a_slot_world_session_file_imports_with_its_own_slots_and_actions(tmp_path: Path) -> None:
    with registered_triage_world():
        code, output = _import(tmp_path, _session_file(tmp_path))
        assert code == 0, output
        manifest, splits = read_corpus_of_any_world(tmp_path / "corpus")
        # the corridor-only reader says what reads this corpus instead of misreading it
        with pytest.raises(InputError, match="declares its own slots"):
            read_corpus(tmp_path / "corpus")
    assert manifest.world_id == "triage" and manifest.kind == "human_paired"
    first = splits["eval"][0]
    assert isinstance(first, SlotTrace) and first.world_id == "triage"
    step = first.steps[0]
    assert set(step.r.root) == set(TRIAGE_DECLARATION.slots)
    assert step.action in TRIAGE_DECLARATION.action_space.actions
    cf = step.counterfactuals[0]
    assert cf.continuation_source == "human" and set(cf.continuation) == {
        "rollback", "scale_up", "escalate", "wait",
    }  # fmt: skip
    assert "eval split: 36 human Phi(r') (N1 = 200), 8 human-session Track 3 labels" in output


def _unknown_slot(s: list[dict[str, Any]]) -> None:
    s[1]["steps"][0]["r"]["mood"] = "calm"


def _value_outside_categories(s: list[dict[str, Any]]) -> None:
    s[0]["steps"][2]["r"]["suspected_cause"] = "cosmic rays"


def _number_out_of_bounds(s: list[dict[str, Any]]) -> None:
    s[2]["steps"][1]["counterfactuals"][2]["r_prime"]["eta_hours"] = 100.0


def _unknown_action(s: list[dict[str, Any]]) -> None:
    s[0]["steps"][1]["action"] = "right"


def _no_observation(s: list[dict[str, Any]]) -> None:
    del s[3]["steps"][1]["observation"]


def _undeclared_observation_field(s: list[dict[str, Any]]) -> None:
    s[0]["steps"][0]["observation"]["position"] = 3


def _r_prime_without_a_continuation(s: list[dict[str, Any]]) -> None:
    s[1]["steps"][2]["continuations"].pop(0)


@pytest.mark.parametrize(
    ("break_it", "where", "why"),
    [
        (_unknown_slot, ":2#/steps/0/r/mood", "unknown slot 'mood' (known: priority,"),
        (_value_outside_categories, ":1#/steps/2/r/suspected_cause", "is not one of"),
        (_number_out_of_bounds, ":3#/steps/1/counterfactuals/2/r_prime/eta_hours",
         "outside [0.0, 72.0]"),
        (_unknown_action, ":1#/steps/1/action",
         "unknown action 'right' (known: rollback, scale_up, escalate, wait)"),
        (_no_observation, ":4#/steps/1/observation", "step 1 has no observation"),
        (_undeclared_observation_field, ":1#/steps/0/observation/position",
         "unknown field 'position' (known: alert, severity, cleared_by)"),
        (_r_prime_without_a_continuation, ":2#/steps/2/counterfactuals/0",
         "declares no exact reference agent"),
    ],
)  # fmt: skip
def test_a_slot_world_session_outside_its_declaration_is_one_line_and_writes_nothing(
    tmp_path: Path, break_it: Any, where: str, why: str
) -> None:
    sessions = [triage_session(i, seed=3) for i in range(4)]
    break_it(sessions)
    path = _session_file(tmp_path, sessions)
    with registered_triage_world():
        code, message = _import(tmp_path, path, out="c")
    assert code == 2 and message.startswith(f"{path}{where}: ") and why in message, message
    assert "Traceback" not in message and "\n" not in message.strip()
    assert not (tmp_path / "c").exists()


SPEC = (
    world_profile_spec(["governance", "attribution", "grounding", "viability"])
    + """

[[candidates]]
name = "governed"
kind = "inprocess"
model = "slot-oracle:governed"

[[candidates]]
name = "r-blind"
kind = "inprocess"
model = "slot-oracle:r-ignoring"

[[candidates]]
name = "corridor-oracle"
kind = "inprocess"
model = "oracle:perfectly-governed"
"""
)


@pytest.fixture(scope="module")
def triage_record(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One freeze/run/report of the oracle pair on an imported triage corpus."""
    tmp_path = tmp_path_factory.mktemp("triage-run")
    with registered_triage_world():
        code, output = _import(tmp_path, _session_file(tmp_path))
        assert code == 0, output
        (tmp_path / "spec.toml").write_text(SPEC)
        freeze_run_report(tmp_path / "spec.toml", tmp_path / "run")
    return json.loads((tmp_path / "run" / "record.json").read_text())


def _figure(record: dict[str, Any], candidate: str, name: str) -> dict[str, Any]:
    figures = record["figures"][candidate]
    return next(f for f in figures if f["name"] == name)


def test_track_1_on_a_slot_world_lands_the_oracle_pair_at_one_and_at_the_floor(
    triage_record: dict[str, Any],
) -> None:
    assert triage_record["trb"]["world_id"] == "triage"
    governed, blind = (triage_record["trb"]["profile"][c] for c in ("governed", "r-blind"))
    assert governed["G"]["status"] == "measured" and governed["G"]["value"] == pytest.approx(1.0)
    assert blind["G"]["status"] == "measured" and blind["G"]["value"] == pytest.approx(0.0)
    for slot in TRIAGE_DECLARATION.editable_slots:  # G per declared editable slot
        assert _figure(triage_record, "governed", f"G[{slot}]")["estimate"] == pytest.approx(1.0)
    floor = _figure(triage_record, "r-blind", "G_null_edit_floor")["estimate"]
    assert _figure(triage_record, "r-blind", "G")["estimate"] == pytest.approx(floor)
    assert "over world triage's 4 actions" in _figure(triage_record, "governed", "G")["description"]


def test_track_3_on_a_slot_world_reads_its_declared_attribution_slot(
    triage_record: dict[str, Any],
) -> None:
    attr = triage_record["trb"]["profile"]["governed"]["attr"]
    assert attr["status"] == "measured" and attr["value"] == pytest.approx(1.0)


def test_what_needs_exact_phi_or_the_corridor_says_why_and_shows_no_figure(
    triage_record: dict[str, Any],
) -> None:
    profile = triage_record["trb"]["profile"]
    for axis in ("ground", "viab"):
        entry = json.dumps(profile["governed"][axis])
        assert profile["governed"][axis]["status"] == "not run", entry
        assert "world triage does not support" in entry and "declares its own slots" in entry
    own = _figure(triage_record, "governed", "self_consistency")
    assert own["status"] == "not_applicable" and "no exact reference agent" in own["reason"]
    corridor_only = json.dumps(profile["corridor-oracle"]["G"])
    assert profile["corridor-oracle"]["G"]["status"] == "not run"
    assert "world triage, which declares its own slots" in corridor_only, corridor_only


def test_the_r_ignoring_ceiling_over_k_actions_is_the_three_action_minimum_when_k_is_3() -> None:
    rng = random.Random(7)
    for _ in range(20):
        phis = []
        for _ in range(rng.randint(1, 4)):
            w = [rng.random() for _ in range(3)]
            phis.append(dict(zip(("left", "stay", "right"), (x / sum(w) for x in w), strict=True)))
        assert min_sum_tv_over(("left", "stay", "right"), phis) == pytest.approx(
            min_sum_tv(phis), abs=1e-7
        )


def test_the_docs_slot_world_code_is_the_test_triage_world() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "trb.md").read_text(encoding="utf-8")
    section = doc.split("### A world with its own slots", 1)[1].split("\n## ")[0]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict[str, Any] = {}
    exec(compile(code, "docs/trb.md", "exec"), namespace)  # the documented world, as written
    assert namespace["TRIAGE_DECLARATION"] == TRIAGE_DECLARATION
    documented, tested = namespace["TriageWorld"](), TriageWorld()
    session = triage_session(0, seed=11)
    observations = tuple(step["observation"] for step in session["steps"])
    for t in range(len(observations)):
        context = SlotContext(trace_id="x", t=t, observations=observations[: t + 1])
        assert documented.stated_report(context) == tested.stated_report(context)
        r = tested.stated_report(context)
        for eta in (4.0, 60.0):
            edited = SlotReport({**r.root, "eta_hours": eta})
            assert documented.policy(edited) == tested.policy(edited)


class ExactTriageWorld(TriageWorld):
    """The desk whose runbook is declared its exact reference agent."""

    declaration = TRIAGE_DECLARATION.model_copy(
        update={"world_id": "triage-exact", "exact_reference": True}
    )


def test_with_an_exact_reference_an_r_prime_without_continuation_takes_the_policy_as_phi(
    tmp_path: Path,
) -> None:
    sessions = [triage_session(i, seed=5) for i in range(2)]
    for session in sessions:
        for step in session["steps"]:
            step["counterfactuals"][0]["provenance"] = "synthetic"
            step["continuations"] = step["continuations"][1:]  # the first r' has none recorded
    world = ExactTriageWorld()
    register_world(world)
    try:
        code, output = invoke(
            "trb", "import", str(_session_file(tmp_path, sessions)), "--out",
            str(tmp_path / "corpus"), "--world", "triage-exact",
        )  # fmt: skip
        assert code == 0, output
        _, splits = read_corpus_of_any_world(tmp_path / "corpus")
        trace = splits["eval"][0]
        assert isinstance(trace, SlotTrace)
        synthetic = trace.steps[0].counterfactuals[0]
        assert synthetic.continuation_source == "reference_agent"
        assert synthetic.continuation == world.policy(synthetic.r_prime)
        governed = slot_governance_counts(SlotGovernedOracle(world), trace, world)
        blind = slot_governance_counts(SlotRIgnoringOracle(world), trace, world)
    finally:
        unregister_world("triage-exact")
    # Track 1b needs Phi of the stated r: measured here, since the world has an exact reference
    assert governed["self_items"] == len(trace.steps) and governed["self_tv_sum"] == 0.0
    assert governed["tv_sum"] == 0.0 and governed["n_items"] == 3 * len(trace.steps)
    assert blind["star_tv_sum"] == pytest.approx(blind["star_floor_tv_sum"])  # G* = 0


class _BrokenDeskAdapter:
    """States a slot the desk does not declare and fails every act call."""

    name, supports_override = "broken", True

    def emit_r(self, context: SlotContext) -> SlotReport:
        return SlotReport({"mood": "calm"})

    def act(self, context: SlotContext, r_override: SlotReport | None = None) -> dict[str, float]:
        raise RuntimeError("no answer")


def test_a_slot_world_adapter_that_fails_scores_every_item_tv_1_as_a_failed_trial_does(
    tmp_path: Path,
) -> None:
    with registered_triage_world():
        code, output = _import(tmp_path, _session_file(tmp_path, [triage_session(0, seed=9)]))
        assert code == 0, output
        _, splits = read_corpus_of_any_world(tmp_path / "corpus")
        trace = splits["eval"][0]
        assert isinstance(trace, SlotTrace)
        broken = GOVERNANCE.run(_BrokenDeskAdapter(), trace)
        failed = GOVERNANCE.failed(trace)
        missing = ATTRIBUTION.run(_BrokenDeskAdapter(), trace)
    assert broken["invalid"] == broken["n_items"] == 9 and broken["tv_sum"] == 9.0
    assert sum(broken["slot_correct"].values()) == 0
    for key in ("tv_sum", "n_items", "ceiling_tv_sum", "uniform_tv_sum", "hard_items",
                "replay_tv_sum", "replay_items"):  # fmt: skip
        assert failed[key] == pytest.approx(broken[key]), key
    assert missing["missing"] == missing["pos"] + missing["neg"] == 2


@pytest.mark.parametrize("value", ["1", b"1", True], ids=["text", "bytes", "bool"])
def test_a_probability_written_as_text_or_a_truth_value_is_not_a_distribution(
    value: object,
) -> None:
    """float() reads "1" and True as 1.0: such an answer is malformed, never a valid act."""
    world = TriageWorld()
    actions = TRIAGE_DECLARATION.action_space.actions
    dist = {actions[0]: value, **{a: 0.0 for a in actions[1:]}}
    assert world.valid_distribution(dist) is None
    assert world.valid_distribution({**dist, actions[0]: 1.0}) is not None


# ------------------------------------------------------------------------------------------------
# Track 1b's replay: one of a step's override calls asked twice, identically, in the same blinded
# batch; `replay_agreement` is the adapter's own noise (the cross-track flag's baseline).

ACTIONS = TRIAGE_DECLARATION.action_space.actions


def test_a_deterministic_adapter_in_a_slot_world_agrees_with_its_replay_exactly(
    triage_record: dict[str, Any],
) -> None:
    for candidate in ("governed", "r-blind"):
        replay = _figure(triage_record, candidate, "replay_agreement")
        assert replay["status"] == "measured" and replay["estimate"] == 1.0, replay
        assert replay["denominator"] == 12  # one replay per step: 4 sessions x 3 steps


class _SamplingDesk:
    """Follows the runbook on the r it is given, blended with fresh noise on every call: an
    identical question asked twice gets two different answers, as a sampling model's would."""

    name, tier, supports_override = "sampling-desk", "native", True

    def __init__(self) -> None:
        self.world, self.rng = TriageWorld(), random.Random(0)

    def seed(self, value: int) -> None:
        self.rng.seed(value)

    def emit_r(self, context: SlotContext) -> SlotReport:
        return self.world.stated_report(context)

    def act(self, context: SlotContext, r_override: SlotReport | None = None) -> dict[str, float]:
        runbook = self.world.policy(r_override or self.emit_r(context))
        noise = [self.rng.random() for _ in ACTIONS]
        return {
            a: 0.5 * runbook[a] + 0.5 * n / sum(noise) for a, n in zip(ACTIONS, noise, strict=True)
        }


class _BatchSpy:
    """Answers by the runbook and keeps every `act_many` batch it is sent; states no r (so no
    identity edit shares an override with another call)."""

    name, tier, supports_override = "batch-spy", "native", True

    def __init__(self) -> None:
        self.world = TriageWorld()
        self.batches: list[list[tuple[SlotContext, SlotReport | None]]] = []

    def emit_r(self, context: SlotContext) -> SlotReport:
        raise RuntimeError("states nothing")

    def act(self, context: SlotContext, r_override: SlotReport | None = None) -> dict[str, float]:
        return self.world.policy(r_override or self.world.stated_report(context))

    def act_many(
        self, contexts: list[SlotContext], overrides: list[SlotReport | None]
    ) -> list[dict[str, float]]:
        self.batches.append(list(zip(contexts, overrides, strict=True)))
        return [self.act(c, r) for c, r in zip(contexts, overrides, strict=True)]


def _triage_traces(tmp_path: Path) -> list[SlotTrace]:
    """The four imported eval sessions of three steps (call inside `registered_triage_world`)."""
    code, output = _import(tmp_path, _session_file(tmp_path))
    assert code == 0, output
    traces = read_corpus_of_any_world(tmp_path / "corpus")[1]["eval"]
    assert all(isinstance(trace, SlotTrace) for trace in traces)
    return traces  # type: ignore[return-value]  (checked: slot traces)


def _replay_agreement(adapter: Any, traces: list[SlotTrace]) -> float | None:
    rows = [MeasureRow(trace, 0, GOVERNANCE.run(adapter, trace), False) for trace in traces]
    figures = GOVERNANCE.figures(rows, StatsPlan(confidence=0.95, seed=0, resamples=50), "")
    return next(f for f in figures if f.name == "replay_agreement").estimate


def test_an_adapter_that_samples_in_a_slot_world_agrees_with_its_replay_below_one(
    tmp_path: Path,
) -> None:
    with registered_triage_world() as world:
        traces = _triage_traces(tmp_path)
        sampled = _replay_agreement(_SamplingDesk(), traces)
        deterministic = _replay_agreement(SlotGovernedOracle(world), traces)
    assert deterministic == 1.0
    assert sampled is not None and 0.0 < sampled < 1.0, sampled


def test_a_slot_world_replay_is_asked_in_the_blinded_batch_at_no_fixed_place(
    tmp_path: Path,
) -> None:
    """The two asks of one question ride in one shuffled `act_many` batch, at places that differ
    from step to step: an adapter that recognises the repeat cannot find it by position."""
    spy = _BatchSpy()
    with registered_triage_world():
        traces = _triage_traces(tmp_path)
        for trace in traces:
            GOVERNANCE.run(spy, trace)
    assert len(spy.batches) == len(traces)  # one batch per trace: every act call in it
    gaps, firsts = set(), set()
    for batch in spy.batches:
        places: dict[str, list[int]] = {}
        for place, (context, override) in enumerate(batch):
            written = "" if override is None else override.model_dump_json()
            asked = context.model_dump_json() + "|" + written
            places.setdefault(asked, []).append(place)
        repeats = [at for at in places.values() if len(at) > 1]
        assert [len(at) for at in repeats] == [2, 2, 2]  # one replay per step, asked twice
        assert all(batch[a][1] is not batch[b][1] for a, b in repeats)  # fresh copies
        gaps.update(b - a for a, b in repeats)
        firsts.update(a for a, _ in repeats)
    assert len(gaps) > 1 and gaps != {1}, gaps  # neither adjacent nor at a fixed distance
    assert len(firsts) > 1, firsts
