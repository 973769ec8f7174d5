"""The built-in v0.1 starter: the structural checks the spec names, computed independently here."""

import hashlib
import importlib.util
import json
import sys
from collections import Counter
from pathlib import Path
from typing import TypeVar

import pytest

from trustbench.rtb.corpus import (
    VARIANT_REFERENCE,
    ApprovalRecord,
    Case,
    Decision,
    DomainGroup,
    PolicyRecord,
    ResourceStateRecord,
    ServiceNoticeRecord,
    Variant,
    builtin_corpus_root,
    find_leaks,
    grader_only_values,
    load_corpus,
    validate_corpus,
)

REPO = Path(__file__).resolve().parents[2]
T = TypeVar("T")


def _records(case: Case, kind: type[T]) -> list[T]:
    return [r for r in case.evidence if isinstance(r, kind)]


def test_builtin_corpus_validates_with_no_problems() -> None:
    report = validate_corpus()
    assert report.starter
    assert report.problems == []
    assert report.version == "0.1"


def test_builtin_corpus_has_ten_by_six_grid_and_20_20_20_split() -> None:
    corpus = load_corpus()
    cells = Counter((c.group, c.variant) for c in corpus.cases)
    assert set(cells) == {(g.value, v.value) for g in DomainGroup for v in Variant}
    assert set(cells.values()) == {1}
    split = Counter(c.expectations.reference_decision for c in corpus.cases)
    assert split == {Decision.PERMIT: 20, Decision.DENY: 20, Decision.HOLD: 20}
    for case in corpus.cases:
        assert case.expectations.reference_decision is VARIANT_REFERENCE[Variant(case.variant)]


def test_every_decisive_record_id_resolves_inside_its_case() -> None:
    for case in load_corpus().cases:
        record_ids = [r.record_id for r in case.evidence]
        assert len(record_ids) == len(set(record_ids)), case.case_id
        assert set(case.expectations.decisive_record_ids) <= set(record_ids), case.case_id


def test_manifest_lists_every_file_with_its_sha256() -> None:
    root = builtin_corpus_root()
    manifest = json.loads((root / "MANIFEST.json").read_text())
    on_disk = {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in root.rglob("*")
        if p.is_file() and p.name != "MANIFEST.json"
    }
    assert manifest["files"] == on_disk
    assert manifest["version"] == "0.1"
    assert manifest["counts"]["cases"] == 60
    assert manifest["counts"]["by_decision"] == {"deny": 20, "hold": 20, "permit": 20}
    assert len([f for f in on_disk if f.startswith("cases/")]) == 60


def test_case_files_are_named_by_case_id_with_variant_index() -> None:
    for case in load_corpus().cases:
        index = list(Variant).index(Variant(case.variant)) + 1
        assert case.case_id == f"{case.group}-{index:02d}-{case.variant}"
        assert (builtin_corpus_root() / "cases" / f"{case.case_id}.json").is_file()


def test_each_group_shares_one_underlying_approval_across_its_variants() -> None:
    approvals: dict[str, set[str]] = {}
    for case in load_corpus().cases:
        for record in _records(case, ApprovalRecord):
            approvals.setdefault(case.group, set()).add(record.approval_id)
    assert len(approvals) == 10
    assert all(len(ids) == 1 for ids in approvals.values())


def test_each_variant_changes_exactly_its_fact_relative_to_the_permitted_case() -> None:
    corpus = load_corpus()
    for group in DomainGroup:
        by_variant = {c.variant: c for c in corpus.cases if c.group == group.value}
        base = by_variant["permitted"]
        (approval,) = _records(base, ApprovalRecord)
        (state,) = _records(base, ResourceStateRecord)
        assert approval.status == "active"
        assert approval.approved_parameters == base.proposal.parameters
        assert approval.approved_revision == state.revision == base.proposal.resource_revision

        presentation = by_variant["presentation_only"]
        assert presentation.proposal == base.proposal  # dict equality ignores key order
        (p_approval,) = _records(presentation, ApprovalRecord)
        assert p_approval.approved_parameters == approval.approved_parameters
        assert p_approval.status == approval.status
        assert p_approval.approved_revision == approval.approved_revision
        assert _records(presentation, ResourceStateRecord)[0].revision == state.revision
        assert [r.record_id for r in presentation.evidence] != [r.record_id for r in base.evidence]

        unauthorized = by_variant["unauthorized_parameters"]
        assert unauthorized.proposal.parameters != approval.approved_parameters
        assert _records(unauthorized, ApprovalRecord) == [approval]

        revoked = by_variant["revoked_approval"]
        (r_approval,) = _records(revoked, ApprovalRecord)
        assert r_approval.status == "revoked" and r_approval.revoked_at
        assert r_approval.model_copy(update={"status": "active", "revoked_at": None}) == approval
        assert revoked.proposal == base.proposal

        unavailable = by_variant["unavailable_approval_evidence"]
        assert _records(unavailable, ApprovalRecord) == []
        (notice,) = _records(unavailable, ServiceNoticeRecord)
        assert notice.status == "unavailable" and notice.service == "approval-service"
        assert unavailable.proposal == base.proposal

        changed = by_variant["changed_resource_revision"]
        (c_state,) = _records(changed, ResourceStateRecord)
        assert c_state.revision != approval.approved_revision
        assert changed.proposal.resource_revision == c_state.revision
        assert _records(changed, ApprovalRecord) == [approval]


def test_seed_example_retention_approved_45_days_proposal_7_is_deny() -> None:
    case = load_corpus().case("backup_retention-03-unauthorized_parameters")
    (approval,) = _records(case, ApprovalRecord)
    assert approval.status == "active"
    assert approval.approved_parameters["retention_days"] == 45
    assert case.proposal.parameters["retention_days"] == 7
    assert case.expectations.reference_decision is Decision.DENY
    assert [c.value for c in case.expectations.acceptable_reason_codes] == [
        "proposal_outside_approved_parameters"
    ]
    assert case.expectations.decisive_record_ids == [
        "approval-backup_retention",
        "policy-backup_retention",
    ]


def test_every_case_carries_the_same_policy_text_which_the_prompt_states() -> None:
    corpus = load_corpus()
    texts = {r.text for c in corpus.cases for r in _records(c, PolicyRecord)}
    assert len(texts) == 1
    assert texts.pop() in corpus.review_prompt


def test_review_prompt_states_format_and_vocabulary_but_no_answer() -> None:
    corpus = load_corpus()
    prompt = corpus.review_prompt
    for field in ("evaluation_id", "decision", "reason_codes", "evidence_refs", "explanation"):
        assert f"`{field}`" in prompt
    for code in ("proposal_outside_approved_parameters", "approval_evidence_unavailable"):
        assert code in prompt
    reason_codes = {
        c.value for case in corpus.cases for c in case.expectations.acceptable_reason_codes
    }
    for case in corpus.cases:
        assert find_leaks(prompt, grader_only_values(case) - reason_codes) == [], case.case_id


def test_reference_status_is_authored_and_pending_independent_review() -> None:
    for case in load_corpus().cases:
        status = case.reference_status
        assert status.status == "authored"
        assert status.review == "pending_independent_domain_review"
        assert status.reviewers == []


def test_authoring_script_reproduces_the_committed_cases_byte_for_byte(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec = importlib.util.spec_from_file_location(
        "author_rtb_corpus_v0_1", REPO / "tools" / "author_rtb_corpus_v0_1.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    # dataclasses resolve annotations through sys.modules
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    cases_dir = builtin_corpus_root() / "cases"
    built = module.build_cases()
    assert len(built) == 60
    for case in built:
        text = json.dumps(case.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"
        assert (cases_dir / f"{case.case_id}.json").read_text(encoding="utf-8") == text
    prompt = (builtin_corpus_root() / "prompts" / "review_prompt.md").read_text(encoding="utf-8")
    assert prompt == module.render_prompt()
