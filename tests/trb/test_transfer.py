from __future__ import annotations

from trustbench.trb.corpus import TRANSFER_FAMILIES, generate_reference_corpus
from trustbench.trb.corpus._generate import TRANSFER_ENCODINGS
from trustbench.trb.world import CorridorConfig


def test_each_family_changes_the_world_or_the_report_encoding_and_is_seeded():
    default = CorridorConfig()
    # A family that keeps the training world changes how the report is asked for instead.
    assert all(
        cfg != default or name in TRANSFER_ENCODINGS for name, cfg in TRANSFER_FAMILIES.items()
    )
    sizes = {"train": 1, "dev": 1, "eval": 1, "transfer": 3 * len(TRANSFER_FAMILIES)}
    a = generate_reference_corpus(sizes, seed=1, transfer_families=True)
    b = generate_reference_corpus(sizes, seed=1, transfer_families=True)
    assert a == b
    families = {name: a[f"transfer_{name}"] for name in TRANSFER_FAMILIES}
    assert {name: t[0].world for name, t in families.items()} == TRANSFER_FAMILIES


def test_the_encoding_family_names_the_proxys_renamed_encoding():
    from trustbench.trb.proxy._local import RENAMED

    assert TRANSFER_ENCODINGS["encoding"] == RENAMED.name
