"""The text world: tasks stated in words over exact dynamics, and its oracles through the tracks."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from tests.support.trb_spec import world_profile_spec

from trustbench.trb.adapter import AdapterTier, SelfReport
from trustbench.trb.corpus import generate_split, read_corpus, write_corpus
from trustbench.trb.corpus._generate import generate_text_corpus, text_worlds
from trustbench.trb.instruments import (
    EpiphenomenalOracle,
    GovernedOracle,
    TextGovernedOracle,
    TextRIgnoringOracle,
    TextUniformOracle,
    UniformOracle,
)
from trustbench.trb.measures import (
    attribution_rows,
    governance_rows,
    summarize_attribution,
    summarize_governance,
)
from trustbench.trb.track import freeze_run_report
from trustbench.trb.track._profile import prepare_adapter
from trustbench.trb.track._trace_measures import NAVIGABILITY, VIABILITY
from trustbench.trb.world import (
    TEXT_ACTIONS,
    CorridorWorld,
    TextContext,
    TextParseError,
    TextTask,
    TextWorld,
    TextWorldAdapter,
    world_sha256,
)
from trustbench.trb.world._text import TEXT_DYNAMICS

CORPUS = generate_text_corpus({"train": 6, "dev": 0, "eval": 8, "transfer": 4}, seed=3)
"""A small text corpus: seen tasks in train/eval, one split per transfer family."""
TASKS = [
    TextTask(kind=kind, phrasing=phrasing, language=language)
    for kind in ("replicas", "heating", "tank")
    for phrasing in ("plain", "log")
    for language in ("en", "fr")
]


@pytest.mark.parametrize("task", TASKS, ids=lambda t: f"{t.kind}-{t.phrasing}-{t.language}")
def test_a_text_context_reads_back_to_what_it_states_and_the_reference_r(task: TextTask) -> None:
    trace = CORPUS["eval"][0]
    world = TextWorld(task, trace.world)
    for step in trace.steps:
        context = trace.context(step.t)
        text = world.render_context(context)
        assert world.read_observations(text) == context.observations
        assert world.reference_report(text) == step.r  # exact r_t from the words alone
        read = world.parse_report(world.render_report(step.r))
        assert read.confidence == pytest.approx(step.r.confidence, abs=5e-5)  # 2 decimals of %
        assert read.model_copy(update={"confidence": step.r.confidence}) == step.r


def test_a_french_slot_block_is_written_and_read_in_french() -> None:
    world = TextWorld(TextTask(kind="heating", language="fr"))
    r = SelfReport(goal="right", belief="closed", planned_next="stay", confidence=0.25)
    block = world.render_report(r)
    assert block.splitlines() == [
        "Objectif: atteindre le niveau le plus haut",
        "Croyance: le dernier niveau est bloqué",
        "Prochaine étape: ne rien changer",
        "Confiance: 25,00 %",
        "Causé par moi: sans objet",
    ]
    assert world.parse_report(f"Je réfléchis.\n{block}") == r


def test_a_slot_block_in_words_the_task_does_not_use_is_refused_naming_the_slot() -> None:
    world = TextWorld(TextTask(kind="replicas"))
    r = SelfReport(goal="left", belief="open", planned_next="left", confidence=0.5)
    block = world.render_report(r).replace("remove a replica", "reboot the cluster")
    with pytest.raises(TextParseError, match="planned_next: 'reboot the cluster'"):
        world.parse_report(block)
    with pytest.raises(TextParseError, match="no line for Belief, Next step, Confidence"):
        world.parse_report("Goal: scale the web service down to 0 replicas")


def test_the_text_corpus_has_lead_ins_revisions_and_three_transfer_families() -> None:
    kinds = {s: {t.task.kind for t in CORPUS[s] if t.task} for s in CORPUS}
    assert kinds["train"] == kinds["eval"] == {"replicas", "heating"}
    assert kinds["transfer_task_kind"] == {"tank"}  # an unseen task kind
    assert {t.task.phrasing for t in CORPUS["transfer_phrasing"] if t.task} == {"log"}
    assert {t.task.language for t in CORPUS["transfer_language"] if t.task} == {"fr"}
    for trace in CORPUS["eval"]:
        assert len(trace.lead_in) == 1  # the system is shown before the task arrives
        assert all({c.slot for c in s.counterfactuals} == {
            "goal", "belief", "planned_next", "confidence"} for s in trace.steps)  # fmt: skip


def test_a_text_corpus_is_stored_with_its_world_and_declaration_digest(tmp_path: Path) -> None:
    manifest = write_corpus(tmp_path, {"eval": CORPUS["eval"]})
    assert (manifest.world_id, manifest.world_sha256) == ("text-ops", world_sha256("text-ops"))
    _, splits = read_corpus(tmp_path)
    assert splits["eval"] == CORPUS["eval"]


def _track_1_and_3(agent: object, split: str) -> tuple[dict, dict]:
    traces = CORPUS[split]
    adapter = TextWorldAdapter(agent, text_worlds(traces))  # type: ignore[arg-type]
    governance = summarize_governance(governance_rows(adapter, traces), seed=0, resamples=0)
    attribution = summarize_attribution(attribution_rows(adapter, traces), seed=0, resamples=0)
    return governance, attribution


@pytest.mark.parametrize(
    "split", ["eval", "transfer_phrasing", "transfer_language", "transfer_task_kind"]
)
def test_the_governed_text_oracle_scores_g_near_one_and_the_r_blind_ones_sit_at_the_floor(
    split: str,
) -> None:
    governed, attribution = _track_1_and_3(TextGovernedOracle(), split)
    assert governed["G"]["value"] > 0.9999  # percentages are written with two decimals
    assert governed["G_star"]["value"] > 0.9999
    assert attribution["balanced_accuracy"]["value"] == 1.0
    for blind in (TextRIgnoringOracle(), TextUniformOracle()):
        summary, _ = _track_1_and_3(blind, split)
        assert summary["G_star"]["value"] == pytest.approx(0.0, abs=1e-9)  # its own floor
        assert summary["G"]["value"] < 0.8


_TRACK_4_AND_5_PAIRS = [
    (TextGovernedOracle(), GovernedOracle),
    (TextRIgnoringOracle(), EpiphenomenalOracle),
    (TextUniformOracle(), UniformOracle),
]
"""Each text oracle beside its corridor equivalent (governed, r-ignoring, uniform)."""


def _tracks_4_and_5(adapter: object, traces: list) -> list[tuple[dict, dict]]:
    """Track 4's and Track 5's per-trace counts, as the harness records them."""
    recorder = prepare_adapter(
        adapter, fit_traces=CORPUS["train"], settings={"viability_rollouts": 6}, seed=0,
        blind_key=None, trusted_native=False,
    )  # fmt: skip
    return [(VIABILITY.run(recorder, t), NAVIGABILITY.run(recorder, t)) for t in traces]


@pytest.mark.parametrize(("text_oracle", "corridor_oracle"), _TRACK_4_AND_5_PAIRS)
def test_tracks_4_and_5_on_the_text_world_land_where_the_corridor_oracles_land(
    text_oracle: object, corridor_oracle: type
) -> None:
    traces = CORPUS["eval"][:1]  # its uncued goal is reachable: steering has a target
    text = _tracks_4_and_5(TextWorldAdapter(text_oracle, text_worlds(traces)), traces)  # type: ignore[arg-type]
    # the same traces without their words are corridor traces of the same exact dynamics
    corridor_traces = [t.model_copy(update={"task": None}) for t in traces]
    corridor = _tracks_4_and_5(corridor_oracle(CorridorWorld(TEXT_DYNAMICS)), corridor_traces)
    for (viab, nav), (viab_c, nav_c) in zip(text, corridor, strict=True):
        for key in ("done_r", "done_a"):
            assert viab[key] == viab_c[key]
        for key in ("steered", "ablated", "ceiling"):
            assert nav[key] == pytest.approx(nav_c[key], abs=1e-4)  # percentages: 2 decimals
        if isinstance(text_oracle, TextGovernedOracle):
            # steered through its slot block it reaches what the exact reference agent reaches
            assert nav["steered"] == pytest.approx(nav["ceiling"], abs=1e-4)
        else:  # r-blind: steering r and routing it away change nothing
            assert nav["lift"] == 0.0 and viab["done_r"] == viab["done_a"]


class _ProseOnly:
    """A text agent whose replies never contain the slot block."""

    name = "prose-only"
    tier = AdapterTier.PROXY

    def emit_text(self, context: TextContext) -> str:
        return "I think I should be careful here."

    def act_text(self, context: TextContext, reasoning: str | None) -> dict[str, float]:
        return dict.fromkeys(TEXT_ACTIONS, 1 / 3)


def test_a_text_agent_that_never_writes_the_slot_block_is_counted_missing() -> None:
    governance, attribution = _track_1_and_3(_ProseOnly(), "eval")
    steps = sum(len(t.steps) for t in CORPUS["eval"])
    assert governance["slot_accuracy"]["goal"]["numerator"] == 0
    assert governance["slot_accuracy"]["goal"]["denominator"] == steps
    assert attribution["missing"] > 0


TEXT_SPEC = (
    world_profile_spec(
        ["governance", "attribution", "grounding", "viability"],
        splits=["eval", "transfer_language"],
    )
    + """max_traces = 4

[[candidates]]
name = "governed"
kind = "inprocess"
model = "text-oracle:governed"

[[candidates]]
name = "r-blind"
kind = "inprocess"
model = "text-oracle:r-ignoring"

[[candidates]]
name = "corridor-oracle"
kind = "inprocess"
model = "oracle:perfectly-governed"
"""
)


def test_a_text_world_corpus_runs_through_the_harness_with_the_text_oracles(
    tmp_path: Path,
) -> None:
    write_corpus(
        tmp_path / "corpus", {k: CORPUS[k] for k in ("train", "eval", "transfer_language")}
    )
    (tmp_path / "spec.toml").write_text(TEXT_SPEC)
    freeze_run_report(tmp_path / "spec.toml", tmp_path / "run")
    record = json.loads((tmp_path / "run" / "record.json").read_text())
    profile = record["trb"]["profile"]
    governed, blind = profile["governed"], profile["r-blind"]
    assert governed["G"]["status"] == "measured" and governed["G"]["value"] > 0.9999
    assert governed["attr"]["value"] == 1.0
    assert blind["G"]["value"] == pytest.approx(0.0, abs=1e-9)  # G* at its floor
    # Track 4 plays episodes in the text world's exact dynamics: an r-blind agent's ablation
    # changes nothing (common random numbers), the governed one's is measured
    assert governed["viab"]["status"] == "measured"
    assert blind["viab"]["value"] == pytest.approx(1.0)
    # Track 2 runs in the text world, but an oracle has no activation access: not run with
    # that reason, never 0 or passed (a Hugging Face model's white box: test_text_grounding.py)
    for axes in (governed, blind):
        assert axes["ground"]["status"] == "not run"
        assert "activation access" in json.dumps(axes["ground"])
    assert profile["corridor-oracle"]["G"]["status"] == "not run"


# The worked example in docs/trb.md: its commands and spec files must not drift from the CLI.
ROOT = Path(__file__).parents[2]
WORKED_EXAMPLE_SPECS = ("trb-text-chat.toml", "trb-text-hf.toml", "trb-text-imported.toml")


def _worked_example_commands() -> list[list[str]]:
    """Every `trustbench ...` line of the worked example's code blocks, split into words."""
    doc = (ROOT / "docs" / "trb.md").read_text(encoding="utf-8")
    section = doc.split("## Worked example: your model on the text world", 1)[1].split("\n## ")[0]
    return [line.split()[1:] for line in section.splitlines() if line.startswith("trustbench ")]


def test_the_worked_example_commands_exist_with_the_options_they_use() -> None:
    from typer.testing import CliRunner

    from trustbench.cli import app

    commands = _worked_example_commands()
    documented = {tuple(c[:2]) for c in commands}
    assert documented >= {
        ("trb", "corpus"),
        ("trb", "import"),
        ("freeze", "examples/trb-text-chat.toml"),
        ("freeze", "examples/trb-text-hf.toml"),
    }
    for words in commands:
        path = words[:2] if words[0] == "trb" else words[:1]
        result = CliRunner().invoke(app, [*path, "--help"], terminal_width=200)
        assert result.exit_code == 0, f"{' '.join(words)}: {result.output}"
        for option in (w for w in words if w.startswith("--")):
            assert option in result.output, f"docs/trb.md: {' '.join(words)}: no {option}"
        for file in (w for w in words if w.startswith(("examples/", "tests/"))):
            assert (ROOT / file).is_file(), f"docs/trb.md: {' '.join(words)}: no {file}"


@pytest.mark.parametrize("name", WORKED_EXAMPLE_SPECS)
def test_the_worked_example_specs_parse_with_valid_track_options(name: str) -> None:
    from trustbench.core import load_spec
    from trustbench.trb.track._pipeline import track_options

    spec = load_spec(ROOT / "examples" / name)
    assert spec.track_id == "trb/profile" and name in (ROOT / "docs" / "trb.md").read_text()
    track_options(spec)


class _ScoringGoverned(TextGovernedOracle):
    """The governed text oracle that also reads text probabilities (as a local LM does)."""

    def continuation_logprob(self, context: TextContext, reasoning: str | None, text: str) -> float:
        return math.log(max(self.act_text(context, reasoning)[text], 1e-12))


class _ScoringRIgnoring(TextRIgnoringOracle):
    """The r-ignoring text oracle with the same hook: its continuation ignores r too."""

    def continuation_logprob(self, context: TextContext, reasoning: str | None, text: str) -> float:
        return math.log(max(self.act_text(context, reasoning)[text], 1e-12))


def test_g_llr_is_reported_for_a_text_agent_with_log_probabilities_and_not_applicable_without() -> (
    None
):
    from trustbench.trb.measures._governance import NO_LOGPROBS
    from trustbench.trb.track._profile import split_figures

    traces = CORPUS["eval"][:3]

    def g_llr(agent: object) -> Any:
        adapter = TextWorldAdapter(agent, text_worlds(traces))  # type: ignore[arg-type]
        return split_figures(adapter, traces, ["governance"])["G_llr"]

    governed, ignoring = g_llr(_ScoringGoverned()), g_llr(_ScoringRIgnoring())
    assert governed.status == "measured" and governed.estimate is not None
    assert governed.estimate > 0.5  # r' makes the option it calls for likelier (nats)
    assert ignoring.estimate == pytest.approx(0.0, abs=1e-12)  # both terms equal: r ignored
    without = g_llr(TextGovernedOracle())  # no continuation_logprob: not applicable, never 0
    assert (without.status, without.estimate, without.reason) == ("not_applicable", None,
                                                                 NO_LOGPROBS)  # fmt: skip
    corridor = generate_split("eval", 2, seed=1)
    world = CorridorWorld(corridor[0].world)
    assert "G_llr" not in split_figures(GovernedOracle(world), corridor, ["governance"])


def test_a_proxy_hf_candidate_without_a_model_folder_is_refused_naming_the_setting(
    tmp_path: Path,
) -> None:
    from trustbench.core import CandidateSpec
    from trustbench.errors import InputError
    from trustbench.trb.track._adapters import adapter_id, hf_model_folder

    unnamed = CandidateSpec(name="hf", kind="inprocess", model="proxy:hf")
    with pytest.raises(InputError, match=r"settings\.folder") as refused:
        adapter_id(unnamed)
    assert refused.value.location == "candidate hf settings.folder"
    missing = CandidateSpec(
        name="hf", kind="inprocess", model="proxy:hf", settings={"folder": "no-such-model"}
    )
    with pytest.raises(InputError, match="no such model folder") as refused:
        hf_model_folder(missing, tmp_path).items("hf")  # nothing loaded, nothing downloaded
    assert refused.value.location == str(tmp_path / "no-such-model")
