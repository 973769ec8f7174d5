from __future__ import annotations

from trustbench.trb.corpus._generate import TRANSFER_ENCODINGS
from trustbench.trb.measures import TRANSFER_FAMILIES, family_splits, transfer
from trustbench.trb.world import CorridorConfig


def test_each_family_changes_the_world_or_the_report_encoding_and_is_seeded():
    default = CorridorConfig()
    # A family that keeps the training world changes how the report is asked for instead.
    assert all(
        cfg != default or name in TRANSFER_ENCODINGS for name, cfg in TRANSFER_FAMILIES.items()
    )
    a, b = family_splits(3, seed=1), family_splits(3, seed=1)
    assert a == b
    assert {name: t[0].world for name, t in a.items()} == TRANSFER_FAMILIES


def test_min_over_families_and_drop_from_in_distribution_per_track():
    families = family_splits(2, seed=0)
    values = {"wind": 0.7, "start": 0.6, "door_prior": 0.9, "cue_delay": 0.75}

    def run_family(traces):
        name = next(n for n, c in TRANSFER_FAMILIES.items() if c == traces[0].world)
        if name not in values:
            return "encoder sized for another corridor"
        return {"governance": {"value": values[name]}, "grounding": {"value": None}}

    got = transfer(
        {"governance": {"value": 0.8}, "grounding": {"value": 0.9}}, families, run_family
    )
    gov = got["per_track"]["governance"]
    assert gov["value"] == 0.6 and gov["min_family"] == "start"
    assert gov["families_run"] == ["cue_delay", "door_prior", "start", "wind"]
    assert abs(gov["drop_from_in_distribution"] - 0.2) < 1e-12
    assert got["families"]["length"] == {
        "status": "not run", "why": "encoder sized for another corridor",
    }  # fmt: skip
    # A track that ran in no family is "not run", never a zero.
    assert got["per_track"]["grounding"]["value"] is None
    assert got["per_track"]["grounding"]["status"] == "not run"


def test_the_encoding_family_names_the_proxys_renamed_encoding():
    from trustbench.trb.proxy._slots import RENAMED

    assert TRANSFER_ENCODINGS["encoding"] == RENAMED.name
