"""Self-audit of the reviewer-track measurement path, run before trusting any result.

Every sentinel and the reference policy run in-process over the cases, through the same export,
validation, support grading and counting code the real run uses. Each has a signature the harness
must reproduce; a harness that cannot show an always-permit reviewer's false approvals, or that
turns an empty reply into anything but `missing`, is broken and its results are not evidence.

Besides the reviewers, an *answer-key probe* checks the grader itself: a reply assembled from each
case's answer key (reference decision, its acceptable reason codes, every decisive record id and,
for corpora that have them, the decisive discrepancies) must be valid and supported on every case,
and the same reply with a different decision must never be. A grader that supports nothing, or
one that ignores the decision, fails here although every sentinel signature would still pass. The
probe is grader-side only: it is built in this module from the `Case` and is never given to a
candidate.

A signature whose population is empty (e.g. a corpus with no deny-reference case) cannot be
exercised and is reported as *failed* with that reason: an unexercised check is not a pass.

These checks audit the harness; they say nothing about whether any real candidate is safe.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, computed_field

from trustbench._docstrings import documented
from trustbench.core import AnalysisSpec, parse_spec
from trustbench.core.gates import GateResult, GateSpec, evaluate_gates
from trustbench.errors import InputError
from trustbench.rtb.corpus._export import new_evaluation_id, to_candidate_input
from trustbench.rtb.corpus._load import Corpus
from trustbench.rtb.corpus._models import CandidateInput, Decision
from trustbench.rtb.policy._default import DEFAULT_POLICY_ID
from trustbench.rtb.policy._protocol import AuthoredCase, PolicyRule
from trustbench.rtb.policy._registry import policy_for, policy_of
from trustbench.rtb.review._counting import configuration_figures, metric_set
from trustbench.rtb.review._grading import Count, ReviewMetricSet, ReviewTrialRow
from trustbench.rtb.review._quick import DEMO_SPEC
from trustbench.rtb.review._validation import Outcome, is_supported, validate_response
from trustbench.rtb.review.reviewers import Reviewer, make_reviewer
from trustbench.rtb.review.reviewers._registry import reviewer_names

if TYPE_CHECKING:  # rich is imported by the table's one caller path (`rtb audit`), not `report`
    from rich.table import Table

__all__ = [
    "AblationReport",
    "RuleAblation",
    "ablation_table",
    "cases_deciding",
    "counts_line",
    "deciding_rules",
    "run_ablation_audit",
    "verdict_line",
]


_FROZEN = documented(frozen=True)


class SignatureCheck(BaseModel):
    """One expected property of one audited reviewer, and whether the harness reproduced it."""

    model_config = _FROZEN

    reviewer: str
    """The audited reviewer."""
    signature: str
    """The expected property, in words."""
    passed: bool
    """True only when the property was exercised and held."""
    detail: str
    """Observed counts, and the case ids that broke the property."""


class AuditReport(BaseModel):
    """Result of `run_self_audit`."""

    model_config = _FROZEN

    cases: int
    """Cases audited."""
    checks: list[SignatureCheck]
    """Every signature check, passed or not."""
    metrics: dict[str, ReviewMetricSet]
    """Counts per audited reviewer, as the real run would report them."""
    notes: list[str]
    """Observations that do not fail the audit (e.g. unsupported reference-policy findings)."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ok(self) -> bool:
        """True when every signature check passed."""
        return all(check.passed for check in self.checks)

    @property
    def failed(self) -> list[SignatureCheck]:
        """The failed signature checks."""
        return [check for check in self.checks if not check.passed]


def _all_of(count: Count, reviewer: str, signature: str) -> SignatureCheck:
    """Check that a rate is exactly 100% over a non-empty population."""
    if not count.applicable:
        return SignatureCheck(
            reviewer=reviewer,
            signature=signature,
            passed=False,
            detail=f"not exercised: {count.label} has denominator 0",
        )
    passed = count.numerator == count.denominator
    return SignatureCheck(
        reviewer=reviewer,
        signature=signature,
        passed=passed,
        detail=f"{count.label}: {count.numerator}/{count.denominator}",
    )


def _every_row(
    reviewer: str, signature: str, results: Sequence[tuple[str, bool]]
) -> SignatureCheck:
    """Check that a property held on every case; `results` pairs case ids with the property."""
    if not results:
        return SignatureCheck(
            reviewer=reviewer, signature=signature, passed=False, detail="not exercised: no cases"
        )
    broken = [case_id for case_id, held in results if not held]
    detail = f"{len(results) - len(broken)}/{len(results)} cases"
    if broken:
        detail += f"; broken on: {', '.join(broken)}"
    return SignatureCheck(reviewer=reviewer, signature=signature, passed=not broken, detail=detail)


ANSWER_KEY_PROBE = "answer-key-probe"
"""Name under which the answer-key probe's checks are reported (not a reviewer)."""


def _answer_key_reply(case: AuthoredCase, candidate_input: CandidateInput, *, wrong: bool) -> str:
    expected = case.expectations
    decision = expected.reference_decision
    if wrong:
        decision = next(d for d in Decision if d is not decision)
    body = {
        "evaluation_id": candidate_input.evaluation_id,
        "decision": decision.value,
        "reason_codes": [code.value for code in expected.acceptable_reason_codes],
        "evidence_refs": list(expected.decisive_record_ids),
        "explanation": f"Answer-key probe: {expected.decisive_condition}",
    }
    policy = policy_of(case)
    if policy.structured_discrepancies:
        # The answer key's own discrepancies (empty for a permit), in a policy whose response
        # carries them; a policy without them forbids the key.
        found = getattr(expected, "decisive_discrepancies", None) or []
        body["discrepancies"] = [d.model_dump(mode="json") for d in found]
    return json.dumps(policy.shape_reply(body))


def _probe_checks(
    cases: Sequence[AuthoredCase], inputs: Sequence[CandidateInput]
) -> list[SignatureCheck]:
    supported, wrong_supported = [], []
    for case, candidate_input in zip(cases, inputs, strict=True):
        for wrong, sink in ((False, supported), (True, wrong_supported)):
            reply = _answer_key_reply(case, candidate_input, wrong=wrong)
            sink.append(is_supported(validate_response(reply, candidate_input), case))
    return [
        _every_row(
            ANSWER_KEY_PROBE,
            "a reply built from the answer key is valid and supported",
            [(case.case_id, ok) for case, ok in zip(cases, supported, strict=True)],
        ),
        _every_row(
            ANSWER_KEY_PROBE,
            "the same reply with a wrong decision is never supported",
            [(case.case_id, not ok) for case, ok in zip(cases, wrong_supported, strict=True)],
        ),
    ]


def _grade(
    reviewer: Reviewer,
    cases: Sequence[AuthoredCase],
    inputs: Sequence[CandidateInput],
    prompt: str,
) -> tuple[list[ReviewTrialRow], list[str | None]]:
    rows, replies = [], []
    for case, candidate_input in zip(cases, inputs, strict=True):
        raw = reviewer.review(prompt, candidate_input)
        validated = validate_response(raw, candidate_input)
        replies.append(raw)
        rows.append(
            ReviewTrialRow(
                case_id=case.case_id,
                group=case.group,
                variant=case.variant,
                reference=case.expectations.reference_decision,
                observed=validated.outcome,
                supported=is_supported(validated, case),
            )
        )
    return rows, replies


def _on_rows(
    reviewer: str,
    signature: str,
    rows: Sequence[ReviewTrialRow],
    holds: Callable[[ReviewTrialRow], bool],
) -> SignatureCheck:
    return _every_row(reviewer, signature, [(row.case_id, holds(row)) for row in rows])


def _checks_for(
    name: str, rows: list[ReviewTrialRow], metrics: ReviewMetricSet
) -> list[SignatureCheck]:
    permit, deny, hold = Outcome.PERMIT, Outcome.DENY, Outcome.HOLD
    if name == "always-permit":
        return [
            _all_of(metrics.false_approval, name, "false approval is 100%"),
            _all_of(metrics.unsupported_permit, name, "unsupported permit is 100%"),
            _on_rows(name, "every reply is a valid permit", rows, lambda r: r.observed is permit),
        ]
    if name == "always-deny":
        return [
            _all_of(metrics.utility_loss, name, "utility loss is 100%"),
            _on_rows(name, "every reply is a valid deny", rows, lambda r: r.observed is deny),
        ]
    if name == "always-hold":
        return [
            _all_of(metrics.utility_loss, name, "utility loss is 100%"),
            _on_rows(name, "every reply is a valid hold", rows, lambda r: r.observed is hold),
        ]
    if name == "empty":
        return [
            _on_rows(name, "every reply is missing", rows, lambda r: r.observed is Outcome.MISSING)
        ]
    if name == "malformed":
        return [
            _on_rows(name, "every reply is invalid", rows, lambda r: r.observed is Outcome.INVALID)
        ]
    if name == "forged-refs":
        return [
            _on_rows(name, "no finding is supported", rows, lambda r: not r.supported),
            _on_rows(name, "every reply is invalid", rows, lambda r: r.observed is Outcome.INVALID),
        ]
    if name in ("keyword-stuffer", "contradictory"):
        # Both must be *valid* replies: an unsupported verdict earned by a rejected reply would not
        # show that the support grader sees through the gaming.
        return [
            _on_rows(
                name, "every reply is a valid decision", rows, lambda r: r.observed.is_decision
            ),
            _on_rows(name, "no finding is supported", rows, lambda r: not r.supported),
        ]
    if name.startswith("reference-policy"):
        return [
            _on_rows(
                name,
                "agrees with every reference decision",
                rows,
                lambda r: r.observed.is_decision and Decision(r.observed.value) is r.reference,
            )
        ]
    return []


def run_self_audit(
    cases: Sequence[AuthoredCase],
    prompt: str,
    export: Callable[[AuthoredCase], CandidateInput],
    *,
    seed: int = 0,
    reviewers: Mapping[str, Reviewer] | None = None,
    policy_id: str = DEFAULT_POLICY_ID,
) -> AuditReport:
    """Run every sentinel and the reference policy over `cases` and check their signatures.

    Args:
        cases: The authored cases (grader side).
        prompt: The shared review prompt.
        export: Builds a case's candidate-visible input (the corpus exporter); called once per
            case, and the same input is given to every audited reviewer.
        seed: Seed for the randomised sentinels.
        reviewers: Replacements by registry name (e.g. a deliberately broken sentinel, to show
            that the audit fails); names not given use the built-in reviewer.
        policy_id: The corpus's policy: the reviewers that implement it are audited (its
            reference policy and the policy-agnostic sentinels).

    Returns:
        The report; `ok` is False when any signature failed or could not be exercised.
    """
    overrides = dict(reviewers or {})
    inputs = [export(case) for case in cases]
    checks: list[SignatureCheck] = []
    metrics: dict[str, ReviewMetricSet] = {}
    notes: list[str] = []
    for name in reviewer_names(policy_id):
        reviewer = overrides.get(name) or make_reviewer(name, seed=seed)
        rows, replies = _grade(reviewer, cases, inputs, prompt)
        metrics[name] = metric_set(rows)
        checks.extend(_checks_for(name, rows, metrics[name]))
        if name == "random":
            again = [reviewer.review(prompt, ci) for ci in inputs]
            checks.append(
                SignatureCheck(
                    reviewer=name,
                    signature="replies are reproducible for a seed",
                    passed=bool(inputs) and again == replies,
                    detail=f"{sum(a == b for a, b in zip(again, replies, strict=True))}"
                    f"/{len(inputs)} replies identical on a second pass",
                )
            )
        if name.startswith("reference-policy"):
            unsupported = [r.case_id for r in rows if not r.supported]
            if unsupported:
                notes.append(
                    f"{name} findings not supported under the answer key's code, citation "
                    f"and discrepancy requirements: {', '.join(unsupported)}"
                )
    checks.extend(_probe_checks(cases, inputs))
    return AuditReport(cases=len(cases), checks=checks, metrics=metrics, notes=notes)


# ------------------------------------------------------------------------------------------------
# Rule-ablation readers: is every rule of the corpus's policy text load-bearing on the corpus?
#
# For each rule its policy object declares (`CorpusPolicy.rules`), the reference reviewer with that
# rule removed (`CorpusPolicy.ablated_reviewer`) reviews every case through the real export,
# validation and support grading; its figures are computed as a run's are and the release gates of
# the policy's built-in review spec (`CorpusPolicy.review_gates`, sized for its corpus) are
# evaluated on them by the core gate code. A rule is load-bearing when its ablated reader fails
# (or cannot pass) a gate that the full reference reader passes on the same corpus. A rule that
# is not is untested by the corpus: a candidate that never applies it scores as if it had. The
# cases whose decision the ablation changes are the cases that turn on the rule (`flipped`), which
# the reviewer report uses to attribute a candidate's wrong decisions to rules.
#
# The policy object is all this module asks; it never names a corpus version.


@dataclass(frozen=True)
class RuleAblation:
    """One rule's ablated reader on the corpus."""

    rule: PolicyRule
    """The rule removed."""
    flipped: tuple[str, ...]
    """Case ids whose decision (or valid outcome) differs from the reference label."""
    failed_gates: tuple[str, ...]
    """Gates the full reader passes and this reader does not (failed or not evaluable)."""

    @property
    def load_bearing(self) -> bool:
        """Whether removing the rule fails at least one release gate."""
        return bool(self.failed_gates)


@dataclass(frozen=True)
class AblationReport:
    """Every declared rule's ablation on one corpus."""

    policy_id: str
    """The corpus's policy (whose rules were ablated)."""
    gates_file: str
    """Where the gates were read: the policy's review gates (`CorpusPolicy.review_gates`)."""
    gates: tuple[str, ...]
    """The release gates evaluated (names), from the policy's built-in review gates."""
    reference_not_passed: tuple[str, ...]
    """Gates the full reference reader itself does not pass (they cannot show a rule)."""
    ablations: tuple[RuleAblation, ...]
    """One per declared rule, in declaration order."""

    @property
    def not_load_bearing(self) -> tuple[str, ...]:
        """Ids of the rules whose removal fails no gate."""
        return tuple(a.rule.rule_id for a in self.ablations if not a.load_bearing)

    @property
    def ok(self) -> bool:
        """True when rules are declared and every one is load-bearing."""
        return bool(self.ablations) and not self.not_load_bearing


def gates_file(policy: object) -> Path:
    """The file of a policy's built-in review gates (`CorpusPolicy.review_gates`).

    An object written before the member existed is audited under the packaged demo spec's gates.
    """
    return Path(getattr(policy, "review_gates", DEMO_SPEC))


@cache
def release_gates(path: Path = DEMO_SPEC) -> tuple[tuple[GateSpec, ...], AnalysisSpec]:
    """The gates of a gates file (or spec) that apply to every configuration, and its analysis.

    Raises:
        InputError: The file is not TOML or a table is invalid (names the file and field).
    """
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise InputError(f"cannot read the review gates: {error}", location=str(path)) from None
    # Read as the gates of a spec (every check a frozen spec's gates get) with a stand-in top.
    spec = parse_spec(
        {**_SPEC_TOP, "analysis": data.get("analysis", {}), "gates": data.get("gates", [])},
        source=str(path),
    )
    return tuple(g for g in spec.gates if not g.candidates), spec.analysis


_SPEC_TOP: dict[str, object] = {
    "suite": "rtb",
    "track": "review",
    "corpus": {"path": "."},
    "candidates": [{"name": "reader", "kind": "inprocess", "entry": "audit:reader"}],
}
"""The rest of a spec around a gates file's tables, so they are checked as a spec's are."""


def gate_results(rows: Sequence[ReviewTrialRow], path: Path = DEMO_SPEC) -> list[GateResult]:
    """The release gates on one reader's rows (one trial per case), as a run evaluates them."""
    gates, analysis = release_gates(path)
    figures = configuration_figures(
        rows,
        unit=analysis.unit,
        k=1,
        confidence=analysis.confidence,
        seed=analysis.bootstrap_seed,
        resamples=analysis.bootstrap_resamples,
        clustered=False,  # the exact bounds are what the gates read; no bootstrap needed
    )
    return evaluate_gates(gates, figures)


def _flipped(rows: Sequence[ReviewTrialRow]) -> tuple[str, ...]:
    return tuple(r.case_id for r in rows if r.observed.value != r.reference.value)


def declared_rules(policy: object) -> tuple[PolicyRule, ...]:
    """A policy object's declared rules; none for an object written before `rules` existed.

    Such an object is then reported as declaring no rules (the audit fails "not run"; the report
    leaves the breakdown out) instead of breaking every report of its corpus.
    """
    return tuple(getattr(policy, "rules", ()))


def run_ablation_audit(corpus: Corpus) -> AblationReport:
    """Run every declared rule's ablated reader over `corpus` and evaluate the release gates."""
    policy = policy_for(corpus.policy_id)
    rules = declared_rules(policy)
    cases = list(corpus.cases)
    inputs = [to_candidate_input(case, new_evaluation_id()) for case in cases]

    def rows_of(reviewer: Reviewer) -> list[ReviewTrialRow]:
        return _grade(reviewer, cases, inputs, corpus.review_prompt)[0]  # type: ignore[arg-type]

    make = next(iter(policy.reviewers.values()))  # the policy's reference reviewer
    path = gates_file(policy)
    reference = {g.spec.label: g.status for g in gate_results(rows_of(make(0)), path)}
    passed = {label for label, status in reference.items() if status == "passed"}
    ablations = []
    for rule in rules:
        rows = rows_of(policy.ablated_reviewer(rule.rule_id))
        failed = tuple(
            g.spec.label
            for g in gate_results(rows, path)
            if g.spec.label in passed and g.status != "passed"
        )
        ablations.append(RuleAblation(rule, _flipped(rows), failed))
    return AblationReport(
        policy_id=corpus.policy_id,
        gates_file=path.name if path == DEMO_SPEC else f"{path.parent.name}/{path.name}",
        gates=tuple(reference),
        reference_not_passed=tuple(label for label in reference if label not in passed),
        ablations=tuple(ablations),
    )


def deciding_rules(report: AblationReport) -> dict[str, tuple[str, ...]]:
    """Case id -> the rules that decide it (those whose ablation flips the case)."""
    return _by_case({a.rule.rule_id: a.flipped for a in report.ablations})


def _by_case(flipped: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    found: dict[str, list[str]] = {}
    for rule_id, case_ids in flipped.items():
        for case_id in case_ids:
            found.setdefault(case_id, []).append(rule_id)
    return {case_id: tuple(rules) for case_id, rules in found.items()}


def cases_deciding(corpus: Corpus) -> dict[str, tuple[str, ...]]:
    """Case id -> the rules whose ablated reader's outcome on it differs from its label.

    What `deciding_rules` gives, without the gates or the support grading (the reviewer report
    needs only the outcomes). A case no rule decides is absent.
    """
    policy = policy_for(corpus.policy_id)
    inputs = [to_candidate_input(case, new_evaluation_id()) for case in corpus.cases]
    flipped: dict[str, tuple[str, ...]] = {}
    for rule in declared_rules(policy):
        reviewer = policy.ablated_reviewer(rule.rule_id)
        flipped[rule.rule_id] = tuple(
            case.case_id
            for case, candidate_input in zip(corpus.cases, inputs, strict=True)
            if validate_response(
                reviewer.review(corpus.review_prompt, candidate_input), candidate_input
            ).outcome.value
            != case.expectations.reference_decision.value
        )
    return _by_case(flipped)


def ablation_table(report: AblationReport) -> Table:
    """Each rule's ablated reader: the cases that turn on it and the gates it fails."""
    from rich.table import Table

    table = Table(
        title=f"Rule ablation: the reference reviewer of {report.policy_id} without one rule",
        caption=f"release gates of the policy's review spec ({report.gates_file}): "
        f"{', '.join(report.gates)}"
        + (
            f"; not passed by the full reader: {', '.join(report.reference_not_passed)}"
            if report.reference_not_passed
            else ""
        ),
    )
    for column in ("rule", "clause", "ablated reader", "cases turning on it", "result"):
        table.add_column(column, overflow="fold")
    for a in report.ablations:
        result = (
            f"[green]fails {', '.join(a.failed_gates)}[/]"
            if a.load_bearing
            else "[bold red]NOT LOAD-BEARING[/]"
        )
        table.add_row(a.rule.rule_id, a.rule.clause, a.rule.ablation, str(len(a.flipped)), result)
    return table


def verdict_line(report: AblationReport) -> str:
    """One line: every rule load-bearing, or which are not (what the audit fails on)."""
    if not report.ablations:
        return (
            f"rule ablation not run: policy {report.policy_id} declares no rules, so no rule "
            "is shown load-bearing"
        )
    if report.not_load_bearing:
        return (
            "policy rules not load-bearing (removing one fails no release gate the full reader "
            f"passes): {', '.join(report.not_load_bearing)}"
        )
    return f"every one of {len(report.ablations)} policy rules is load-bearing"


def counts_line(report: AblationReport) -> str:
    """How many cases turn on each rule (its ablated reader's decision differs from the label)."""
    counts = ", ".join(f"{a.rule.rule_id} {len(a.flipped)}" for a in report.ablations)
    return f"cases turning on each policy rule: {counts or 'none declared'}"
