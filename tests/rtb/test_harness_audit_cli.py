"""`trustbench rtb audit`: harness checks hold on v0.1 (which is saturated); a wrong label fails.

What gates and what is reported follows issue 51: surface rules, policy-blind attackers, the
artifact scan, rule ablation and the review gates gate; learners of the fields the rules read are
reported.
"""

from pathlib import Path

import pytest
from typer.testing import CliRunner

import trustbench.rtb.corpus as corpus_package
from trustbench.cli import app
from trustbench.errors import CheckFailed
from trustbench.rtb._harness_audit import CorpusAudit, run_harness_audit
from trustbench.rtb.corpus import load_corpus
from trustbench.rtb.corpus._models import Decision
from trustbench.rtb.review._learning_audit import recovery_line


def test_rtb_audit_harness_checks_hold_on_builtin_corpus_which_is_saturated() -> None:
    # v0.1 is saturated (surface rules reach its answer key), so the command exits 1 for that
    # reason alone; every harness check still holds. See tests/rtb/test_shortcuts.py.
    v0_1 = Path(corpus_package.__file__).parent / "v0.1"
    result = CliRunner().invoke(app, ["rtb", "audit", "--corpus", str(v0_1)])
    assert result.exit_code == 1, result.output
    assert "FAILED" not in result.output
    assert "corpus saturated" in result.output
    # Rule ablation (issue 26): every declared rule is listed with the cases turning on it, and
    # the rules no v0.1 case exercises are named.
    assert "cases turning on each policy rule: operation-and-target 0, approval-active 10" in (
        result.output
    )
    assert "policy rules not load-bearing" in result.output
    assert "operation-and-target, deny-outranks-hold" in result.output


def test_harness_audit_names_the_case_whose_reference_label_is_wrong() -> None:
    corpus = load_corpus()
    wrong_id = "backup_retention-03-unauthorized_parameters"
    cases = []
    for case in corpus.cases:
        if case.case_id == wrong_id:
            expectations = case.expectations.model_copy(
                update={"reference_decision": Decision.PERMIT}
            )
            case = case.model_copy(update={"expectations": expectations})
        cases.append(case)
    rows = run_harness_audit(corpus.model_copy(update={"cases": cases}))
    failed = [row for row in rows if not row.passed]
    assert failed, "a wrong answer key must make the audit fail"
    assert any(wrong_id in row.detail for row in failed)


def test_rtb_audit_on_v0_2_fails_on_policy_blind_attackers_reports_learners_and_no_workflow() -> (
    None
):
    v0_2 = Path(corpus_package.__file__).parent / "v0.2"
    result = CliRunner().invoke(app, ["rtb", "audit", "--corpus", str(v0_2)])
    # Every harness check holds and no fixed surface rule saturates v0.2. Its learned attackers
    # read the fields the rules read: since issue 51 their figures are reported ("a shallow
    # learner ... recovers"), no longer a failure ("corpus saturated by learned attackers"
    # before). What still fails v0.2 is gated: its policy-blind attackers, fitted within the
    # corpus, learn the generator's id suffixes; and rules no case turns on.
    assert result.exit_code == 1, result.output
    assert "harness audit checks that ran hold" in result.output
    assert "corpus not saturated: all" in result.output
    assert "saturated by learned attackers" not in result.output
    assert "reported: a shallow learner (logistic-regression, fitted on corpus" in result.output
    assert "logistic-regression " not in str(result.exception)  # reported, never a failure
    assert "policy rules not load-bearing" in result.output
    assert "issued-by-as-of" in result.output
    # The boundaries enforce the v0.2 policy, so the control audit runs; the workflow track is
    # still v0.1-only, so its audit is "not run", never "holds".
    assert "control audit not run" not in result.output
    assert "workflow audit not run" in result.output
    # v0.2 ships no generator: its pool-trained attackers are "not run", and the failure the
    # exit code rests on does not name them.
    assert "pool-trained attackers not run (no generator shipped)" in result.output
    assert "blind-forest (corpus, leave one domain group out)" in str(result.exception)
    assert "generator" not in str(result.exception)


def test_not_run_audit_rows_never_count_as_passed() -> None:
    rows = run_harness_audit(load_corpus(Path(corpus_package.__file__).parent / "v0.2"))
    not_run = [row for row in rows if row.not_run]
    assert {row.track for row in not_run} == {"workflow"}
    assert not any(row.passed for row in not_run)


def test_rtb_audit_on_a_five_case_corpus_fails_with_reasons_not_a_traceback() -> None:
    # Fewer training inputs than the kNN attacker's 5 neighbours once a group is held out: the
    # attacker uses as many as there are, and the audit still ends in a verdict.
    small = Path(__file__).parent / "fixtures" / "rtb_v0_2_user"
    result = CliRunner().invoke(app, ["rtb", "audit", "--corpus", str(small)])
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, (SystemExit, CheckFailed)), result.exception
    assert "learned attacker" in result.output


def test_audit_without_corpus_reads_the_default_corpus_and_the_starter_only_when_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from trustbench.rtb.corpus._load import DEFAULT_VERSION, builtin_corpus_root
    from trustbench.rtb.heldout import _pipeline

    audited: list[Path] = []

    def stop_at_the_corpus(path: Path, key: object, what: str) -> None:
        audited.append(path)
        raise CheckFailed("stopped here: the test needs only the corpus")

    monkeypatch.setattr(_pipeline, "corpus_with_labels", stop_at_the_corpus)
    CliRunner().invoke(app, ["rtb", "audit"])
    CliRunner().invoke(app, ["rtb", "audit", "--corpus", "builtin:v0.1"])
    assert audited == [builtin_corpus_root(DEFAULT_VERSION), builtin_corpus_root("0.1")]


class _Verdicts(CorpusAudit):
    """A `CorpusAudit` whose verdict lines are given (the summary reads nothing else)."""

    def __init__(self, lines: list[tuple[bool | None, str]]) -> None:
        object.__setattr__(self, "lines", lines)

    def verdicts(self) -> list[tuple[bool | None, str]]:
        return self.lines  # type: ignore[attr-defined]


def test_the_audit_summary_counts_the_reported_learners_instead_of_quoting_each() -> None:
    reported = recovery_line("structure-logistic", "pool", 99, 132, [("superseded-holds", 8, 10)])
    passing = _Verdicts([(True, "all 8 surface rules at or below the ceiling"), (True, reported),
                         (True, reported.replace("structure", "relations"))])  # fmt: skip
    summary = passing.summary()
    assert summary.startswith("passed (all 8 surface rules at or below the ceiling; ")
    assert "2 learners of the fields the rules read reported, not gated" in summary
    assert "structure-logistic" not in summary
    failing = _Verdicts([(False, "label artifacts: 1 token class"), (True, reported)])
    assert failing.summary() == "FAILS, as `rtb audit` exits 1: label artifacts: 1 token class"
