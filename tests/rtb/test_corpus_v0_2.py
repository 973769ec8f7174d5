"""Corpus v0.2 (policy `rtb-narrow-approval-v2`): shipped files, structure, two independent
policy encodings against the authored answer key, and policy-id refusal."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from tests.support.cli import invoke

from trustbench.core import build_manifest, read_ledger, run_experiment, write_manifest
from trustbench.errors import CheckFailed, InputError
from trustbench.rtb.corpus import builtin_corpus_root, load_corpus, validate_corpus
from trustbench.rtb.corpus._export import export_candidate_inputs, to_candidate_input
from trustbench.rtb.corpus._load import build_schema
from trustbench.rtb.policy import DEFAULT_POLICY_ID as POLICY_ID_V1
from trustbench.rtb.policy.narrow_v2._cedar import cedar_assess_v2, load_policy_text_v2
from trustbench.rtb.policy.narrow_v2._models import (
    POLICY_ID_V2,
    CaseV2,
    ChangeTicketRecord,
    RequesterNoteRecord,
    ReviewerResponseV2,
    RevocationRecord,
)
from trustbench.rtb.policy.narrow_v2._reviewer import assess_v2
from trustbench.rtb.review.reviewers import make_reviewer

REPO = Path(__file__).resolve().parents[2]
USER_FIXTURE = Path(__file__).parent / "fixtures" / "rtb_v0_2_user"


@pytest.fixture(scope="module")
def corpus() -> Any:
    return load_corpus(builtin_corpus_root("0.2"))


def _author_module() -> Any:
    spec = importlib.util.spec_from_file_location(
        "author_v0_2", REPO / "tools" / "author_rtb_corpus_v0_2.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["author_v0_2"] = module
    spec.loader.exec_module(module)
    return module


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_shipped_v0_2_files_equal_the_authoring_script_output_byte_for_byte(
    tmp_path: Path,
) -> None:
    _author_module().main(["--out", str(tmp_path / "v0.2")])
    assert _files(tmp_path / "v0.2") == _files(builtin_corpus_root("0.2"))


def test_v0_2_validates_and_declares_its_policy_id(corpus: Any) -> None:
    report = validate_corpus(builtin_corpus_root("0.2"))
    assert report.problems == []
    assert report.policy_id == corpus.policy_id == POLICY_ID_V2
    manifest = json.loads((builtin_corpus_root("0.2") / "MANIFEST.json").read_text())
    assert manifest["policy_id"] == POLICY_ID_V2


def test_v0_1_declares_no_policy_id_and_is_derived_as_v1() -> None:
    manifest = json.loads((builtin_corpus_root() / "MANIFEST.json").read_text())
    assert "policy_id" not in manifest
    assert load_corpus().policy_id == POLICY_ID_V1


def test_v0_2_has_180_cases_in_15_groups_with_an_even_decision_split(corpus: Any) -> None:
    assert len(corpus.cases) >= 180
    assert len({c.group for c in corpus.cases}) >= 15
    split = Counter(c.expectations.reference_decision.value for c in corpus.cases)
    assert split == {"permit": 60, "deny": 60, "hold": 60}


def test_every_v0_2_variant_kind_appears_under_more_than_one_decision(corpus: Any) -> None:
    decisions: dict[str, set[str]] = defaultdict(set)
    for case in corpus.cases:
        decisions[case.variant].add(case.expectations.reference_decision.value)
    assert {kind for kind, seen in decisions.items() if len(seen) < 2} == set()


def test_v0_2_carries_every_case_feature_the_issue_names(corpus: Any) -> None:
    cases: list[CaseV2] = corpus.cases
    kinds = Counter(type(r).__name__ for c in cases for r in c.evidence)
    assert kinds[RevocationRecord.__name__] > 0
    assert kinds[ChangeTicketRecord.__name__] > 0
    assert kinds[RequesterNoteRecord.__name__] > 0
    approvals = [r for c in cases for r in c.evidence if getattr(r, "kind", "") == "approval"]
    assert {a.status for a in approvals} == {"active", "revoked", "superseded"}
    permits_with_revoked = [
        c
        for c in cases
        if c.expectations.reference_decision.value == "permit"
        and any(getattr(r, "status", "") == "revoked" for r in c.evidence)
    ]
    assert permits_with_revoked, "revoked status must also occur in permit cases"
    last_kinds = Counter(c.evidence[-1].kind for c in cases)
    assert last_kinds["policy"] < len(cases) / 2
    assert any(c.expectations.contestable_readings for c in cases)


def test_reference_policy_v2_cedar_and_answer_key_agree_on_every_v0_2_case(corpus: Any) -> None:
    disagreements = []
    for case in corpus.cases:
        visible = to_candidate_input(case, "rtb-00000000000000000000000000000000")
        python, cedar = assess_v2(visible), cedar_assess_v2(visible)
        reference = case.expectations.reference_decision
        accepted = set(case.expectations.acceptable_reason_codes)
        if not (
            python.decision is cedar.decision is reference
            and set(python.reason_codes) & accepted
            and set(cedar.reason_codes) & accepted
        ):
            disagreements.append(
                f"{case.case_id}: key {reference.value}, python {python.decision.value} "
                f"{[c.value for c in python.reason_codes]}, cedar {cedar.decision.value} "
                f"{[c.value for c in cedar.reason_codes]} {cedar.detail}"
            )
    assert disagreements == [], "\n".join(disagreements)


def test_cedar_answers_with_the_policy_parsed_once_as_with_the_policy_text(
    corpus: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Cedar encoding hands cedarpy its policy set parsed once; the answers are the text's."""
    import cedarpy

    asked: list[tuple[list[dict], Any, list[dict]]] = []
    answer = cedarpy.is_authorized_batch

    def recording(requests: list[dict], policies: Any, entities: list[dict]) -> Any:
        asked.append((requests, policies, entities))
        return answer(requests, policies, entities)

    monkeypatch.setattr(cedarpy, "is_authorized_batch", recording)
    for case in corpus.cases[::12]:
        cedar_assess_v2(to_candidate_input(case, "rtb-00000000000000000000000000000000"))
    text = load_policy_text_v2()
    assert asked and all(isinstance(p, cedarpy.PolicySet) for _, p, _ in asked)
    assert len({id(p) for _, p, _ in asked}) == 1  # parsed once, for every call
    for requests, policies, entities in asked:
        parsed, from_text = answer(requests, policies, entities), answer(requests, text, entities)
        assert [(r.decision, sorted(r.diagnostics.reasons)) for r in parsed] == [
            (r.decision, sorted(r.diagnostics.reasons)) for r in from_text
        ]


def test_reference_policy_v2_replies_match_the_v0_2_response_schema(corpus: Any) -> None:
    validator = jsonschema.Draft202012Validator(
        build_schema("reviewer_response.schema.json", POLICY_ID_V2)
    )
    reviewer = make_reviewer("reference-policy-v2")
    for case in corpus.cases[:30]:
        reply = reviewer.review(corpus.review_prompt, to_candidate_input(case, "rtb-1"))
        assert reply is not None
        document = json.loads(reply)
        assert list(validator.iter_errors(document)) == [], case.case_id
        ReviewerResponseV2.model_validate(document)


def test_cedar_v2_fails_closed_when_a_timestamp_cannot_be_read(corpus: Any) -> None:
    case = next(c for c in corpus.cases if c.expectations.reference_decision.value == "permit")
    broken = to_candidate_input(case, "rtb-1").model_copy(update={"as_of": "not a time"})
    finding = cedar_assess_v2(broken)
    assert finding.decision.value == "hold" and finding.detail


def test_unknown_policy_id_is_a_validation_problem_naming_the_manifest_field(
    tmp_path: Path,
) -> None:
    root = tmp_path / "corpus"
    root.mkdir()
    for rel, data in _files(USER_FIXTURE).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    manifest = json.loads((root / "MANIFEST.json").read_text())
    manifest["policy_id"] = "acme-change-policy-v7"
    (root / "MANIFEST.json").write_text(json.dumps(manifest))
    report = validate_corpus(root)
    assert any(
        p.pointer == "/policy_id" and "acme-change-policy-v7" in p.message for p in report.problems
    )
    assert report.policy_id == "acme-change-policy-v7"
    with pytest.raises(CheckFailed, match="policy_id"):
        load_corpus(root)


def test_hand_written_v0_2_user_corpus_validates_and_exports(tmp_path: Path) -> None:
    report = validate_corpus(USER_FIXTURE)
    assert report.problems == [] and report.policy_id == POLICY_ID_V2 and len(report.cases) == 5
    result = export_candidate_inputs(load_corpus(USER_FIXTURE), tmp_path / "export", seed=1)
    inputs = [json.loads(p.read_text()) for p in result.inputs_dir.glob("*.json")]
    assert len(inputs) == 5 and all("as_of" in i and "expectations" not in i for i in inputs)
    schema = json.loads(result.response_schema_path.read_text())
    assert "discrepancies" in schema["required"]


def _review_spec(tmp_path: Path, reviewer: str, corpus: str) -> Path:
    spec = tmp_path / f"{reviewer}.toml"
    spec.write_text(
        f"""
suite = "rtb"
track = "review"
trials_per_case = 1
concurrency = 2
timeout_s = 5.0
order_seed = 1

[corpus]
{corpus}

[[candidates]]
name = "{reviewer}"
kind = "inprocess"
entry = "trustbench.rtb.review.reviewers:chat_responder"
settings = {{ reviewer = "{reviewer}" }}

[analysis]
unit = "case"
""",
        encoding="utf-8",
    )
    return spec


def test_hand_written_v0_2_user_corpus_runs_through_the_reviewer_track(tmp_path: Path) -> None:
    spec = _review_spec(tmp_path, "reference-policy-v2", f'path = "{USER_FIXTURE}"')
    run_dir = tmp_path / "run"
    write_manifest(build_manifest(spec), run_dir)
    run_experiment(run_dir)
    ledger = read_ledger(run_dir)
    replies = [json.loads(t["outcome"]["reply"]) for t in ledger.trials]
    expected = {
        c.case_id: c.expectations.reference_decision.value for c in load_corpus(USER_FIXTURE).cases
    }
    assert sorted(r["decision"] for r in replies) == sorted(expected.values())


@pytest.mark.parametrize(
    ("reviewer", "corpus_line", "declared"),
    [
        ("reference-policy", f'path = "{USER_FIXTURE}"', POLICY_ID_V2),
        ("reference-policy-v2", 'builtin = "v0.1"', POLICY_ID_V1),
    ],
)
def test_reviewer_track_refuses_a_corpus_whose_policy_the_reviewer_does_not_implement(
    tmp_path: Path, reviewer: str, corpus_line: str, declared: str
) -> None:
    with pytest.raises(InputError, match=declared) as info:
        build_manifest(_review_spec(tmp_path, reviewer, corpus_line))
    assert reviewer in str(info.value)


def test_workflow_track_runs_a_v0_2_corpus_under_the_v0_2_policy(tmp_path: Path) -> None:
    # The workflow track takes platform state, fault targets and live enforcement from the
    # corpus's policy object, so a v0.2 corpus runs with v0.2 rules: the reckless agent requests
    # every proposal, and only the unchecked boundary lets a prohibited one take effect.
    spec = tmp_path / "workflow.toml"
    spec.write_text(
        """
suite = "rtb"
track = "workflow"
trials_per_case = 1
concurrency = 2
timeout_s = 30.0

[corpus]
path = "CORPUS"

[track_options]
kinds = ["direct"]

[analysis]
unit = "case"

[[candidates]]
name = "reckless-reference"
kind = "inprocess"
settings = { agent = "reckless", boundary = "reference" }

[[candidates]]
name = "reckless-unchecked"
kind = "inprocess"
settings = { agent = "reckless", boundary = "unchecked" }
""".replace("CORPUS", str(USER_FIXTURE)),
        encoding="utf-8",
    )
    manifest = build_manifest(spec)
    from trustbench.rtb.workflow.track import WorkflowTrack

    scenarios = WorkflowTrack().scenarios(manifest)
    assert scenarios and all(s.script.seed.policy_id == POLICY_ID_V2 for s in scenarios.values())
    run_dir = tmp_path / "run"
    assert invoke("freeze", str(spec), "--out", str(run_dir))[0] == 0
    assert invoke("run", str(run_dir), "--quiet")[0] == 0
    invoke("report", str(run_dir))
    record = json.loads((run_dir / "record.json").read_text())
    assert record["complete"] and record["finished_trials"] == 2 * len(scenarios)

    def rate(candidate: str, name: str) -> float:
        figure = next(f for f in record["figures"][candidate] if f["name"] == name)
        return figure["estimate"]

    assert rate("reckless-reference", "workflow_prohibited_effect_rate_upper") == 0.0
    assert rate("reckless-unchecked", "workflow_prohibited_effect_rate_lower") > 0.0


def test_each_reference_reviewer_refuses_an_input_of_the_other_policy(corpus: Any) -> None:
    v2_input = to_candidate_input(corpus.cases[0], "rtb-2")
    v1_input = to_candidate_input(load_corpus().cases[0], "rtb-1")
    with pytest.raises(InputError, match="rtb-narrow-approval-v1"):
        make_reviewer("reference-policy").review("", v2_input)
    with pytest.raises(InputError, match=POLICY_ID_V2):
        make_reviewer("reference-policy-v2").review("", v1_input)


def test_answer_key_fields_cover_the_v0_2_answer_key_model() -> None:
    from trustbench.rtb.corpus import ANSWER_KEY_FIELDS
    from trustbench.rtb.policy.narrow_v2._models import CandidateInputV2, ExpectationsV2

    assert set(ExpectationsV2.model_fields) <= ANSWER_KEY_FIELDS
    hidden = set(CaseV2.model_fields) - set(CandidateInputV2.model_fields) - {"group", "variant"}
    assert hidden <= ANSWER_KEY_FIELDS


def test_v0_2_schema_and_model_reject_a_case_without_as_of(corpus: Any) -> None:
    document = corpus.cases[0].model_dump(mode="json")
    del document["as_of"]
    validator = jsonschema.Draft202012Validator(build_schema("case.schema.json", POLICY_ID_V2))
    assert not validator.is_valid(document)
    with pytest.raises(ValueError, match="as_of"):
        CaseV2.model_validate(document)


def test_v0_1_schemas_are_unchanged_by_the_v0_2_format() -> None:
    for name in ("case", "candidate_input", "reviewer_response"):
        shipped = json.loads(
            (builtin_corpus_root() / "schemas" / f"{name}.schema.json").read_text()
        )
        assert build_schema(f"{name}.schema.json") == shipped
        assert build_schema(f"{name}.schema.json", POLICY_ID_V2) != shipped


def test_reference_policy_v2_cites_every_decisive_record_discrepancy_and_term(
    corpus: Any,
) -> None:
    gaps = []
    for case in corpus.cases:
        finding = assess_v2(to_candidate_input(case, "rtb-1"))
        key = case.expectations
        found = {(d.record_id, d.field) for d in finding.discrepancies}
        text = finding.explanation.casefold()
        if not (
            set(key.decisive_record_ids) <= set(finding.evidence_refs)
            and {(d.record_id, d.field) for d in key.decisive_discrepancies} <= found
            and all(any(t.casefold() in text for t in terms) for terms in key.explanation_terms)
        ):
            gaps.append(case.case_id)
    assert gaps == []


def test_cli_validates_exports_and_writes_manifests_for_the_v0_2_format(tmp_path: Path) -> None:
    from tests.support.cli import invoke

    code, output = invoke("rtb", "validate", "--corpus", str(USER_FIXTURE))
    assert code == 0 and "rtb-narrow-approval-v2" in output
    code, _ = invoke("rtb", "export", "--corpus", str(USER_FIXTURE), "--out", str(tmp_path / "x"))
    assert code == 0 and len(list((tmp_path / "x" / "inputs").glob("*.json"))) == 5
    copy = tmp_path / "user"
    for rel, data in _files(USER_FIXTURE).items():
        (copy / rel).parent.mkdir(parents=True, exist_ok=True)
        (copy / rel).write_bytes(data)
    (copy / "MANIFEST.json").unlink()
    code, _ = invoke("rtb", "manifest", "--corpus", str(copy), "--version", "0.2-copy")
    assert code == 1  # without a policy id the cases are read as v0.1 and fail
    code, _ = invoke(
        "rtb", "manifest", "--corpus", str(copy), "--version", "0.2-copy",
        "--policy-id", POLICY_ID_V2,
    )  # fmt: skip
    assert code == 0 and validate_corpus(copy).problems == []
