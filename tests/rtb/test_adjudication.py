"""Reference decisions with their own evidence (issue 50): `trustbench rtb adjudicate`.

The CLI runs on copies of corpora in tmp_path; the built-in corpus and the record shipped
beside it are only read. Commands expected to succeed run in this process: a subprocess would
schema-check the 240-case v0.3 corpus again on every call (about 4 s each on a quiet machine,
half a minute on a loaded one), where this process checks each case once. Refusals run as a
subprocess, so they check `main`'s own one-line message and exit code.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from statsmodels.stats.inter_rater import fleiss_kappa as statsmodels_fleiss_kappa
from tests.support.child_env import child_env
from tests.support.cli import invoke

from trustbench.core.stats import fleiss_kappa
from trustbench.errors import CheckFailed
from trustbench.rtb.adjudication import (
    adjudication_report,
    apply_record,
    freeze_protocol,
    import_reviews,
    report_text,
    verify_record,
)
from trustbench.rtb.corpus._load import builtin_corpus_root

SMALL = Path(__file__).parent / "fixtures" / "rtb_v0_3_heldout"
BLIND_REVIEW = builtin_corpus_root("0.3").parent / "reviews" / "v0.3" / "blind-review-60.tsv"
LABELS = {
    "ho-01": "deny", "ho-02": "permit", "ho-03": "hold", "ho-04": "permit", "ho-05": "deny",
    "ho-06": "permit", "ho-07": "deny", "ho-08": "hold", "ho-09": "deny", "ho-10": "deny",
    "ho-11": "deny", "ho-12": "permit",
}  # fmt: skip
CONSEQUENTIAL = sorted(case for case, label in LABELS.items() if label != "permit")


def _cli(tmp: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trustbench", "rtb", "adjudicate", *map(str, args)],
        capture_output=True, text=True, check=False, env=child_env(tmp),
    )  # fmt: skip


def _ok(*args: str | Path) -> str:
    """`trustbench rtb adjudicate ARGS`, in this process, expected to exit 0; its output."""
    code, output = invoke("rtb", "adjudicate", *map(str, args))
    assert code == 0, output
    return output


def _report(record: Path) -> dict:
    return json.loads(_ok("report", record, "--json"))


def _validates(corpus: Path) -> None:
    """`trustbench rtb validate --corpus CORPUS` exits 0 (in this process, as `_ok`)."""
    code, output = invoke("rtb", "validate", "--corpus", str(corpus))
    assert code == 0, output


def _review_file(
    path: Path, reviewer: str, decisions: dict[str, str], *, blind: str | None = "yes"
) -> Path:
    lines = [
        f"# reviewer_id: {reviewer}",
        "# role: platform engineer (test fixture)",
        "# years: 7",
        *([] if blind is None else [f"# blind: {blind}"]),
        "case_id\tdecision\tgoverning_rules\tfacts_relied_on\tevidence",
    ]
    lines += [f"{case}\t{d}\tr4\tapproval-1\t{reviewer} says {d}" for case, d in decisions.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def _small_record(tmp: Path, sign_key: Path | None = None) -> tuple[Path, Path]:
    """A copy of a 12-case v0.3 corpus and a record whose protocol takes its 8 deny/hold cases,
    two reviewers each (blind second review), with one blind review (all agreeing with the
    labels) already recorded; written in-process as `protocol` and `import` write them."""
    corpus = tmp / "corpus"
    shutil.copytree(SMALL, corpus)
    record = tmp / "record.jsonl"
    freeze_protocol(
        record,
        str(corpus),
        selection="consequential",
        options={"reviewers_per_case": 2},
        sign_key=sign_key,
    )
    first = _review_file(tmp / "a.tsv", "rev-a", {case: LABELS[case] for case in CONSEQUENTIAL})
    import_reviews(record, first, declared={}, sign_key=sign_key)
    return corpus, record


@pytest.fixture
def small(tmp_path: Path) -> tuple[Path, Path]:
    """See `_small_record`."""
    return _small_record(tmp_path)


@pytest.fixture(scope="module")
def blind_review(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A copy of the built-in v0.3 corpus with the 60-case blind review imported afresh under a
    protocol listing exactly its cases, one reviewer each."""
    tmp = tmp_path_factory.mktemp("blind")
    corpus = tmp / "corpus"
    shutil.copytree(builtin_corpus_root("0.3"), corpus)
    record = tmp / "record.jsonl"
    _ok("protocol", record, "--corpus", corpus, "--select", "listed",
        "--cases-from", BLIND_REVIEW, "--no-blind-second-review")  # fmt: skip
    _ok("import", record, BLIND_REVIEW)
    return corpus, record


def test_blind_review_of_60_v0_3_cases_agrees_60_of_60_with_kappa_1_and_its_qualification(
    blind_review: tuple[Path, Path],
) -> None:
    _, record = blind_review
    report = _report(record)
    (reviewer,) = report["reviewers"]
    assert (reviewer["agree_with_label"], reviewer["cases"]) == (60, 60)
    assert reviewer["kappa_vs_labels"]["kappa"] == pytest.approx(1.0)
    assert "AI evaluator" in reviewer["qualification"]["role"]
    assert "not a human qualified reviewer" in reviewer["qualification"]["role"]
    assert report["status_counts"] == {"reviewed": 60}
    assert report["cases_outside_protocol"] == 180
    assert report["inter_reviewer"]["not_established"]
    text = _ok("report", record)
    assert "60/60" in text and "AI evaluator" in text


def test_apply_of_the_blind_review_marks_60_reviewed_leaves_180_pending_and_validates(
    blind_review: tuple[Path, Path], tmp_path: Path
) -> None:
    corpus, record = blind_review
    copy, copied_record = tmp_path / "corpus", tmp_path / "record.jsonl"
    shutil.copytree(corpus, copy)
    shutil.copy(record, copied_record)
    _ok("apply", copied_record, "--corpus", copy)
    statuses = [
        json.loads(path.read_text())["reference_status"] for path in (copy / "cases").glob("*")
    ]
    reviewed = [s for s in statuses if s["status"] == "reviewed"]
    assert len(reviewed) == 60
    assert sum(s["review"] == "pending_independent_domain_review" for s in statuses) == 180
    assert all("AI evaluator" in s["qualifications"][0] for s in reviewed)
    _validates(copy)


def test_the_shipped_v0_3_corpus_carries_the_applied_blind_review() -> None:
    statuses = [
        json.loads(path.read_text())["reference_status"]
        for path in (builtin_corpus_root("0.3") / "cases").glob("*.json")
    ]
    assert sum(s["status"] == "reviewed" for s in statuses) == 60
    assert sum(s["status"] == "authored" for s in statuses) == 180


def test_a_disagreeing_second_reviewer_is_kept_with_both_rationales_and_kappa_below_1(
    small: tuple[Path, Path], tmp_path: Path
) -> None:
    _, record = small
    second = {case: LABELS[case] for case in CONSEQUENTIAL}
    second["ho-03"] = "permit"
    _ok("import", record, _review_file(tmp_path / "b.tsv", "rev-b", second))
    report = _report(record)
    (disagreement,) = report["disagreements"]
    assert disagreement["case_id"] == "ho-03"
    assert {r["reviewer"]: r["evidence"] for r in disagreement["rationales"]} == {
        "rev-a": "rev-a says hold",
        "rev-b": "rev-b says permit",
    }
    assert report["inter_reviewer"]["method"] == "cohens_kappa"
    assert report["inter_reviewer"]["kappa"] < 1.0
    assert "rev-b: permit" in _ok("report", record)


def test_apply_sets_reviewed_disputed_and_pending_and_the_corpus_validates(
    small: tuple[Path, Path], tmp_path: Path
) -> None:
    corpus, record = small
    second = {case: LABELS[case] for case in CONSEQUENTIAL if case != "ho-11"}
    second["ho-03"] = "permit"
    _ok("import", record, _review_file(tmp_path / "b.tsv", "rev-b", second))
    _ok("apply", record)
    status = {
        case: json.loads((corpus / "cases" / f"{case}.json").read_text())["reference_status"]
        for case in LABELS
    }
    assert status["ho-03"]["status"] == "disputed"
    assert "rev-b: permit" in status["ho-03"]["disagreements"][0]
    assert status["ho-01"]["status"] == "reviewed"
    assert status["ho-01"]["reviewers"] == ["rev-a", "rev-b"]
    assert status["ho-11"]["status"] == "authored"  # one review of two: pending
    assert status["ho-02"]["status"] == "authored"  # outside the protocol
    assert (
        status["ho-01"]["record_sha256"] == json.loads(record.read_text().splitlines()[-2])["hash"]
    )
    _validates(corpus)


@pytest.mark.parametrize(
    ("rows", "reviewer", "expected"),
    [
        (["ho-99\tdeny"], "rev-b", "row 5: unknown case id 'ho-99'"),
        (["ho-02\tpermit"], "rev-b", "row 5: case ho-02 is outside the frozen protocol"),
        (["ho-01\tdeny"], "rev-a", "row 5: rev-a already reviewed ho-01"),
        (["ho-01\tmaybe"], "rev-b", "row 5: decision"),
        (["ho-01\tdeny", "ho-03"], "rev-b", "row 6: 2 columns expected"),
        (
            ["ho-01\tdeny", "ho-01\tdeny"],
            "rev-b",
            "row 6: rev-b already reviewed ho-01 (bad.tsv:5)",
        ),
    ],
    ids=[
        "unknown-case",
        "outside-protocol",
        "duplicate-review",
        "bad-decision",
        "short-row",
        "duplicate-in-one-file",
    ],
)
def test_bad_review_input_is_refused_in_one_line_and_the_record_is_unchanged(
    small: tuple[Path, Path], tmp_path: Path, rows: list[str], reviewer: str, expected: str
) -> None:
    _, record = small
    before = record.read_bytes()
    bad = tmp_path / "bad.tsv"
    header = [f"# reviewer_id: {reviewer}", "# role: tester", "# years: 1", "case_id\tdecision"]
    bad.write_text("\n".join(header + rows) + "\n")
    done = _cli(tmp_path, "import", record, bad)
    assert done.returncode == 2
    message = done.stderr.strip()
    assert len(message.splitlines()) == 1 and "Traceback" not in message
    assert str(bad) in message and expected in message
    assert record.read_bytes() == before


def test_a_byte_edit_of_the_record_is_refused_by_every_command(
    small: tuple[Path, Path], tmp_path: Path
) -> None:
    _, record = small
    lines = record.read_bytes().splitlines(keepends=True)
    lines[3] = lines[3].replace(b'"decision":"deny"', b'"decision":"hold"', 1)
    assert lines[3] != record.read_bytes().splitlines(keepends=True)[3]
    record.write_bytes(b"".join(lines))
    before = record.read_bytes()
    agreeing = {case: LABELS[case] for case in CONSEQUENTIAL}
    for command in (
        ["report", record],
        ["apply", record],
        ["import", record, _review_file(tmp_path / "b.tsv", "rev-b", agreeing)],
    ):
        done = _cli(tmp_path, *command)
        assert done.returncode == 1, command
        message = done.stderr.strip()
        assert len(message.splitlines()) == 1 and "Traceback" not in message
        assert f"{record}: line 4: entry 3 does not hash to its recorded hash" in message
    assert record.read_bytes() == before


def test_apply_refuses_a_corpus_whose_manifest_the_protocol_did_not_freeze(
    small: tuple[Path, Path], tmp_path: Path
) -> None:
    _, record = small
    other = tmp_path / "other"
    shutil.copytree(builtin_corpus_root("0.2"), other)
    done = _cli(tmp_path, "apply", record, "--corpus", other)
    assert done.returncode == 1
    assert "is not the manifest the protocol" in done.stderr


def test_signed_entries_carry_an_ed25519_signature_of_their_hash(tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from trustbench.core import pae

    key = Ed25519PrivateKey.generate()
    key_file = tmp_path / "signer.pem"
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    corpus = tmp_path / "corpus"
    shutil.copytree(SMALL, corpus)
    record = tmp_path / "record.jsonl"
    _ok("protocol", record, "--corpus", corpus, "--sign-key", key_file)
    (entry,) = [json.loads(line) for line in record.read_text().splitlines()]
    import base64

    key.public_key().verify(
        base64.b64decode(entry["signature"]["sig"]),
        pae("application/vnd.trustbench.adjudication-entry+sha256", entry["hash"].encode()),
    )


def test_fleiss_kappa_agrees_with_statsmodels_and_says_when_it_is_not_established() -> None:
    table = np.array([[3, 0, 0], [0, 3, 0], [2, 1, 0], [0, 1, 2], [0, 0, 3]])
    result = fleiss_kappa(table)
    assert result.kappa == pytest.approx(statsmodels_fleiss_kappa(table))
    assert result.interval is not None
    assert result.interval.lower < result.kappa < result.interval.upper
    assert fleiss_kappa(np.array([[3, 0, 0], [3, 0, 0]])).not_computable


def test_three_reviewers_are_compared_by_fleiss_kappa_with_an_interval(
    small: tuple[Path, Path], tmp_path: Path
) -> None:
    _, record = small
    for reviewer, flipped in (("rev-b", "ho-03"), ("rev-c", "ho-08")):
        decisions = {case: LABELS[case] for case in CONSEQUENTIAL}
        decisions[flipped] = "permit"
        _ok(
            "import",
            record,
            _review_file(tmp_path / f"{reviewer}.tsv", reviewer, decisions),
        )
    inter = _report(record)["inter_reviewer"]
    assert inter["method"] == "fleiss_kappa"
    assert inter["reviewers"] == ["rev-a", "rev-b", "rev-c"]
    assert 0 < inter["kappa"] < 1
    assert inter["interval"]["lower"] < inter["kappa"] < inter["interval"]["upper"]


def test_apply_with_a_bad_signing_key_writes_nothing(
    small: tuple[Path, Path], tmp_path: Path
) -> None:
    corpus, record = small
    agreeing = {case: LABELS[case] for case in CONSEQUENTIAL}
    _ok("import", record, _review_file(tmp_path / "b.tsv", "rev-b", agreeing))
    before = {path: path.read_bytes() for path in corpus.rglob("*") if path.is_file()}
    recorded = record.read_bytes()
    not_a_key = tmp_path / "not-a-key.pem"
    not_a_key.write_text("not a key\n")
    done = _cli(tmp_path, "apply", record, "--sign-key", not_a_key)
    assert done.returncode == 2
    assert {path: path.read_bytes() for path in before} == before
    assert record.read_bytes() == recorded


def _key_pair(folder: Path, name: str) -> tuple[Path, Path]:
    """An Ed25519 key pair in PEM files, as `trustbench keygen` writes them."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    (folder / name).write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    (folder / f"{name}.pub").write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return folder / name, folder / f"{name}.pub"


@pytest.fixture
def signed(tmp_path: Path) -> tuple[Path, Path]:
    """The small record with its protocol and 8 reviews signed; the signer's public key."""
    private, public = _key_pair(tmp_path, "signer")
    _, record = _small_record(tmp_path, sign_key=private)
    return record, public


def test_a_signed_record_verifies_under_its_public_key_and_says_so(
    signed: tuple[Path, Path], tmp_path: Path
) -> None:
    record, public = signed
    checked = verify_record(record, public)
    assert (checked.entries, checked.signed) == (9, 9)
    assert checked.verified_keyid is not None
    assert verify_record(record).verified_keyid is None  # no key: the chain only
    text = _ok("verify", record, "--public-key", public)
    assert "intact: 9 entries chained" in text and "every signature verified" in text


def test_one_edited_byte_of_a_signed_record_fails_verify_naming_the_entry(
    signed: tuple[Path, Path], tmp_path: Path
) -> None:
    record, public = signed
    data = record.read_bytes()
    record.write_bytes(data.replace(b'"decision":"deny"', b'"decision":"hold"', 1))
    done = _cli(tmp_path, "verify", record, "--public-key", public)
    assert done.returncode == 1
    message = done.stderr.strip()
    assert len(message.splitlines()) == 1 and "Traceback" not in message
    assert str(record) in message and "does not hash to its recorded hash" in message
    line = next(i for i, raw in enumerate(data.splitlines(), 1) if b'"decision":"deny"' in raw)
    assert f"line {line}: entry {line - 1} " in message


def test_a_signed_record_fails_verify_under_another_key_naming_the_first_entry(
    signed: tuple[Path, Path], tmp_path: Path
) -> None:
    record, _ = signed
    _, other = _key_pair(tmp_path, "other")
    with pytest.raises(CheckFailed, match="line 1: entry 0: its signature does not verify"):
        verify_record(record, other)


def test_a_moved_signature_fails_verify_though_the_chain_holds(
    signed: tuple[Path, Path],
) -> None:
    record, public = signed
    lines = record.read_text().splitlines(keepends=True)
    entry = json.loads(lines[2])
    entry["signature"]["sig"] = json.loads(lines[1])["signature"]["sig"]
    lines[2] = json.dumps(entry, separators=(",", ":"), sort_keys=True) + "\n"
    record.write_text("".join(lines))
    verify_record(record)  # the hashes still chain: only the signature shows the change
    with pytest.raises(CheckFailed, match="line 3: entry 2: its signature does not verify"):
        verify_record(record, public)


def test_verify_with_a_public_key_refuses_an_unsigned_record(
    small: tuple[Path, Path], tmp_path: Path
) -> None:
    _, record = small
    _, public = _key_pair(tmp_path, "signer")
    with pytest.raises(CheckFailed, match="line 1: entry 0 is unsigned"):
        verify_record(record, public)


@pytest.mark.parametrize(
    ("what", "expected"),
    [("missing-record", "no adjudication record"), ("not-a-key", "not an Ed25519 public key")],
)
def test_verify_refuses_bad_usage_with_exit_2_in_one_line(
    small: tuple[Path, Path], tmp_path: Path, what: str, expected: str
) -> None:
    _, record = small
    not_a_key = tmp_path / "not-a-key.pub"
    not_a_key.write_text("not a key\n")
    args = [record, "--public-key", not_a_key]
    done = _cli(
        tmp_path, "verify", *([tmp_path / "absent.jsonl"] if what == "missing-record" else args)
    )
    assert done.returncode == 2
    message = done.stderr.strip()
    assert len(message.splitlines()) == 1 and expected in message


def test_a_record_line_that_is_not_json_is_refused_naming_file_and_line(
    small: tuple[Path, Path],
) -> None:
    _, record = small
    record.write_bytes(record.read_bytes() + b"{not json\n")
    before = record.read_bytes()
    with pytest.raises(CheckFailed, match=r"line 10: not a record entry") as refused:
        verify_record(record)
    assert str(record) in str(refused.value) and len(str(refused.value).splitlines()) == 1
    assert record.read_bytes() == before


def test_report_states_per_consequential_case_its_independent_and_blind_reviews(
    small: tuple[Path, Path], tmp_path: Path
) -> None:
    _, record = small
    second = {case: LABELS[case] for case in CONSEQUENTIAL}
    import_reviews(
        record, _review_file(tmp_path / "b.tsv", "rev-b", second, blind="no"), declared={}
    )
    report = adjudication_report(record)
    requirements = {case["case_id"]: case["requirement"] for case in report["cases"]}
    assert requirements["ho-01"] == {
        "consequential": True,
        "reviews_needed": 2,
        "independent_reviews": 2,
        "blind_required": True,
        "declared_blind": {"rev-a": True, "rev-b": False},
        "met": False,
        "pending_reason": "needs 2 independent blind reviews (consequential case); "
        "has 2, 1 declared blind",
    }
    assert report["status_counts"] == {"pending": 8}
    text = report_text(report)
    assert (
        "ho-01: 2/2 independent review(s) (rev-a blind, rev-b NOT declared blind); pending" in text
    )


def test_apply_leaves_a_consequential_case_without_its_blind_reviews_pending(
    small: tuple[Path, Path], tmp_path: Path
) -> None:
    corpus, record = small
    blind = {case: LABELS[case] for case in CONSEQUENTIAL if case != "ho-05"}
    import_reviews(record, _review_file(tmp_path / "b.tsv", "rev-b", blind), declared={})
    not_blind = _review_file(tmp_path / "c.tsv", "rev-c", {"ho-05": "deny"}, blind=None)
    import_reviews(record, not_blind, declared={})
    assert apply_record(record)["status_counts"] == {"pending": 1, "reviewed": 7}
    status = {
        case: json.loads((corpus / "cases" / f"{case}.json").read_text())["reference_status"]
        for case in CONSEQUENTIAL
    }
    assert status["ho-05"]["status"] == "authored"  # rev-a blind, rev-c not declared blind
    assert status["ho-01"]["status"] == "reviewed"
    (case,) = [c for c in adjudication_report(record)["cases"] if c["case_id"] == "ho-05"]
    assert case["requirement"]["pending_reason"] == (
        "needs 2 independent blind reviews (consequential case); has 2, 1 declared blind"
    )


def test_import_declares_blind_from_its_option_over_the_file_header(
    small: tuple[Path, Path], tmp_path: Path
) -> None:
    _, record = small
    review = _review_file(tmp_path / "b.tsv", "rev-b", {"ho-01": "deny"}, blind="no")
    import_reviews(record, review, declared={}, blind=True)
    (case,) = [c for c in adjudication_report(record)["cases"] if c["case_id"] == "ho-01"]
    assert case["requirement"]["declared_blind"] == {"rev-a": True, "rev-b": True}
    assert case["status"] == "reviewed"


def test_a_blind_declaration_other_than_yes_or_no_is_refused_and_nothing_recorded(
    small: tuple[Path, Path], tmp_path: Path
) -> None:
    _, record = small
    before = record.read_bytes()
    review = _review_file(tmp_path / "b.tsv", "rev-b", {"ho-01": "deny"}, blind="mostly")
    done = _cli(tmp_path, "import", record, review)
    assert done.returncode == 2
    assert f"{review}: header: blind must be yes or no" in done.stderr
    assert record.read_bytes() == before


def test_a_listed_protocol_naming_an_unknown_case_is_refused_naming_file_and_row(
    tmp_path: Path,
) -> None:
    listed = tmp_path / "cases.tsv"
    listed.write_text("# cases to review\ncase_id\tnote\nho-01\tx\nho-77\ty\n")
    record = tmp_path / "record.jsonl"
    done = _cli(tmp_path, "protocol", record, "--corpus", SMALL, "--select", "listed",
                "--cases-from", listed)  # fmt: skip
    assert done.returncode == 2
    message = done.stderr.strip()
    assert len(message.splitlines()) == 1 and "Traceback" not in message
    assert f"{listed}: row 4: unknown case id 'ho-77'" in message
    assert not record.exists()
