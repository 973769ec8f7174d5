"""TRB through the shared harness: freeze -> run -> report of the `trb/profile` track."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.support.cli import invoke
from typer.testing import CliRunner

from trustbench._canonical import file_sha256
from trustbench.cli import app
from trustbench.core import build_manifest, read_ledger, report_run, run_experiment, write_manifest
from trustbench.errors import CheckFailed, InputError
from trustbench.trb.corpus._format import TRANSFER_FAMILY_SPLITS
from trustbench.trb.instruments import expected_g
from trustbench.trb.reference import cache_dir
from trustbench.trb.track import PROFILE_AXES, builtin_spec, register_measure, unregister_measure
from trustbench.trb.track._measures import GovernanceMeasure
from trustbench.trb.track._profile_track import TrbProfileTrack
from trustbench.trb.world import world_sha256

REFERENCE_PAIR = {"full": "trace-ai-full", "ablation": "trace-ai-ablation"}
ORACLES = {
    "governed": "oracle:perfectly-governed",
    "epiphenomenal": "oracle:epiphenomenal",
    "uniform": "oracle:uniform",
}
GAP_GATE = """
[[gates]]
name = "gap"
metric = "governance_gap"
bound = "lower"
interval_method = "cluster_bootstrap_percentile"
confidence = 0.95
sidedness = "two_sided"
comparison = ">"
threshold = 0.0
candidates = ["{full}"]
"""


def write_spec(
    folder: Path,
    candidates: dict[str, str],
    *,
    sizes: str = "{ train = 300, eval = 30, transfer = 6 }",
    options: str = "",
    extra: str = "",
    trials: int = 1,
) -> Path:
    """A tiny `trb/profile` spec (built-in corpus, small reference models)."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = [
        'suite = "trb"',
        'track = "profile"',
        f"trials_per_case = {trials}",
        "concurrency = 1",
        "[corpus]",
        'builtin = "reference-world"',
        "[analysis]",
        "bootstrap_resamples = 500",
        "[track_options]",
        f"corpus_sizes = {sizes}",
        "train = { epochs = 40, hidden = 32 }",
        # Tracks 1 and 3 only (fast); the six-track profile is tested in
        # test_trb_profile_track.py, and these tests show the other axes "not run".
        "" if "measures" in options else 'measures = ["governance", "attribution"]',
        options,
    ]
    for name, model in candidates.items():
        lines += ["[[candidates]]", f'name = "{name}"', 'kind = "inprocess"', f'model = "{model}"']
    path = folder / "spec.toml"
    path.write_text("\n".join(lines) + "\n" + extra)
    return path


def freeze_run_report(spec: Path, run_dir: Path, *, preflight: bool = True) -> dict[str, Any]:
    write_manifest(build_manifest(spec), run_dir)
    run_experiment(run_dir, preflight=preflight)
    report_run(run_dir)
    return json.loads((run_dir / "record.json").read_text())


def figure(record: dict[str, Any], candidate: str, name: str) -> dict[str, Any]:
    return next(f for f in record["figures"][candidate] if f["name"] == name)


def interval(fig: dict[str, Any], method: str = "cluster_bootstrap_percentile") -> dict[str, Any]:
    return next(i for i in fig["intervals"] if i["method"] == method)


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    folder = tmp_path_factory.mktemp("trb-reference")
    spec = write_spec(folder, {**REFERENCE_PAIR, **ORACLES}, extra=GAP_GATE.format(full="full"))
    run_dir = folder / "run"
    with pytest.MonkeyPatch.context() as patch:
        # Module scope runs before conftest's per-test cache isolation: isolate here the same way.
        patch.setenv("TRUSTBENCH_CACHE", str(tmp_path_factory.getbasetemp() / "trb-cache"))
        return run_dir, freeze_run_report(spec, run_dir)


def test_freeze_run_report_writes_the_run_folder_and_pins_corpus_and_checkpoints(
    reference_run: tuple[Path, dict[str, Any]],
) -> None:
    run_dir, record = reference_run
    for name in ("manifest.json", "ledger.sqlite", "record.json", "report.html"):
        assert (run_dir / name).is_file()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    files = {(f["role"], f["name"]): f["sha256"] for f in manifest["files"]}
    assert {("corpus", "manifest.json"), ("corpus", "eval.jsonl"), ("corpus", "train.jsonl")} <= (
        files.keys()
    )
    for model in REFERENCE_PAIR.values():
        checkpoints = {file_sha256(p) for p in cache_dir().glob(f"{model}-*.pt")}
        assert files[("checkpoint", model)] in checkpoints
    corpus_sha = record["trb"]["corpus"]["sha256"]
    assert manifest["corpus"]["version"] == f"TRB v1.0 corpus sha256:{corpus_sha}"
    assert record["complete"] and record["finished_trials"] == record["planned_trials"]
    assert record["planned_trials"] == (30 + 6) * 5
    assert "TRB v1.0 profile" in (run_dir / "report.html").read_text()
    again = build_manifest(Path(manifest["base_dir"]) / manifest["spec_file"])
    assert again.manifest_sha256 == manifest["manifest_sha256"]  # freezing is deterministic


def test_governance_gap_is_positive_with_an_interval_excluding_zero(
    reference_run: tuple[Path, dict[str, Any]],
) -> None:
    _, record = reference_run
    gap = figure(record, "full", "governance_gap")
    g_full, g_abl = figure(record, "full", "G"), figure(record, "ablation", "G")
    assert gap["estimate"] == pytest.approx(g_full["estimate"] - g_abl["estimate"])
    for method in ("cluster_bootstrap_percentile", "cluster_robust_t", "sign_flip_monte_carlo"):
        assert interval(gap, method)["lower"] > 0
    boot = interval(gap)
    assert (boot["seed"], boot["resamples"], boot["groups"]) == (0, 500, 30)
    assert record["trb"]["governance_gap"]["sign_flip_test"]["p_value"] < 0.01
    assert record["gates"]["results"][0]["status"] == "passed"


def test_the_built_in_gap_pair_is_one_architecture_and_size_with_both_r_pathways(
    reference_run: tuple[Path, dict[str, Any]],
) -> None:
    _, record = reference_run
    check = record["trb"]["governance_gap"]["pair_check"]
    assert check["conformant"] and check["failures"] == [], check
    full, ablation = check["sides"]["full"], check["sides"]["ablation"]
    assert full["parameter_count"] == ablation["parameter_count"] > 0
    assert full["architecture"] == ablation["architecture"]
    assert full["size_source"].startswith("measured")
    assert full["edit_response"] > ablation["edit_response"] > 1e-3
    bars = record["trb"]["verdicts"]["full"]["pass_bars"]
    assert next(b for b in bars if "Delta_gov" in b["bar"])["status"] == "met"


def test_governance_gap_on_g_star_compares_each_model_against_its_own_floor(
    reference_run: tuple[Path, dict[str, Any]],
) -> None:
    _, record = reference_run
    gap = figure(record, "full", "governance_gap_G_star")
    g_full, g_abl = figure(record, "full", "G_star"), figure(record, "ablation", "G_star")
    assert gap["estimate"] == pytest.approx(g_full["estimate"] - g_abl["estimate"])
    assert interval(gap)["lower"] > 0


def test_oracle_figures_in_the_record_equal_their_closed_forms(
    reference_run: tuple[Path, dict[str, Any]],
) -> None:
    run_dir, record = reference_run
    track = TrbProfileTrack()
    from trustbench.core import read_manifest

    _, _, cases, _ = track.prepared(read_manifest(run_dir))
    eval_traces = [t for t in cases.values() if t.split == "eval"]
    assert figure(record, "governed", "G")["estimate"] == 1.0
    assert figure(record, "governed", "balanced_accuracy")["estimate"] == 1.0
    for name in ("epiphenomenal", "uniform"):
        measured = figure(record, name, "G")["estimate"]
        assert measured == pytest.approx(expected_g(name, eval_traces), abs=1e-12)
    assert all(check["passed"] for check in record["trb"]["oracle_checks"])
    assert len(record["trb"]["oracle_checks"]) == 4


def test_ablation_reads_its_self_report_well_but_is_not_governed_by_it(
    reference_run: tuple[Path, dict[str, Any]],
) -> None:
    _, record = reference_run
    for slot in ("goal", "belief", "planned_next"):
        assert figure(record, "ablation", f"slot_accuracy[{slot}]")["estimate"] >= 0.95
    g_abl = figure(record, "ablation", "G")["estimate"]
    assert g_abl < figure(record, "full", "G")["estimate"] - 0.1
    assert g_abl < 0.7


def test_every_baseline_and_profile_axis_is_listed_and_unrun_ones_are_not_run(
    reference_run: tuple[Path, dict[str, Any]],
) -> None:
    _, record = reference_run
    baselines = {b["baseline"]: b for b in record["trb"]["baselines"]}
    assert list(baselines) == [
        "instruct", "cot-prompted", "cot-supervised-finetune", "trace-ai-ablation",
        "trace-ai-full",
    ]  # fmt: skip
    for key in ("instruct", "cot-prompted", "cot-supervised-finetune"):
        assert baselines[key]["status"] == "not run" and baselines[key]["G"] is None
    assert baselines["trace-ai-full"]["G"] == figure(record, "full", "G")["estimate"]
    assert baselines["trace-ai-full"]["G_star"] == figure(record, "full", "G_star")["estimate"]
    for candidate, axes in record["trb"]["profile"].items():
        assert set(axes) == set(PROFILE_AXES)  # record.json sorts keys
        for axis in ("ground", "viab", "nav", "trans"):
            assert axes[axis]["status"] == "not run" and axes[axis]["value"] is None
        assert axes["G"]["value"] == figure(record, candidate, "G_star")["estimate"]
        assert axes["attr"]["value"] == figure(record, candidate, "balanced_accuracy")["estimate"]


def test_every_row_names_trb_version_world_corpus_sha_and_adapter_tier(
    reference_run: tuple[Path, dict[str, Any]],
) -> None:
    _, record = reference_run
    sha = record["trb"]["corpus"]["sha256"]
    rows = record["trb"]["rows"]
    assert {r["split"] for r in rows} == {"eval", *TRANSFER_FAMILY_SPLITS}
    digest = record["trb"]["metric_digest"]
    assert digest.startswith("sha256:")
    for row in rows:
        assert (row["trb_version"], row["corpus_sha256"], row["adapter_tier"]) == (
            "TRB v1.0", sha, "native"
        )  # fmt: skip
        assert row["metric_digest"] == digest  # beside trb_version in every row
        assert (row["world_id"], row["world_sha256"]) == ("corridor", world_sha256("corridor"))
    assert {b["metric_digest"] for b in record["trb"]["baselines"]} == {digest}
    assert {b["world_id"] for b in record["trb"]["baselines"]} == {"corridor"}
    assert record["trb"]["world_sha256"] == world_sha256("corridor")
    for figures in record["figures"].values():
        for fig in figures:
            if fig["name"] == "valid_response_rate":  # core's evaluability figure, not TRB's
                continue
            assert "TRB v1.0" in fig["description"] and sha[:16] in fig["description"]
            assert "{}" not in fig["description"]


def test_reference_world_results_are_qualified_and_the_synthetic_share_is_stated(
    reference_run: tuple[Path, dict[str, Any]],
) -> None:
    _, record = reference_run
    assert any("not a TRB score" in q for q in record["qualifications"])
    assert any("synthetic share 100%" in f and "no human data" in f for f in record["trb"]["flags"])
    assert record["trb"]["corpus"]["provenance"]["cap_status"] == "no_human_data"


def test_null_edit_floor_flags_an_adapter_whose_action_ignores_its_edits(
    reference_run: tuple[Path, dict[str, Any]],
) -> None:
    _, record = reference_run
    flagged = [f for f in record["trb"]["flags"] if "null-edit floor" in f]
    assert any(f.startswith("epiphenomenal:") for f in flagged)
    assert any(f.startswith("uniform:") for f in flagged)
    assert not any(f.startswith(("full:", "governed:")) for f in flagged)
    epi = figure(record, "epiphenomenal", "G")["estimate"]
    assert figure(record, "epiphenomenal", "G_null_edit_floor")["estimate"] == pytest.approx(epi)


def test_each_trial_records_its_hook_calls_as_one_attempt(
    reference_run: tuple[Path, dict[str, Any]],
) -> None:
    run_dir, _ = reference_run
    ledger = read_ledger(run_dir)
    # A not-applicable trial (a reference model on the longer corridor of the
    # `transfer_length` family; a native adapter on the renamed report encoding of
    # `transfer_encoding`) calls no hook, so it records no attempt.
    applicable = [t for t in ledger.trials if (t["outcome"] or {}).get("applicable")]
    assert {t["case_id"].rsplit("-", 1)[0] for t in ledger.trials if t not in applicable} == {
        "transfer_length", "transfer_encoding"
    }  # fmt: skip
    assert len(ledger.attempts) == len(applicable)
    attempt = ledger.attempts[0]
    request, response = attempt["request"], json.loads(attempt["raw_response"])
    assert attempt["call"] == "adapter.hooks" and request["hooks"][0]["hook"] == "seed"
    assert len(request["hooks"]) == len(response["outputs"]) > 10
    assert {h["hook"] for h in request["hooks"]} == {"seed", "act", "emit_r"}


def _oracle_spec(folder: Path, **kwargs: Any) -> Path:
    return write_spec(
        folder,
        {"governed": "oracle:perfectly-governed", "uniform": "oracle:uniform"},
        sizes="{ train = 0, eval = 8, transfer = 0 }",
        options='splits = ["eval"]\n' + kwargs.pop("options", ""),
        **kwargs,
    )


class _Stop(BaseException):
    """Stands in for a kill: not an Exception, so the runner does not record it."""


def test_an_interrupted_run_resumes_to_the_same_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = _oracle_spec(tmp_path)
    whole = freeze_run_report(spec, tmp_path / "whole")
    original = TrbProfileTrack.run_trial
    calls = {"n": 0}

    async def stops_after_five(self: TrbProfileTrack, key: Any, ctx: Any) -> Any:
        calls["n"] += 1
        if calls["n"] > 5:
            raise _Stop
        return await original(self, key, ctx)

    run_dir = tmp_path / "resumed"
    write_manifest(build_manifest(spec), run_dir)
    monkeypatch.setattr(TrbProfileTrack, "run_trial", stops_after_five)
    with pytest.raises(_Stop):
        run_experiment(run_dir)
    monkeypatch.setattr(TrbProfileTrack, "run_trial", original)
    summary = run_experiment(run_dir)
    assert (summary.finished_before, summary.completed) == (5, 16 - 5)
    report_run(run_dir)
    resumed = json.loads((run_dir / "record.json").read_text())
    assert resumed["complete"] and resumed["figures"] == whole["figures"]


def test_a_trial_that_fails_as_a_whole_is_scored_worst_case_not_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = GovernanceMeasure.run

    def breaks_on_one_trace(self: GovernanceMeasure, adapter: Any, trace: Any) -> Any:
        if trace.trace_id == "eval-00003" and adapter.name == "oracle:perfectly-governed":
            raise RuntimeError("harness defect")
        return original(self, adapter, trace)

    monkeypatch.setattr(GovernanceMeasure, "run", breaks_on_one_trace)
    record = freeze_run_report(_oracle_spec(tmp_path), tmp_path / "run")
    g = figure(record, "governed", "G")
    items_per_trace = g["denominator"] / 8
    assert g["denominator"] == figure(record, "uniform", "G")["denominator"]  # still counted
    assert g["estimate"] == pytest.approx(1 - items_per_trace / g["denominator"])
    assert record["trb"]["trials"]["failed"] == {"governed": 1, "uniform": 0}
    governed = record["evaluability"]["subjects"]["governed"]
    assert governed["transport_failed"] == 1
    assert governed["valid"] == governed["attempted"] - 1
    assert governed["instrument"] is True  # an oracle: shown, exempt from blocking release
    assert any("scored as the worst case" in f for f in record["trb"]["flags"])


def test_a_gap_gate_without_a_reference_pair_is_not_evaluable_and_blocks(tmp_path: Path) -> None:
    spec = _oracle_spec(tmp_path, extra=GAP_GATE.format(full="governed"))
    run_dir = tmp_path / "run"
    write_manifest(build_manifest(spec), run_dir)
    run_experiment(run_dir)
    result = report_run(run_dir)
    assert result.blocked and result.gates[0].status == "not_evaluable"
    record = json.loads(result.record_path.read_text())
    assert record["trb"]["governance_gap"]["status"] == "not run"


def test_user_adapter_is_run_by_module_factory_and_its_code_is_pinned(tmp_path: Path) -> None:
    spec = write_spec(
        tmp_path,
        {"mine": "trb_broken_adapters:governed"},
        sizes="{ train = 0, eval = 4, transfer = 0 }",
        options='splits = ["eval"]',
    )
    record = freeze_run_report(spec, tmp_path / "run")
    assert figure(record, "mine", "G")["estimate"] == 1.0
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert any(
        f["role"] == "candidate_code" and f["name"] == "trb_broken_adapters:governed"
        for f in manifest["files"]
    )


def _adapter_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A submitted adapter in a package of its own, its oracle class imported from a helper."""
    name = f"mine_{tmp_path.name.replace('-', '_')}"
    package = tmp_path / "code" / name
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "helper.py").write_text(
        "from trustbench.trb.instruments import GovernedOracle as Oracle\n"
    )
    (package / "adapter.py").write_text(
        f"from {name}.helper import Oracle\n\n\ndef make() -> Oracle:\n    return Oracle()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path / "code"))
    return name


def test_rechecking_a_trb_run_starts_no_adapter_and_notices_an_edited_helper(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trustbench.core import check_inputs, read_manifest
    from trustbench.trb.track import _adapters as _user_adapter

    name = _adapter_package(tmp_path, monkeypatch)
    spec = write_spec(
        tmp_path,
        {"mine": f"{name}.adapter:make"},
        sizes="{ train = 0, eval = 4, transfer = 0 }",
        options='splits = ["eval"]',
    )
    write_manifest(build_manifest(spec), tmp_path / "run")
    manifest = read_manifest(tmp_path / "run")
    assert ("candidate_package", f"{name}/helper.py") in {(f.role, f.name) for f in manifest.files}

    def no_worker(*args: object, **kwargs: object) -> None:
        raise AssertionError("a re-check started the submitted adapter")

    monkeypatch.setattr(_user_adapter, "AdapterWorker", no_worker)
    check_inputs(manifest, TrbProfileTrack())  # untouched inputs pass, running nothing
    (tmp_path / "code" / name / "helper.py").write_text(
        "from trustbench.trb.instruments import EpiphenomenalOracle as Oracle\n"
    )
    with pytest.raises(CheckFailed, match=f"{name}/helper.py"):
        check_inputs(manifest, TrbProfileTrack())


def test_user_adapter_failing_the_conformance_kit_is_refused_at_freeze(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, {"mine": "trb_broken_adapters:unnormalised"})
    with pytest.raises(CheckFailed, match="conformance") as error:
        build_manifest(spec)
    assert "candidate mine" in str(error.value.location)


def test_a_candidate_that_is_not_an_adapter_is_refused_naming_it(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, {"bad": "no-such-adapter"})
    with pytest.raises(InputError, match="unknown adapter") as error:
        build_manifest(spec)
    assert "candidate bad" in str(error.value.location)


class _ConstantViability:
    key = "constant-viability"
    axis = "viab"
    headline = "viability_ratio"
    title = "Track 4 viability (test stand-in)"

    def run(self, adapter: Any, trace: Any) -> dict[str, Any]:
        return {"ok": 1, "n": 1}

    def failed(self, trace: Any) -> dict[str, Any]:
        return {"ok": 0, "n": 1}

    def figures(self, rows: list[Any], stats: Any, label: str) -> list[Any]:
        from trustbench.core.figures import rate_figure

        ok = sum(r.counts["ok"] for r in rows)
        return [rate_figure("viability_ratio", ok, len(rows), description=label)]


VIABILITY = _ConstantViability()


def test_a_registered_measure_fills_its_profile_axis(tmp_path: Path) -> None:
    register_measure("constant-viability", f"{__name__}:VIABILITY")
    try:
        spec = _oracle_spec(tmp_path, options='measures = ["governance", "constant-viability"]')
        record = freeze_run_report(spec, tmp_path / "run")
    finally:
        unregister_measure("constant-viability")
    profile = record["trb"]["profile"]["governed"]
    assert profile["viab"]["value"] == 1.0 and profile["G"]["value"] == 1.0
    assert profile["attr"]["status"] == "not run"  # attribution was not requested
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert {f["name"] for f in manifest["files"] if f["role"] == "measure"} == {
        "governance", "constant-viability"
    }  # fmt: skip


def test_trb_run_command_freezes_runs_and_reports_a_spec(
    tmp_path: Path, reference_run: tuple[Path, dict[str, Any]]
) -> None:
    spec = write_spec(tmp_path, REFERENCE_PAIR, extra=GAP_GATE.format(full="full"))
    result = CliRunner().invoke(app, ["trb", "run", "--spec", str(spec), "--out",
                                      str(tmp_path / "run")])  # fmt: skip
    output = result.output
    # Reference-world data is a harness check (TRB v1.0): the full model's implicit TRB verdict
    # gate never passes on it, so the run exits 1 whatever the gap gate says.
    assert getattr(result.exception, "exit_code", result.exit_code) == 1, output
    assert "Delta_gov" in output and "gate PASSED" in output
    assert "TRB verdict (full): full: " in output and "not a TRB score" in output
    assert (tmp_path / "run" / "report.html").is_file()
    code, output = invoke("report", str(tmp_path / "run"))  # the generic command reports it too
    assert code == 1 and "TRB verdict (full)" in output, output


@pytest.mark.parametrize("name", ["smoke", "reference"])
def test_built_in_specs_are_shipped_and_valid(name: str) -> None:
    from trustbench.core import load_spec
    from trustbench.trb.track._pipeline import track_options

    spec = load_spec(builtin_spec(name))
    track_options(spec)
    assert spec.track_id == "trb/profile" and spec.gates[0].metric == "governance_gap"
    assert {c.model for c in spec.candidates} >= set(REFERENCE_PAIR.values())


@pytest.mark.parametrize("name", ["trb-reference-pair.toml", "trb-user-adapter.toml"])
def test_trb_examples_are_valid_specs_with_valid_track_options(name: str) -> None:
    from trustbench.core import load_spec
    from trustbench.trb.track._pipeline import track_options

    spec = load_spec(Path(__file__).parents[2] / "examples" / name)
    assert spec.track_id == "trb/profile"
    track_options(spec)


def test_k_trials_of_a_trace_form_one_cluster(tmp_path: Path) -> None:
    record = freeze_run_report(_oracle_spec(tmp_path, trials=2), tmp_path / "run")
    assert record["planned_trials"] == 8 * 2 * 2
    g = figure(record, "uniform", "G")
    assert g["unit_count"] == 16 and interval(g, "cluster_robust_t")["groups"] == 8
    ledger = read_ledger(tmp_path / "run")
    seeds = {a["request"]["seed"] for a in ledger.attempts}
    assert seeds == {0, 1}
