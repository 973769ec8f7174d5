"""The control-path track's documentation and examples stay true to the code."""

from __future__ import annotations

from pathlib import Path

import pytest

from trustbench.core import build_manifest
from trustbench.rtb.boundaries import BOUNDARIES_UNDER_TEST, KNOWN_BAD_SAFEGUARDS
from trustbench.rtb.control._grading import OUTCOMES
from trustbench.rtb.control.track import ControlTrackOptions, demo_spec_path

ROOT = Path(__file__).parents[2]
DOC = (ROOT / "docs" / "rtb-control-track.md").read_text(encoding="utf-8")
EXAMPLES = sorted((ROOT / "examples").glob("rtb-control-*.toml"))
FIGURES = (
    "prohibited_effect_rate_lower",
    "prohibited_effect_rate_upper",
    "permitted_completion_rate",
    "evidence_completeness",
)


def test_doc_names_every_option_boundary_outcome_and_figure() -> None:
    names = [
        *ControlTrackOptions.model_fields,
        *BOUNDARIES_UNDER_TEST,
        *KNOWN_BAD_SAFEGUARDS,
        *OUTCOMES,
        *FIGURES,
    ]
    for name in names:
        assert f"`{name}`" in DOC or f'boundary = "{name}"' in DOC, name


@pytest.mark.parametrize("spec", [*EXAMPLES, demo_spec_path()], ids=lambda p: p.name)
def test_examples_and_demo_spec_freeze_to_every_scenario_for_every_candidate(spec: Path) -> None:
    manifest = build_manifest(spec)
    # Corpus v0.3: its 240 cases presented directly plus the seeded fault scenarios.
    assert manifest.plan.cases == 390
    assert (
        manifest.plan.trials == 390 * len(manifest.spec.candidates) * manifest.spec.trials_per_case
    )
    assert {f.role for f in manifest.files} >= {"corpus", "harness_code"}


def test_there_are_control_examples() -> None:
    assert len(EXAMPLES) >= 2
