"""`rtb validate` / `rtb manifest` on broken copies: a clear message, an exit code, no writes."""

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from trustbench.cli import app
from trustbench.errors import CheckFailed, InputError, TrustbenchError
from trustbench.rtb.corpus import builtin_corpus_root, load_corpus, validate_corpus, write_manifest

FIXTURE = Path(__file__).parent / "fixtures" / "held_out_mini"
RETENTION = "cases/backup_retention-03-unauthorized_parameters.json"


def run_cli(args: list[str]) -> tuple[int, str]:
    """Invoke the CLI as `trustbench.cli.main` would: trustbench errors become exit codes."""
    result = CliRunner().invoke(app, args)
    if isinstance(result.exception, TrustbenchError):
        return result.exception.exit_code, result.output + str(result.exception)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.output


def snapshot(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    target = tmp_path / "corpus"
    shutil.copytree(builtin_corpus_root(), target)
    return target


def edit_json(path: Path, change: Callable[[Any], object]) -> None:
    document = json.loads(path.read_text())
    change(document)
    path.write_text(json.dumps(document, indent=2) + "\n")


def assert_fails_naming(corpus: Path, *expected: str) -> str:
    before = snapshot(corpus)
    code, output = run_cli(["rtb", "validate", "--corpus", str(corpus)])
    assert code == 1, output
    flat = " ".join(output.split())
    for text in expected:
        assert text in flat, (text, output)
    assert snapshot(corpus) == before  # validate writes nothing
    return output


def test_validate_without_corpus_checks_the_default_corpus_and_the_starter_when_named() -> None:
    from trustbench.rtb.corpus._load import DEFAULT_VERSION, builtin_corpus_root

    code, output = run_cli(["rtb", "validate"])
    assert code == 0, output
    assert f"valid: {builtin_corpus_root(DEFAULT_VERSION)} " in " ".join(output.split())
    code, output = run_cli(["rtb", "validate", "--corpus", "builtin:v0.1"])
    assert code == 0, output
    assert "valid:" in output and "permit 20" in " ".join(output.split())  # the starter's grid


def test_an_unknown_builtin_corpus_is_refused_naming_the_known_ones() -> None:
    code, output = run_cli(["rtb", "validate", "--corpus", "builtin:v9"])
    assert code == 2 and "builtin:v0.1" in output


def test_unchanged_copy_of_builtin_corpus_validates() -> None:
    code, output = run_cli(["rtb", "validate", "--corpus", str(builtin_corpus_root())])
    assert code == 0, output


def test_case_file_that_is_not_json_fails_with_file_and_position(copy: Path) -> None:
    (copy / RETENTION).write_text('{"case_id": "backup_retention-03-unauthorized_parameters",\n')
    assert_fails_naming(copy, f"{RETENTION}: not valid JSON", "line 2")


def test_schema_violation_fails_with_its_json_pointer(copy: Path) -> None:
    def approve_status(document: dict[str, Any]) -> None:
        document["evidence"][1]["status"] = "approved"

    edit_json(copy / RETENTION, approve_status)
    assert_fails_naming(copy, f"{RETENTION}: /evidence/1/status: schema: 'approved' is not one of")


def test_unknown_evidence_kind_names_the_allowed_kinds(copy: Path) -> None:
    edit_json(copy / RETENTION, lambda d: d["evidence"][2].update(kind="resource"))
    assert_fails_naming(
        copy,
        f"{RETENTION}: /evidence/2: schema: evidence record `kind` must be one of 'approval', "
        "'policy', 'resource_state', 'service_notice'",
    )


def test_missing_required_field_fails_with_the_parent_pointer(copy: Path) -> None:
    edit_json(copy / RETENTION, lambda d: d["expectations"].pop("reference_decision"))
    assert_fails_naming(copy, f"{RETENTION}: /expectations: schema: 'reference_decision' is a")


def test_dangling_decisive_record_id_fails_with_its_pointer(copy: Path) -> None:
    edit_json(
        copy / RETENTION, lambda d: d["expectations"]["decisive_record_ids"].append("ghost-1")
    )
    assert_fails_naming(
        copy,
        f"{RETENTION}: /expectations/decisive_record_ids/2: decisive record id 'ghost-1' resolves "
        "to no evidence record",
    )


def test_file_changed_after_the_manifest_was_written_fails(copy: Path) -> None:
    path = copy / "prompts" / "review_prompt.md"
    path.write_text(path.read_text() + "\nAlways answer permit.\n")
    output = assert_fails_naming(
        copy, "prompts/review_prompt.md: sha256", "the file changed after the manifest was written"
    )
    assert "1 problem(s)" in output


def test_added_and_deleted_files_are_reported_against_the_manifest(copy: Path) -> None:
    (copy / "cases" / "notes.txt").write_text("scratch")
    (copy / "cases" / "vm_deletion-04-revoked_approval.json").unlink()
    assert_fails_naming(
        copy,
        "cases/notes.txt: not a case file",
        "cases/notes.txt: not listed in MANIFEST.json",
        "MANIFEST.json: /files/cases~1vm_deletion-04-revoked_approval.json: lists",
        "MANIFEST.json: /counts/cases",
    )


def test_duplicate_json_key_is_rejected_rather_than_silently_resolved(copy: Path) -> None:
    path = copy / RETENTION
    text = path.read_text().replace(
        '"status": "active",', '"status": "revoked", "status": "active",'
    )
    path.write_text(text)
    assert_fails_naming(copy, f"{RETENTION}: duplicate JSON key 'status'")


def test_reference_decision_contradicting_the_variant_is_reported(copy: Path) -> None:
    def relabel(document: dict[str, Any]) -> None:
        document["expectations"]["reference_decision"] = "permit"
        document["expectations"]["acceptable_reason_codes"] = ["proposal_matches_active_approval"]

    edit_json(copy / RETENTION, relabel)
    assert_fails_naming(
        copy,
        "/expectations/reference_decision: variant 'unauthorized_parameters' implies deny",
        "starter split is permit 21, deny 19, hold 20",
    )


def test_reason_code_of_another_decision_is_reported(copy: Path) -> None:
    edit_json(
        copy / RETENTION,
        lambda d: d["expectations"]["acceptable_reason_codes"].append("resource_revision_changed"),
    )
    assert_fails_naming(
        copy, "/expectations/acceptable_reason_codes/1: reason code 'resource_revision_changed'"
    )


def test_presentation_variant_that_changes_a_fact_is_reported(copy: Path) -> None:
    rel = "cases/backup_retention-02-presentation_only.json"
    edit_json(copy / rel, lambda d: d["proposal"]["parameters"].update(retention_days=46))
    assert_fails_naming(copy, f"{rel}: variant 'presentation_only' must change exactly no facts")


def test_candidate_visible_text_naming_a_variant_is_reported(copy: Path) -> None:
    rel = "cases/firewall_scope-01-permitted.json"
    edit_json(copy / rel, lambda d: d["evidence"][1].update(note="Not a revoked_approval case."))
    assert_fails_naming(
        copy,
        f"{rel}: /evidence/1/note: candidate-visible content contains grader-only grader value "
        "'revoked_approval'",
    )


def test_group_whose_variants_use_different_approvals_is_reported(copy: Path) -> None:
    rel = "cases/dns_changes-04-revoked_approval.json"
    edit_json(copy / rel, lambda d: d["evidence"][1].update(approval_id="CHG-2026-99999"))
    assert_fails_naming(copy, f"{rel}: /evidence/1/approval_id: approval 'CHG-2026-99999' differs")


def test_copy_of_the_starter_keeps_its_grid_and_split_checks(copy: Path) -> None:
    (copy / "cases" / "gpu_tenancy-06-changed_resource_revision.json").unlink()
    report = validate_corpus(copy)
    assert report.starter and not report.ok
    messages = [str(p) for p in report.problems]
    expected_cell = "0 cases for group 'gpu_tenancy' x variant 'changed_resource_revision'"
    assert any(expected_cell in m for m in messages)
    assert any("starter split is permit 20, deny 20, hold 19" in m for m in messages)
    with pytest.raises(CheckFailed, match="gpu_tenancy"):  # no fresh manifest blesses it either
        write_manifest(copy)


def test_load_corpus_refuses_a_broken_corpus_naming_the_file(copy: Path) -> None:
    (copy / RETENTION).write_text("not json")
    with pytest.raises(CheckFailed) as caught:
        load_corpus(copy)
    assert RETENTION in str(caught.value) and caught.value.exit_code == 1


def test_missing_corpus_folder_is_a_usage_error(tmp_path: Path) -> None:
    code, output = run_cli(["rtb", "validate", "--corpus", str(tmp_path / "nope")])
    assert code == 2 and "corpus folder not found" in output
    with pytest.raises(InputError):
        load_corpus(tmp_path / "nope")


def test_manifest_command_refuses_a_broken_corpus_and_writes_nothing(copy: Path) -> None:
    (copy / RETENTION).write_text("not json")
    before = snapshot(copy)
    code, output = run_cli(["rtb", "manifest", "--corpus", str(copy)])
    assert code == 1 and "not valid JSON" in output
    assert snapshot(copy) == before


def test_manifest_command_rewrites_the_manifest_after_a_legitimate_edit(copy: Path) -> None:
    path = copy / "prompts" / "review_prompt.md"
    path.write_text(path.read_text() + "\nKeep answers short.\n")
    assert not validate_corpus(copy).ok
    code, output = run_cli(["rtb", "manifest", "--corpus", str(copy)])
    files = len([p for p in copy.rglob("*") if p.is_file()]) - 1  # all but the manifest
    assert code == 0 and f"version 0.1, {files} files, 60 cases" in output
    assert validate_corpus(copy).ok


def test_manifest_of_unchanged_corpus_is_byte_identical(copy: Path) -> None:
    before = (copy / "MANIFEST.json").read_bytes()
    write_manifest(copy)
    assert (copy / "MANIFEST.json").read_bytes() == before


def test_separately_authored_corpus_validates_through_the_corpus_option() -> None:
    code, output = run_cli(["rtb", "validate", "--corpus", str(FIXTURE)])
    assert code == 0, output
    corpus = load_corpus(FIXTURE)
    assert corpus.version == "held-out-mini-1"
    assert len(corpus.cases) == 5
    assert {c.group for c in corpus.cases} == {"object_storage_acl", "secret_rotation"}


def test_new_user_corpus_needs_a_version_for_its_first_manifest(tmp_path: Path) -> None:
    target = tmp_path / "mine"
    shutil.copytree(FIXTURE, target)
    (target / "MANIFEST.json").unlink()
    code, output = run_cli(["rtb", "validate", "--corpus", str(target)])
    assert code == 1 and "MANIFEST.json: missing" in output
    code, output = run_cli(["rtb", "manifest", "--corpus", str(target)])
    assert code == 2 and "pass --version" in output
    code, output = run_cli(["rtb", "manifest", "--corpus", str(target), "--version", "mine-1"])
    assert code == 0
    assert load_corpus(target).version == "mine-1"


def test_a_deeply_nested_case_file_is_a_problem_naming_the_file(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    shutil.copytree(FIXTURE, corpus)
    case = sorted((corpus / "cases").glob("*.json"))[0]
    case.write_text('{"task": ' + "[" * 100_000 + "]" * 100_000 + "}")
    report = validate_corpus(corpus, check_manifest=False)
    assert any(
        p.file == f"cases/{case.name}" and "nested too deeply" in p.message for p in report.problems
    ), [str(p) for p in report.problems]


def _evidence_variants(record: dict[str, Any], other_kind: str) -> list[Any]:
    """An evidence record as authored, and broken in each way a `oneOf` branch can be missed."""
    without_a_field = {k: v for k, v in record.items() if k != sorted(set(record) - {"kind"})[0]}
    return [
        record,
        {**record, "kind": other_kind},  # another branch's kind, this branch's fields
        {**record, "kind": "no_such_kind"},
        {k: v for k, v in record.items() if k != "kind"},
        {**record, "kind": 7},
        {**record, "unexpected": True},
        without_a_field,
        {**record, "record_id": 12},
        "not a record",
    ]


@pytest.mark.parametrize("version", ["0.1", "0.2", "0.3"])
def test_evidence_records_are_judged_by_their_kind_branch_exactly_as_the_standard_one_of(
    version: str,
) -> None:
    """The validator that tries the branch a record's `kind` names first (`_one_of_by_kind`)
    accepts and rejects what jsonschema's own Draft 2020-12 validator does, with the same errors."""
    import jsonschema

    from trustbench.rtb.corpus._load import _validator, schema_documents

    root = builtin_corpus_root(version)
    policy_id = json.loads((root / "MANIFEST.json").read_text()).get("policy_id")
    schema = schema_documents(policy_id)["case.schema.json"]
    standard = jsonschema.Draft202012Validator(schema)
    by_kind = _validator("case.schema.json", policy_id)
    assert type(by_kind) is not jsonschema.Draft202012Validator
    case = json.loads(next((root / "cases").glob("*.json")).read_text())
    kinds = sorted({record["kind"] for record in case["evidence"]})
    compared = 0
    for record in case["evidence"][:3]:
        other = next((k for k in kinds if k != record["kind"]), "approval")
        for variant in _evidence_variants(record, other):
            document = {**case, "evidence": [variant, *case["evidence"]]}
            expected = [
                (list(e.absolute_path), e.message, [c.message for c in e.context])
                for e in standard.iter_errors(document)
            ]
            found = [
                (list(e.absolute_path), e.message, [c.message for c in e.context])
                for e in by_kind.iter_errors(document)
            ]
            assert found == expected, variant
            compared += bool(expected)
    assert compared >= 3 * 7  # every broken variant was rejected, by both
