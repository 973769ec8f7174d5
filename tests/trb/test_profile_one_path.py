"""One code path for the TRB profile (issue 25, part 3): the library and the track agree.

The track (`trb/profile`, through the ledger) and the library (`measured_profile`, in this
process; `run_reference` calls it) both run the registered measures through
`trb.track._profile_core`, so a measure added from outside reaches both, and both give the
same profile vector on the same adapters and traces.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from test_trb_track import freeze_run_report, write_spec

from trustbench.core import load_spec
from trustbench.trb.track import builtin_spec, register_measure, unregister_measure
from trustbench.trb.track._measures import StatsPlan
from trustbench.trb.track._profile_core import measured_profile
from trustbench.trb.track._profile_track import TrbProfileTrack, run_settings

HERE = Path(__file__).parent


def _library_profile_of_run(run_dir: Path) -> dict[str, Any]:
    """The library's profile on the adapters, traces and settings a frozen run used."""
    from trustbench.core import Manifest

    manifest = Manifest.model_validate_json((run_dir / "manifest.json").read_text())
    track = TrbProfileTrack()
    options, corpus, cases, measures = track.prepared(manifest)
    candidates = [c.name for c in manifest.spec.candidates]
    sources = {c: track._source(manifest, c) for c in candidates}
    builders = {
        c: (lambda trace, s=s: s.build(trace.world, None, corpus.encoding(trace.split)))
        for c, s in sources.items()
    }
    analysis = manifest.spec.analysis
    assert manifest.spec.trials_per_case == 1
    return measured_profile(
        builders,
        [cases[k] for k in sorted(cases)],
        measures=[target for _, target in measures],
        stats=StatsPlan(analysis.confidence, analysis.bootstrap_seed, analysis.bootstrap_resamples),
        corpus_sha=corpus.manifest.corpus_sha256,
        fit_traces=(corpus.splits.get("train") or [])[: options.grounding_fit_traces],
        settings=run_settings(options),
        seed=options.adapter_seed,
        trusted_native=frozenset(c for c, s in sources.items() if s.model is not None),
        blind_key=manifest.manifest_sha256,
    )


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
    library = _library_profile_of_run(tmp_path / "run")["profile"]
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
    library = _library_profile_of_run(tmp_path / "run")
    track_profile = record["trb"]["profile"]
    assert set(track_profile) == set(library["profile"]) and len(track_profile) == 8
    for candidate, axes in track_profile.items():
        # Headlines too are equal to rounding only (see the figures below).
        assert _rounded(library["profile"][candidate]) == _rounded(axes), candidate
    assert track_profile["trace-ai-full"]["G"]["status"] == "measured"
    # Not only the headlines: every figure of every candidate is the same (to rounding: the
    # ledger hands trials back in run order, the library in trace order, so sums differ in
    # their last bit).
    for candidate, figures in record["figures"].items():
        ours = {f.name: json.loads(f.model_dump_json()) for f in library["figures"][candidate]}
        shared = [fig for fig in figures if fig["name"] in ours]
        assert len(shared) > 50, candidate
        for fig in shared:
            mine = ours[fig["name"]]
            assert (mine["status"], mine["denominator"]) == (fig["status"], fig["denominator"])
            assert mine["estimate"] == pytest.approx(fig["estimate"], abs=1e-12), fig["name"]
