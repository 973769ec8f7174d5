"""One code path for the TRB profile (issue 25, part 3): the library and the track agree.

The track (`trb/profile`, through the ledger) and the library (`trustbench.trb.measure_profile`
and `measured_profile`, in this process; `run_reference` calls the latter) both run the
registered measures through `trb.track._profile`, so a measure added from outside reaches
both, and both give the same profile vector on the same adapters and traces.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from test_trb_track import freeze_run_report, write_spec

from trustbench.core import load_spec
from trustbench.trb import measure_profile
from trustbench.trb.track import builtin_spec, register_measure, unregister_measure
from trustbench.trb.track._measures import StatsPlan
from trustbench.trb.track._profile import measured_profile

HERE = Path(__file__).parent


@pytest.fixture
def outside_measure() -> Iterator[Callable[[str, str], None]]:
    """`register_measure` for one test: what it registers is unregistered after."""
    keys: list[str] = []

    def register(key: str, target: str) -> None:
        register_measure(key, target)
        keys.append(key)

    yield register
    for key in keys:
        unregister_measure(key)


def test_a_measure_registered_from_outside_reaches_the_library_profile_and_the_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, outside_measure: Callable[[str, str], None]
) -> None:
    monkeypatch.syspath_prepend(str(HERE))
    outside_measure("outside-attribution", "trb_outside_measure:PLAIN")
    spec = write_spec(
        tmp_path,
        {"governed": "oracle:perfectly-governed", "uniform": "oracle:uniform"},
        sizes="{ train = 40, eval = 6, transfer = 6 }",
        options='measures = ["governance", "outside-attribution"]\nsplits = ["eval"]\n'
        "grounding_fit_traces = 40",
    )
    record = freeze_run_report(spec, tmp_path / "run")
    library = measure_profile(tmp_path / "run").profile
    for candidate in ("governed", "uniform"):
        for profile in (record["trb"]["profile"][candidate], library[candidate]):
            assert profile["attr"]["figure"] == "outside_rate"
            assert profile["attr"]["status"] == "measured" and profile["attr"]["value"] == 1.0
            assert profile["viab"]["status"] == "not run"  # not listed, not 0
    assert library == record["trb"]["profile"]


def test_registering_a_second_measure_on_an_axis_is_refused_in_the_library_too(
    monkeypatch: pytest.MonkeyPatch, outside_measure: Callable[[str, str], None]
) -> None:
    from trustbench.errors import InputError

    monkeypatch.syspath_prepend(str(HERE))
    outside_measure("governance-again", "trb_outside_measure:SECOND_GOVERNANCE")
    with pytest.raises(InputError, match="both fill the profile axis 'G'"):
        measured_profile(
            {}, [], measures=["governance", "governance-again"],
            stats=StatsPlan(0.95, 1, 100), corpus_sha="0" * 64, fit_traces=[], settings={},
        )  # fmt: skip


def _rounded(value: Any) -> Any:
    """`value` with every float rounded to 12 places (sums in other orders differ in a last bit)."""
    if isinstance(value, dict):
        return {key: _rounded(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_rounded(item) for item in value]
    return round(value, 12) if isinstance(value, float) else value


@pytest.mark.slow
def test_library_and_track_give_identical_profiles_on_the_smoke_settings(
    tmp_path: Path,
) -> None:
    # The built-in smoke spec as shipped (its corpus, models, sizes, measures and all eight
    # candidates), on its first 3 traces per split instead of 40 to keep the test short.
    text = builtin_spec("smoke").read_text()
    assert "max_traces = 40" in text
    spec = tmp_path / "smoke.toml"
    spec.write_text(text.replace("max_traces = 40", "max_traces = 3"))
    load_spec(spec)
    record = freeze_run_report(spec, tmp_path / "run")
    library = measure_profile(tmp_path / "run")
    track_profile = record["trb"]["profile"]
    assert set(track_profile) == set(library.profile) and len(track_profile) == 8
    for candidate, axes in track_profile.items():
        # Headlines too are equal to rounding only (see the figures below).
        assert _rounded(library.profile[candidate]) == _rounded(axes), candidate
    assert track_profile["trace-ai-full"]["G"]["status"] == "measured"
    # Not only the headlines: every figure of every candidate is the same (to rounding: the
    # ledger hands trials back in completion order, the library in run order, so sums differ in
    # their last bit).
    for candidate, figures in record["figures"].items():
        ours = {f.name: json.loads(f.model_dump_json()) for f in library.figures[candidate]}
        shared = [fig for fig in figures if fig["name"] in ours]
        assert len(shared) > 50, candidate
        for fig in shared:
            mine = ours[fig["name"]]
            assert (mine["status"], mine["denominator"]) == (fig["status"], fig["denominator"])
            assert mine["estimate"] == pytest.approx(fig["estimate"], abs=1e-12), fig["name"]


def test_measure_profile_gives_the_profile_and_governance_gap_trb_run_reports(
    tmp_path: Path,
) -> None:
    # A small spec of the reference pair (so Delta_gov is measured) and two oracles, on three
    # measures; the frozen run, the spec file and the loaded spec must give the record's numbers,
    # intervals included (the library measures the trials in the run's seeded order).
    spec = write_spec(
        tmp_path,
        {"full": "trace-ai-full", "ablation": "trace-ai-ablation",
         "governed": "oracle:perfectly-governed", "uniform": "oracle:uniform"},
        sizes="{ train = 60, eval = 5, transfer = 6 }",
        options='measures = ["governance", "attribution", "viability"]\n'
        'splits = ["eval"]\ngrounding_fit_traces = 20\nviability_rollouts = 1',
    )  # fmt: skip
    record = freeze_run_report(spec, tmp_path / "run")
    assert record["trb"]["governance_gap"]["status"] == "run"
    for source in (tmp_path / "run", spec, load_spec(spec)):
        got = measure_profile(source, base_dir=tmp_path)
        assert _rounded(got.profile) == _rounded(record["trb"]["profile"])
        assert _rounded(got.governance_gap) == _rounded(record["trb"]["governance_gap"])
    assert got.profile["full"]["G"]["status"] == "measured"
    assert got.profile["full"]["viab"]["figure"] == "completion_retention_ratio"


def test_measure_profile_refuses_a_path_that_is_no_spec_naming_it(tmp_path: Path) -> None:
    from trustbench.errors import InputError

    with pytest.raises(InputError) as refused:
        measure_profile(tmp_path / "nothing.toml")
    assert "nothing.toml" in str(refused.value) + str(refused.value.location)
