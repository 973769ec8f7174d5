"""The world protocol: the corridor declared through it keeps its figures; worlds are registered."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from trustbench._canonical import json_sha256
from trustbench.errors import AlreadyRegistered, CheckFailed, InputError
from trustbench.trb import measure_profile
from trustbench.trb.adapter import ACTIONS, SelfReport, StepContext
from trustbench.trb.corpus import generate_split, read_corpus, write_corpus
from trustbench.trb.corpus._store import manifest_world
from trustbench.trb.world import (
    CORRIDOR_DECLARATION,
    DEFAULT_WORLD_ID,
    WorldDeclaration,
    declaration_sha256,
    known_world_ids,
    reference_continuation,
    register_world,
    slot_problems,
    unregister_world,
    world_for,
    world_sha256,
)

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


def test_the_corridor_declaration_states_the_adapter_contract_it_replaces() -> None:
    declaration = world_for("corridor").declaration
    assert declaration.action_space.actions == ACTIONS
    assert declaration.editable_slots == ("goal", "belief", "planned_next", "confidence")
    assert declaration.attribution_slot == "caused_by_self"
    assert set(declaration.slots) == set(SelfReport.model_fields)
    assert DEFAULT_WORLD_ID == "corridor"
    assert world_sha256("corridor") == declaration_sha256(CORRIDOR_DECLARATION)


def test_slot_problems_name_every_slot_outside_its_declared_type() -> None:
    problems = slot_problems(
        CORRIDOR_DECLARATION,
        {"goal": "up", "belief": "open", "planned_next": "left", "confidence": 1.5, "mood": "x"},
    )
    assert problems == [
        "mood: not a declared slot",
        "goal: 'up' is not one of ['left', 'right']",
        "confidence: 1.5 is outside [0.0, 1.0]",
    ]  # caused_by_self is nullable, so its absence is no problem


def test_a_declaration_refuses_an_attribution_slot_it_does_not_declare() -> None:
    with pytest.raises(ValidationError, match="attribution_slot 'credit' is not declared"):
        WorldDeclaration.model_validate(
            {**CORRIDOR_DECLARATION.model_dump(), "attribution_slot": "credit"}
        )


class _PlugInWorld:
    def __init__(self, world_id: str = "plug-in") -> None:
        self.declaration = CORRIDOR_DECLARATION.model_copy(update={"world_id": world_id})

    def render_context(self, context: StepContext) -> str:
        return f"step {context.t}"

    def reference_continuation(self, r: SelfReport) -> dict[str, float]:
        return reference_continuation(r)


def test_a_registered_world_is_found_by_id_and_a_built_in_id_is_never_replaced() -> None:
    register_world(_PlugInWorld())
    try:
        assert world_for("plug-in").declaration.world_id == "plug-in"
        assert "plug-in" in known_world_ids()
        with pytest.raises(AlreadyRegistered, match="'plug-in' is already registered"):
            register_world(_PlugInWorld())
    finally:
        unregister_world("plug-in")
    with pytest.raises(AlreadyRegistered, match="'corridor' is built in"):
        register_world(_PlugInWorld("corridor"))
    with pytest.raises(InputError, match="unknown TRB world 'plug-in'; registered: corridor"):
        world_for("plug-in")


def test_a_corridor_corpus_manifest_records_its_world_and_declaration_digest(
    tmp_path: Path,
) -> None:
    manifest = write_corpus(tmp_path, {"eval": generate_split("eval", 2, seed=0)})
    assert (manifest.world_id, manifest.world_sha256) == ("corridor", world_sha256("corridor"))
    assert read_corpus(tmp_path)[0] == manifest


def test_a_manifest_written_before_worlds_reads_as_the_corridor(tmp_path: Path) -> None:
    write_corpus(tmp_path, {"eval": generate_split("eval", 2, seed=0)})
    raw = json.loads((tmp_path / "manifest.json").read_text())
    del raw["world_id"], raw["world_sha256"]
    (tmp_path / "manifest.json").write_text(json.dumps(raw))
    manifest = read_corpus(tmp_path)[0]
    assert manifest_world(manifest) == {
        "world_id": "corridor", "world_sha256": world_sha256("corridor"),
    }  # fmt: skip


def test_a_corpus_whose_world_declaration_changed_is_refused_naming_the_field(
    tmp_path: Path,
) -> None:
    write_corpus(tmp_path, {"eval": generate_split("eval", 2, seed=0)})
    raw = json.loads((tmp_path / "manifest.json").read_text())
    (tmp_path / "manifest.json").write_text(json.dumps({**raw, "world_sha256": "sha256:00"}))
    with pytest.raises(CheckFailed, match="world_sha256") as refused:
        read_corpus(tmp_path)
    assert refused.value.exit_code == 1
    (tmp_path / "manifest.json").write_text(json.dumps({**raw, "world_id": "maze"}))
    with pytest.raises(InputError, match="unknown TRB world 'maze'") as unknown:
        read_corpus(tmp_path)
    assert unknown.value.location is not None and unknown.value.location.endswith("#/world_id")
