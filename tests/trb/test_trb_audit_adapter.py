"""`trustbench trb audit --adapter MODULE:ATTR`: a user's adapter through every cheat detector."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.support.cli import invoke

from trustbench.trb.track._pipeline import DETECTORS

HERE = Path(__file__).parent


@pytest.fixture
def cheats_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    """The audited adapters live beside this test (`trb_v4_cheats`)."""
    monkeypatch.syspath_prepend(str(HERE))


def test_audit_of_a_rollout_greedy_adapter_names_the_detectors_that_fire_and_exits_1(
    cheats_importable: None,
) -> None:
    code, message = invoke(
        "trb", "audit", "--adapter", "trb_v4_cheats:RolloutGreedy", "--cheat-traces", "3"
    )
    assert code == 1, message
    assert "cheat detector(s) fired on trb_v4_cheats:RolloutGreedy" in message
    assert "Track 4 no-r arm agreement" in message and "Track 5 no-r arm agreement" in message
    assert "Track 1 null-edit floor" not in message  # governed on the stored traces


def test_audit_of_an_honest_adapter_reports_every_detector_quiet_and_exits_0(
    cheats_importable: None,
) -> None:
    code, out = invoke(
        "trb", "audit", "--adapter", "trustbench.trb.instruments._oracles:GovernedOracle",
        "--cheat-traces", "3",
    )  # fmt: skip
    assert code == 0, out
    assert "no cheat detector fired" in out
    assert out.count("quiet") == len(DETECTORS)


def test_audit_of_something_that_is_not_module_attr_exits_2() -> None:
    code, message = invoke("trb", "audit", "--adapter", "not-a-target")
    assert code == 2 and "MODULE:ATTR" in message
