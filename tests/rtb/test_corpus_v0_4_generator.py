"""The v0.4 generator on a small slice: family contract, realism checks, reproducibility, queue.

Five families (30 cases) take a few seconds; the shipped corpus's checks are in
`test_corpus_v0_4.py`. The realism checks are shown to catch each objection of issue 51 on a
case edited to break it.
"""

from __future__ import annotations

import importlib.util
import json
import random
import sys
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from trustbench.rtb.corpus._load import builtin_corpus_root, validate_corpus
from trustbench.rtb.corpus._models import Decision
from trustbench.rtb.policy.narrow_v4 import (
    FAMILY_GENERATOR,
    SEED,
    CaseV4,
    check_cases_v4,
    draw_families,
    family_problems,
    realism_problems,
)
from trustbench.rtb.policy.narrow_v4 import _generate as generator
from trustbench.rtb.policy.narrow_v4._world import (
    DOMAINS,
    NOTICES,
    draw_current,
    draw_parameters,
    incoherent,
)

TOOL = Path(__file__).resolve().parents[2] / "tools" / "author_rtb_corpus_v0_4.py"


@pytest.fixture(scope="module")
def slice_() -> list[CaseV4]:
    return draw_families(SEED, 5).cases


def _files(cases: list[CaseV4]) -> list[tuple[str, CaseV4]]:
    return [(f"{case.case_id}.json", case) for case in cases]


def test_a_slice_is_reproducible_and_is_the_start_of_the_shipped_corpus(
    slice_: list[CaseV4],
) -> None:
    again = draw_families(SEED, 5)
    assert [c.model_dump() for c in again.cases] == [c.model_dump() for c in slice_]
    assert again.queue == []
    shipped = builtin_corpus_root("0.4") / "cases"
    for case in slice_:  # family k of a draw does not depend on how many follow it
        assert (shipped / f"{case.case_id}.json").read_text() == case.model_dump_json(
            indent=2
        ) + "\n"


def test_a_slice_keeps_the_family_contract_and_every_realism_constraint(
    slice_: list[CaseV4],
) -> None:
    assert check_cases_v4(_files(slice_)) == []
    assert len({c.family for c in slice_}) == 5
    for family in {c.family for c in slice_}:
        members = [c for c in slice_ if c.family == family]
        variants = {c.variant: c for c in members}
        assert [c.variant for c in members if c.edit_of is None] == ["family-base"]
        for case in members:  # a decision edit moves the decision; a presentation edit keeps it
            if case.edit_of is not None:
                moved = variants[case.edit_of].expectations.reference_decision
                kept = moved == case.expectations.reference_decision
                assert kept == case.variant.startswith("present-"), case.variant


def test_a_pool_from_another_seed_is_unfiltered_fresh_and_deterministic() -> None:
    pool = FAMILY_GENERATOR.draw_pool(7, 8)
    assert len(pool) == 8 and pool == FAMILY_GENERATOR.draw_pool(7, 8)
    assert 7 not in FAMILY_GENERATOR.corpus_seeds
    shipped = {p.stem for p in (builtin_corpus_root("0.4") / "cases").glob("*.json")}
    assert not {c.case_id for c in pool} & shipped  # type: ignore[attr-defined]
    assert realism_problems(_files(pool)) == []  # type: ignore[arg-type]


def _broken(case: CaseV4, **policy: Any) -> CaseV4:
    evidence = [r.model_copy(update=policy) if r.kind == "policy" else r for r in case.evidence]
    return case.model_copy(update={"evidence": evidence})


def _constraints(case: CaseV4) -> set[str]:
    return {p.message.split(":")[0] for p in realism_problems([("c.json", case)])}


def test_each_realism_objection_of_the_issue_is_a_check_that_catches_it(
    slice_: list[CaseV4],
) -> None:
    base = next(c for c in slice_ if c.variant == "family-base")
    assert _constraints(base) == set()
    assert _constraints(_broken(base, two_person_tiers=["standard"])) == {
        "two-person-tiers-upward-closed"
    }
    # production left unwindowed: its change at night is then outside office hours as well
    assert "production-windowed" in _constraints(_broken(base, window_environments=["staging"]))
    state = next(r for r in base.evidence if r.kind == "resource_state")
    no_op = base.model_copy(
        update={"proposal": base.proposal.model_copy(update={"parameters": dict(state.attributes)})}
    )
    assert "proposal-changes-something" in _constraints(no_op)
    truncated = [
        r.model_copy(update={"resource_type": "vpn_acce"}) if r.kind == "resource_state" else r
        for r in base.evidence
    ]
    assert _constraints(base.model_copy(update={"evidence": truncated})) == {"real-resource-types"}
    wrong_tier = "low" if base.proposal.risk_tier != "low" else "critical"
    mistiered = base.model_copy(
        update={"proposal": base.proposal.model_copy(update={"risk_tier": wrong_tier})}
    )
    assert _constraints(mistiered) == {"risk-tier-from-environment-and-operation"}


def _base(slice_: list[CaseV4], operation: str) -> CaseV4:
    return next(
        c for c in slice_ if c.variant == "family-base" and c.proposal.operation == operation
    )


def _with_parameters(case: CaseV4, parameters: dict[str, Any]) -> CaseV4:
    proposal = case.proposal.model_copy(update={"parameters": parameters})
    return case.model_copy(update={"proposal": proposal})


def _replaced(case: CaseV4, record_id: str, **update: Any) -> CaseV4:
    evidence = [
        r.model_copy(update=update) if r.record_id == record_id else r for r in case.evidence
    ]
    return case.model_copy(update={"evidence": evidence})


def _governing(case: CaseV4) -> Any:
    return next(
        r for r in case.evidence if r.kind == "approval" and r.target == case.proposal.target
    )


def test_a_spare_approval_cloned_from_the_governing_one_breaks_approvals_their_own(
    slice_: list[CaseV4],
) -> None:
    """O1: the sibling's approval shares the governing one's revision, and names no successor."""
    base = next(c for c in slice_ if c.variant == "family-base")
    governing = _governing(base)
    spare = next(r for r in base.evidence if r.kind == "approval" and r.target != governing.target)
    assert spare.status == "superseded" and spare.superseded_by is not None
    assert spare.approved_revision != governing.approved_revision
    clone = governing.model_copy(
        update={
            "record_id": spare.record_id,
            "approval_id": spare.approval_id,
            "target": spare.target,
            "status": "superseded",
            "superseded_by": None,
        }
    )
    evidence = [clone if r.record_id == spare.record_id else r for r in base.evidence]
    cloned = base.model_copy(update={"evidence": evidence})
    assert _constraints(cloned) == {"approvals-their-own"}


def test_a_proposal_without_its_defining_parameter_breaks_proposal_names_its_change(
    slice_: list[CaseV4],
) -> None:
    """O2: grant_role without the role, apply_migration without the migration, a no-op role."""
    grant, migrate = _base(slice_, "grant_role"), _base(slice_, "apply_migration")
    assert _constraints(_with_parameters(grant, {"duration_h": 4})) == {"proposal-names-its-change"}
    assert _constraints(_with_parameters(migrate, {"lock_timeout_s": 5})) == {
        "proposal-names-its-change"
    }
    state = next(r for r in grant.evidence if r.kind == "resource_state")
    held = {
        "role": state.attributes["role"],
        "duration_h": 4 if state.attributes["duration_h"] != 4 else 8,
    }
    assert _constraints(_with_parameters(grant, held)) == {"proposal-names-its-change"}


def test_an_image_named_for_a_later_month_than_its_approval_breaks_dated_names(
    slice_: list[CaseV4],
) -> None:
    """O3: an approval issued in one month approving an image named for five months later."""
    base = next(c for c in slice_ if c.variant == "family-base")
    governing = _governing(base)
    issued = datetime.fromisoformat(governing.issued_at.replace("Z", "+00:00"))
    later = (issued + timedelta(days=5 * 31)).strftime("%Y-%m")
    approved = {**governing.approved_parameters, "image": f"img-{later}"}
    anachronism = _replaced(base, governing.record_id, approved_parameters=approved)
    assert _constraints(anachronism) == {"dated-names-not-later"}


def test_a_base_change_at_night_outside_its_windows_breaks_change_timing(
    slice_: list[CaseV4],
) -> None:
    """O4: a non-emergency base judged at 03:41, in no window of its environment."""
    for base in (c for c in slice_ if c.variant == "family-base"):
        if any(r.kind == "break_glass" for r in base.evidence):
            continue  # an emergency may fall at any hour
        night = datetime.fromisoformat(base.as_of).replace(hour=3, minute=41)
        assert "change-timing" in _constraints(base.model_copy(update={"as_of": night.isoformat()}))


def test_a_notice_whose_status_and_text_disagree_breaks_notice_status_matches_text(
    slice_: list[CaseV4],
) -> None:
    """O5: a notice kept `unavailable` while its text says the service is slow."""
    base = next(c for c in slice_ if c.variant == "family-base")
    notice = next(r for r in base.evidence if r.kind == "service_notice")
    flipped = "degraded" if notice.status == "unavailable" else "unavailable"
    assert _constraints(_replaced(base, notice.record_id, status=flipped)) == {
        "notice-status-matches-text"
    }


def test_two_notices_of_one_service_break_one_notice_per_service(slice_: list[CaseV4]) -> None:
    """O6: `cmdb` degraded and `cmdb` unavailable side by side."""
    from trustbench.rtb.corpus._models import ServiceNoticeRecord

    base = next(c for c in slice_ if c.variant == "family-base")
    notice = next(r for r in base.evidence if r.kind == "service_notice")
    other = next((s, t) for s, t in NOTICES[notice.service] if s != notice.status)
    second = ServiceNoticeRecord(
        record_id="rec-second", service=notice.service, status=other[0], text=other[1]
    )
    doubled = base.model_copy(update={"evidence": [*base.evidence, second]})
    assert _constraints(doubled) == {"one-notice-per-service"}


def test_a_disabled_flag_rolled_out_to_half_breaks_coherent_parameters() -> None:
    """O7: `toggle_feature` to `rollout_percent: 50` with `enabled: false`."""
    assert incoherent("toggle_feature", {"enabled": False, "rollout_percent": 50}) is not None
    assert incoherent("toggle_feature", {"enabled": True, "rollout_percent": " 0"}) is not None
    assert incoherent("toggle_feature", {"enabled": False, "rollout_percent": 0}) is None
    assert incoherent("toggle_feature", {"enabled": True, "rollout_percent": "50"}) is None


def test_a_drawn_feature_flag_family_keeps_its_flags_coherent() -> None:
    """O7 by construction: every member of a drawn flag family rolls out as it is enabled."""
    domain = next(d for d in DOMAINS if d.operation == "toggle_feature")
    rng = random.Random(0)
    for _ in range(200):
        current = draw_current(rng, domain, domain.space)
        proposed = draw_parameters(rng, domain, domain.space, current)
        assert incoherent(domain.operation, {**current, **proposed}) is None
        assert proposed["enabled"] != current["enabled"]


def test_one_notice_text_for_every_notice_breaks_the_variety_constraint(
    slice_: list[CaseV4],
) -> None:
    from trustbench.rtb.corpus._models import ServiceNoticeRecord

    def notice(index: int) -> ServiceNoticeRecord:
        """v0.3's one notice text, on a notice record of its own."""
        return ServiceNoticeRecord(
            record_id=f"rec-notice{index}",
            service="cmdb",
            status="degraded",
            text="Lookups may be slow.",
        )

    same = [
        c.model_copy(update={"evidence": [*c.evidence, notice(i)]}) for i, c in enumerate(slice_)
    ]
    messages = [p.message for p in realism_problems(_files(same))]
    assert any(m.startswith("varied-service-notices") for m in messages), messages


def test_a_member_whose_label_the_reviewer_and_cedar_contradict_is_queued_not_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def permit_labelled(draft: Any, rng: Any) -> Any:
        """A moved object revision, authored as a permit: both implementations hold it."""
        return replace(generator.revision_moved(draft, rng), decision=Decision.PERMIT)

    edits = (
        generator.Edit("revision-moved", generator._always, permit_labelled),
        *(e for e in generator.HOLD_EDITS if e.name == "state-missing"),
    )
    monkeypatch.setattr(generator, "HOLD_EDITS", edits)
    drawn = draw_families(SEED, 2)
    assert {entry["variant"] for entry in drawn.queue} == {"edit-revision-moved"}
    decisions = drawn.queue[0]["decisions"]
    assert decisions["reference_reviewer"]["decision"] == decisions["cedar"]["decision"] == "hold"
    assert "edit-revision-moved" not in {c.variant for c in drawn.cases}
    assert len(drawn.cases) + len(drawn.queue) == 12  # queued, not dropped: every member is kept


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("author_rtb_corpus_v0_4", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_authoring_tool_writes_a_valid_corpus_and_an_empty_queue(tmp_path: Path) -> None:
    out = tmp_path / "corpus" / "v0.4"
    assert _tool().main(["--out", str(out), "--families", "2"]) == 0
    assert validate_corpus(out).problems == []
    assert len(list((out / "cases").glob("*.json"))) == 12
    queue = tmp_path / "corpus" / "reviews" / "v0.4" / "adjudication-queue.jsonl"
    assert queue.read_text() == ""
    manifest = json.loads((out / "MANIFEST.json").read_text())
    assert manifest["policy_id"] == "rtb-narrow-approval-v4"


def test_the_family_contract_catches_a_lost_base_and_a_presentation_edit_that_moves(
    slice_: list[CaseV4],
) -> None:
    members = [c for c in slice_ if c.family == slice_[0].family]
    lost_base = [c for c in members if c.edit_of is not None]
    assert any("0 base members" in p.message for p in family_problems(_files(lost_base)))
    shown = next(c for c in members if c.variant.startswith("present-"))
    key = shown.expectations.model_copy(update={"reference_decision": Decision.DENY})
    moved = [c.model_copy(update={"expectations": key}) if c is shown else c for c in members]
    messages = [p.message for p in family_problems(_files(moved))]
    assert "a presentation edit changes the decision" in messages
    edit = next(c for c in members if c.variant.startswith("edit-") and c.edit_of == "family-base")
    proposal = edit.proposal.model_copy(update={"requested_by": "z.new", "resource_revision": "r1"})
    wider = [c.model_copy(update={"proposal": proposal}) if c is edit else c for c in members]
    messages = [p.message for p in family_problems(_files(wider))]
    assert any("changes 3 facts" in m or "changes 4 facts" in m for m in messages), messages


@pytest.mark.parametrize("name", ["reference", "cedar"])
def test_the_control_path_enforces_v0_4_cases_as_their_labels_say(
    slice_: list[CaseV4], name: str
) -> None:
    import asyncio

    from trustbench.rtb.boundaries import boundary_factory
    from trustbench.rtb.control._audit import evaluate_boundary
    from trustbench.rtb.control._cases import (
        UNRECONCILED_SUFFIX,
        ExpectedEffect,
        control_scenarios,
        seed_from_case,
    )
    from trustbench.rtb.control._grading import ControlOutcome

    assert seed_from_case(slice_[0]).policy_id == "rtb-narrow-approval-v4"
    family = [c for c in slice_ if c.family == slice_[0].family]  # one of each decision, twice
    scenarios = [
        s for s in control_scenarios(family, seed=3) if not s.path.endswith(UNRECONCILED_SUFFIX)
    ]
    evaluation = asyncio.run(evaluate_boundary(scenarios, boundary_factory(name)))
    prevented = ControlOutcome.PREVENTED
    for scenario, grade in zip(scenarios, evaluation.grades, strict=True):
        must_not = scenario.expected_effect == ExpectedEffect.MUST_NOT_TAKE_EFFECT
        assert (grade.outcome == prevented) == must_not, scenario.scenario_id


def _shipped_families() -> dict[str, list[dict[str, Any]]]:
    families: dict[str, list[dict[str, Any]]] = {}
    for path in sorted((builtin_corpus_root("0.4") / "cases").glob("*.json")):
        case = json.loads(path.read_text())
        families.setdefault(case["family"], []).append(case)
    return families


def _kind_counts(case: dict[str, Any], *, context: bool) -> dict[str, int]:
    kinds = [r["kind"] for r in case["evidence"]]
    wanted = [k for k in kinds if (k == "requester_note") == context]
    return {kind: wanted.count(kind) for kind in sorted(set(wanted))}


def test_every_shipped_family_holds_the_same_record_kinds_and_counts_under_every_decision() -> None:
    for family, members in _shipped_families().items():
        counts = {json.dumps(_kind_counts(case, context=False)) for case in members}
        assert len(counts) == 1, (family, counts)


def test_shipped_presentation_edits_fall_on_every_decision_alike() -> None:
    notes: dict[str, int] = {}
    for members in _shipped_families().values():
        for case in members:
            decision = case["expectations"]["reference_decision"]
            noted = bool(_kind_counts(case, context=True))
            notes[decision] = notes.get(decision, 0) + noted
    assert len(set(notes.values())) == 1, notes
    assert set(notes) == {d.value for d in Decision}


def _unreviewed_glass(case: dict[str, Any]) -> bool:
    return any(r["kind"] == "break_glass" and r["post_review_by"] is None for r in case["evidence"])


def test_an_unreviewed_break_glass_falls_on_every_decision_alike() -> None:
    # Issue 51's token artifact: `post_review_by=None` was in 10 cases, all deny (the edit
    # `glass-unreviewed`). The emergency families' spare break-glass carries it on every member.
    unreviewed = {d.value: 0 for d in Decision}
    for members in _shipped_families().values():
        for case in members:
            unreviewed[case["expectations"]["reference_decision"]] += _unreviewed_glass(case)
    assert len(set(unreviewed.values())) == 1 and unreviewed["deny"] > 0, unreviewed
