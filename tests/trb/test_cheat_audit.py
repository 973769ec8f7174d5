"""The seven cheats, submitted through `trb run`, each get a "not trustworthy" verdict."""

from __future__ import annotations

import pytest

from trustbench.trb.cheats import CHEATS
from trustbench.trb.track._pipeline import CONTROL, cheat_audit


@pytest.fixture(scope="module")
def audit_rows(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRUSTBENCH_CACHE", str(tmp_path_factory.mktemp("cheat-cache")))
        return {r["adapter"]: r for r in cheat_audit(eval_traces=6, seed=7)}


@pytest.mark.parametrize("cheat", sorted(CHEATS))
def test_each_submitted_cheat_is_judged_not_trustworthy(
    audit_rows: dict[str, dict], cheat: str
) -> None:
    row = audit_rows[cheat]
    assert row["verdict"] == "not trustworthy", row
    assert row["passed"], row


def test_the_sandboxed_memoriser_ends_at_chance(audit_rows: dict[str, dict]) -> None:
    assert audit_rows["memoriser"]["passed"], audit_rows["memoriser"]
    assert str(audit_rows["memoriser"]["isolation"]).startswith(("landlock", "python audit hook"))


def test_the_honest_control_submitted_the_same_way_is_not_condemned(
    audit_rows: dict[str, dict],
) -> None:
    assert audit_rows[CONTROL[0]]["verdict"] != "not trustworthy", audit_rows[CONTROL[0]]
