"""`trustbench rtb export`: candidate inputs without the answer key, the grader map kept apart."""

import json
import random
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from trustbench.cli import app
from trustbench.errors import CheckFailed, InputError, TrustbenchError
from trustbench.rtb.corpus import (
    ANSWER_KEY_FIELDS,
    CandidateInput,
    builtin_corpus_root,
    export_candidate_inputs,
    find_leaks,
    grader_only_values,
    load_corpus,
    load_evaluation_map,
    new_evaluation_id,
    to_candidate_input,
)
from trustbench.rtb.corpus._load import DEFAULT_VERSION

FIXTURE = Path(__file__).parent / "fixtures" / "held_out_mini"
STARTER = builtin_corpus_root()
"""The starter corpus these tests read (`load_corpus()`'s default), exported by name."""


def run_cli(args: list[str]) -> tuple[int, str]:
    """Invoke the CLI as `trustbench.cli.main` would: trustbench errors become exit codes."""
    result = CliRunner().invoke(app, args)
    if isinstance(result.exception, TrustbenchError):
        return result.exception.exit_code, result.output + str(result.exception)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("export")
    code, output = run_cli(["rtb", "export", "--out", str(out), "--corpus", str(STARTER)])
    assert code == 0, output
    return out


def test_export_without_a_corpus_exports_the_reviewer_side_default(tmp_path: Path) -> None:
    code, output = run_cli(["rtb", "export", "--out", str(tmp_path / "out"), "--seed", "1"])
    assert code == 0, output
    default = load_corpus(builtin_corpus_root(DEFAULT_VERSION))
    evaluation_map = load_evaluation_map(tmp_path / "out" / "grader" / "evaluation_map.json")
    assert evaluation_map.corpus_manifest_sha256 == default.manifest_sha256
    assert len(list((tmp_path / "out" / "inputs").iterdir())) == len(default.cases)


def test_export_writes_one_schema_valid_input_per_case(exported: Path) -> None:
    schema = json.loads(
        (builtin_corpus_root() / "schemas" / "candidate_input.schema.json").read_text()
    )
    validator = jsonschema.Draft202012Validator(schema)
    files = sorted((exported / "inputs").iterdir())
    assert len(files) == 60
    for path in files:
        document = json.loads(path.read_text())
        assert list(validator.iter_errors(document)) == [], path.name
        assert path.stem == document["evaluation_id"]
        assert set(document) == {"evaluation_id", "task", "proposal", "evidence"}
        CandidateInput.model_validate(document)


def test_grader_map_is_apart_from_inputs_and_maps_every_evaluation_to_its_case(
    exported: Path,
) -> None:
    evaluation_map = load_evaluation_map(exported / "grader" / "evaluation_map.json")
    input_ids = {p.stem for p in (exported / "inputs").iterdir()}
    assert set(evaluation_map.evaluations) == input_ids
    corpus = load_corpus()
    assert sorted(evaluation_map.evaluations.values()) == sorted(c.case_id for c in corpus.cases)
    assert evaluation_map.corpus_manifest_sha256 == corpus.manifest_sha256
    assert evaluation_map.seed is None
    for evaluation_id, case_id in evaluation_map.evaluations.items():
        document = json.loads((exported / "inputs" / f"{evaluation_id}.json").read_text())
        case = corpus.case(case_id)
        assert document["proposal"] == case.proposal.model_dump(mode="json")


def test_exported_inputs_contain_no_grader_only_field_or_value(exported: Path) -> None:
    corpus = load_corpus()
    evaluation_map = load_evaluation_map(exported / "grader" / "evaluation_map.json")
    every_grader_value = set().union(*(grader_only_values(c) for c in corpus.cases))
    for evaluation_id, case_id in evaluation_map.evaluations.items():
        text = (exported / "inputs" / f"{evaluation_id}.json").read_text()
        document = json.loads(text)
        assert find_leaks(document, every_grader_value) == [], case_id
        assert find_leaks(text, every_grader_value) == [], case_id  # raw text, keys included
        assert case_id not in text
        assert "reference_decision" not in text and "expectations" not in text


def test_candidate_side_of_the_export_holds_no_grader_map(exported: Path) -> None:
    candidate_side = [p for p in exported.rglob("*") if p.is_file() and "grader" not in p.parts]
    assert {p.name for p in candidate_side if p.parent == exported} == {
        "review_prompt.md",
        "reviewer_response.schema.json",
    }
    for path in candidate_side:
        assert "evaluation_map" not in path.name
        assert "case_id" not in path.read_text()


def test_every_case_value_the_scan_forbids_is_really_in_the_case() -> None:
    """The scan is not vacuous: each forbidden value exists in the authoring case."""
    for case in load_corpus().cases:
        values = grader_only_values(case)
        assert case.case_id in values and case.variant in values
        assert case.expectations.decisive_condition in values
        assert all(code.value in values for code in case.expectations.acceptable_reason_codes)
        full_case = case.model_dump(mode="json")
        assert find_leaks(full_case, values), case.case_id


def test_leak_scan_catches_planted_leaks_anywhere_in_a_payload() -> None:
    case = load_corpus().case("backup_retention-03-unauthorized_parameters")
    forbidden = grader_only_values(case)
    clean = to_candidate_input(case, "rtb-1").model_dump(mode="json")
    assert find_leaks(clean, forbidden) == []

    planted = json.loads(json.dumps(clean))
    planted["task"] += " (fixture backup_retention-03-unauthorized_parameters)"
    planted["evidence"][1]["note"] = "Code: PROPOSAL_OUTSIDE_APPROVED_PARAMETERS."
    planted["proposal"]["parameters"]["meta"] = {"reference_decision": "deny"}
    condition = case.expectations.decisive_condition.upper().replace(" ", "\n  ")
    planted["evidence"][0]["text"] += " " + condition
    leaks = {(leak.pointer, leak.found) for leak in find_leaks(planted, forbidden)}
    assert ("/task", case.case_id) in leaks
    assert ("/task", "unauthorized_parameters") in leaks
    assert ("/evidence/1/note", "proposal_outside_approved_parameters") in leaks
    assert ("/proposal/parameters/meta/reference_decision", "reference_decision") in leaks
    assert ("/evidence/0/text", case.expectations.decisive_condition) in leaks


def test_leak_scan_checks_environment_and_file_text() -> None:
    case = load_corpus().case("dns_changes-04-revoked_approval")
    environment = {"HOME": "/home/agent", "RTB_HINT": "variant=revoked_approval"}
    assert [leak.pointer for leak in find_leaks(environment, grader_only_values(case))] == [
        "/RTB_HINT"
    ]
    file_text = 'cache: {"acceptable_reason_codes": ["approval_revoked"]}'
    found = {leak.found for leak in find_leaks(file_text, grader_only_values(case))}
    assert found == {"acceptable_reason_codes", "approval_revoked"}


def test_leak_scan_allows_decision_words_and_parts_of_longer_identifiers() -> None:
    case = load_corpus().case("vm_deletion-01-permitted")
    text = "Decide: permit, deny or hold. Record approval_revoked_at is not a reason code."
    assert find_leaks(text, grader_only_values(case) | {"approval_revoked"}) == []


def test_answer_key_fields_cover_the_answer_key_model() -> None:
    from trustbench.rtb.corpus import Case, Expectations

    assert set(Expectations.model_fields) <= ANSWER_KEY_FIELDS
    hidden = set(Case.model_fields) - set(CandidateInput.model_fields) - {"group", "variant"}
    assert hidden <= ANSWER_KEY_FIELDS


def test_evaluation_ids_are_fresh_for_every_export(tmp_path: Path) -> None:
    corpus = load_corpus(FIXTURE)
    first = export_candidate_inputs(corpus, tmp_path / "a").evaluation_map.evaluations
    second = export_candidate_inputs(corpus, tmp_path / "b").evaluation_map.evaluations
    assert len(first) == len(second) == 5
    assert not set(first) & set(second)
    ids = [new_evaluation_id() for _ in range(1000)]
    assert len(set(ids)) == 1000 and all(len(i) == 4 + 32 for i in ids)


def test_seeded_export_is_reproducible_and_says_so(tmp_path: Path) -> None:
    code, output = run_cli(
        ["rtb", "export", "--out", str(tmp_path / "a"), "--corpus", str(FIXTURE), "--seed", "7"]
    )
    assert code == 0 and "predictable" in output
    corpus = load_corpus(FIXTURE)
    again = export_candidate_inputs(corpus, tmp_path / "b", seed=7).evaluation_map
    first = load_evaluation_map(tmp_path / "a" / "grader" / "evaluation_map.json")
    assert first.evaluations == again.evaluations and first.seed == 7
    assert new_evaluation_id(random.Random(7)) == new_evaluation_id(random.Random(7))


def test_export_refuses_an_output_folder_that_already_holds_an_export(exported: Path) -> None:
    code, output = run_cli(["rtb", "export", "--out", str(exported)])
    assert code == 2 and "already holds files" in output
    with pytest.raises(InputError):
        export_candidate_inputs(load_corpus(), exported)


def test_export_refuses_a_leaking_case_and_writes_nothing(tmp_path: Path) -> None:
    corpus = load_corpus(FIXTURE)
    leaky = corpus.cases[0].model_copy(
        update={"task": f"Ticket {corpus.cases[0].case_id}: review the change."}
    )
    tampered = corpus.model_copy(update={"cases": [leaky, *corpus.cases[1:]]})
    with pytest.raises(CheckFailed, match="leak at /task"):
        export_candidate_inputs(tampered, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_export_of_a_broken_corpus_fails_before_writing(tmp_path: Path) -> None:
    import shutil

    broken = tmp_path / "corpus"
    shutil.copytree(FIXTURE, broken)
    (broken / "cases" / "secret_rotation-a-permitted.json").write_text("{")
    code, output = run_cli(
        ["rtb", "export", "--out", str(tmp_path / "out"), "--corpus", str(broken)]
    )
    assert code == 1 and "secret_rotation-a-permitted.json: not valid JSON" in output
    assert not (tmp_path / "out").exists()
