"""The gap pair is checked (issue 53): a declared ablation must be the same architecture and
size with its r pathway present, else Delta_gov is "not established", naming the failed check."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from test_trb_track import freeze_run_report, write_spec

from trustbench.core.figures import Figure
from trustbench.trb.track._analysis import gap_pair_check
from trustbench.trb.track._profile import Collected

HERE = Path(__file__).parent
PAIR = {"full": "trb_v4_cheats:DeclaredFull", "ablation": "trb_v4_cheats:SabotagedAblation"}


def _run(tmp_path: Path, sizes: tuple[int, int]) -> dict[str, Any]:
    """A user-declared gap pair: an honest governed full model and an r-blind 'ablation'."""
    spec = write_spec(
        tmp_path,
        {},
        sizes="{ train = 20, eval = 4, transfer = 6 }",
        options='splits = ["eval"]\nmeasures = ["governance"]\ngap = ["full", "ablation"]\n'
        "conformance_traces = 1",
    )
    for (name, target), size in zip(PAIR.items(), sizes, strict=True):
        spec.write_text(
            spec.read_text() + f'[[candidates]]\nname = "{name}"\nkind = "inprocess"\n'
            f'model = "{target}"\nsettings = {{ parameter_count = {size}, '
            'architecture = "corridor-policy" }\n'
        )
    sys.path.insert(0, str(HERE))
    try:
        return freeze_run_report(spec, tmp_path / "run")
    finally:
        sys.path.remove(str(HERE))


@pytest.fixture(scope="module")
def same_size_claimed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _run(tmp_path_factory.mktemp("gap-same"), (4096, 4096))


def test_an_r_blind_ablation_leaves_delta_gov_not_established_naming_the_pathway(
    same_size_claimed: dict[str, Any],
) -> None:
    gap = same_size_claimed["trb"]["governance_gap"]
    assert gap["estimate"] > 0.3  # the sabotage works on the number itself
    check = gap["pair_check"]
    assert not check["conformant"]
    assert check["sides"]["ablation"]["edit_response"] < 1e-3  # 1e-4 nudges only
    assert check["sides"]["ablation"]["size_source"] == "declared in settings (not verified)"
    assert [f for f in check["failures"] if f.startswith("ablation: no r pathway")]
    assert gap["pass_bar_met"] is None
    bar = next(
        b
        for b in same_size_claimed["trb"]["verdicts"]["full"]["pass_bars"]
        if "Delta_gov" in b["bar"]
    )
    assert bar["status"] == "not established" and "Delta_gov not established" in bar["why"]
    assert "ablation: no r pathway" in bar["why"]
    assert same_size_claimed["trb"]["verdicts"]["full"]["verdict"] != "trustworthy"


def test_a_pair_of_different_declared_sizes_or_architectures_is_named() -> None:
    candidates = [
        SimpleNamespace(name="full", settings={"parameter_count": 4096, "architecture": "a"}),
        SimpleNamespace(name="ablation", settings={"parameter_count": 12, "architecture": "b"}),
    ]
    manifest = SimpleNamespace(spec=SimpleNamespace(candidates=candidates))
    response = Figure(
        name="edit_response", estimate=0.2, denominator=4, description="", kind="mean"
    )
    check = gap_pair_check(
        manifest,  # type: ignore[arg-type]
        Collected(),
        {"full": [response], "ablation": [response]},
        ("full", "ablation"),
    )
    assert check is not None and not check["conformant"]
    assert check["failures"] == [
        "not the same size: full has 4096 parameters, ablation 12",
        "not the same architecture: full 'a', ablation 'b'",
    ]
    undeclared = SimpleNamespace(spec=SimpleNamespace(candidates=[]))
    check = gap_pair_check(
        undeclared,  # type: ignore[arg-type]
        Collected(),
        {"full": [response], "ablation": [response]},
        ("full", "ablation"),
    )
    assert check is not None
    assert "full: parameter count not known (declare settings.parameter_count)" in check["failures"]
