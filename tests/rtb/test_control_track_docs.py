"""The control-path track's documentation and examples stay true to the code."""

from __future__ import annotations

from pathlib import Path

import pytest

from trustbench.core import build_manifest
from trustbench.rtb.boundaries import BOUNDARIES_UNDER_TEST, KNOWN_BAD_SAFEGUARDS
from trustbench.rtb.control._cases import control_scenarios
from trustbench.rtb.control._grading import OUTCOMES
from trustbench.rtb.control.track import ControlTrackOptions, demo_spec_path
from trustbench.rtb.corpus import builtin_corpus_root, load_corpus
from trustbench.rtb.corpus._load import declared_subset

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
    # The spec's corpus (its declared family subset, if any): every case presented directly
    # plus the seeded fault scenarios.
    assert manifest.spec.corpus.builtin is not None
    corpus = load_corpus(builtin_corpus_root(manifest.spec.corpus.builtin))
    cases = declared_subset(corpus, manifest.spec.corpus.families).cases
    scenarios = len(control_scenarios(cases))
    assert manifest.plan.cases == scenarios > len(cases)
    assert (
        manifest.plan.trials
        == scenarios * len(manifest.spec.candidates) * manifest.spec.trials_per_case
    )
    assert {f.role for f in manifest.files} >= {"corpus", "harness_code"}


def test_there_are_control_examples() -> None:
    assert len(EXAMPLES) >= 2
