"""The world protocol: the corridor declared through it keeps its figures; worlds are registered."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trustbench._canonical import json_sha256
from trustbench.trb import measure_profile

PIN_SPEC = """suite = "trb"
track = "profile"
trials_per_case = 1
concurrency = 1
[corpus]
builtin = "reference-world"
[analysis]
bootstrap_resamples = 200
[track_options]
corpus_sizes = { train = 20, eval = 8, transfer = 4 }
splits = ["eval"]
measures = ["governance", "attribution", "viability", "navigability"]
[[candidates]]
name = "governed"
kind = "inprocess"
model = "oracle:perfectly-governed"
[[candidates]]
name = "epiphenomenal"
kind = "inprocess"
model = "oracle:epiphenomenal"
[[candidates]]
name = "uniform"
kind = "inprocess"
model = "oracle:uniform"
"""

PINNED_FIGURES_SHA256 = "86195d1d41cfec7c7f1a8fbe46e3d46206e82bf5b3ebc946002d430012b6320b"
"""SHA-256 of every figure of the small-seed profile above, rounded to 12 digits, computed
before the corridor was declared through the world protocol (commit 76b9312)."""


def _rounded(figures: dict[str, Any]) -> dict[str, dict[str, float | None]]:
    return {
        candidate: {
            f.name: None if f.estimate is None else round(float(f.estimate), 12) for f in listed
        }
        for candidate, listed in figures.items()
    }


def test_the_corridor_declared_through_the_protocol_keeps_its_profile_figures(
    tmp_path: Path,
) -> None:
    (tmp_path / "spec.toml").write_text(PIN_SPEC)
    figures = _rounded(measure_profile(tmp_path / "spec.toml").figures)
    assert figures["epiphenomenal"]["G"] == 0.578972153863
    assert figures["uniform"]["G_star"] == 0.0
    assert figures["governed"]["G_star"] == 1.0
    assert json_sha256(figures) == PINNED_FIGURES_SHA256, json.dumps(figures, sort_keys=True)
