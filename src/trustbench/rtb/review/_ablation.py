"""Rule-ablation readers: is every rule of the corpus's policy text load-bearing on the corpus?

For each rule its policy object declares (`CorpusPolicy.rules`), the reference reviewer with that
rule removed (`CorpusPolicy.ablated_reviewer`) reviews every case through the real export,
validation and support grading; its figures are computed as a run's are and the release gates of
the policy's built-in review spec (`CorpusPolicy.review_gates`, sized for its corpus) are
evaluated on them by the core gate code. A rule is load-bearing when its ablated reader fails
(or cannot pass) a gate that the full reference reader passes on the same corpus. A rule that
is not is untested by the corpus: a candidate that never applies it scores as if it had. The
cases whose decision the ablation changes are the cases that turn on the rule (`flipped`), which
the reviewer report uses to attribute a candidate's wrong decisions to rules.

The policy object is all this module asks; it never names a corpus version.
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from rich.table import Table

from trustbench.core import AnalysisSpec, parse_spec
from trustbench.core.gates import GateResult, GateSpec, evaluate_gates
from trustbench.errors import InputError
from trustbench.rtb.corpus._export import new_evaluation_id, to_candidate_input
from trustbench.rtb.corpus._load import Corpus
from trustbench.rtb.policy._registry import policy_for
from trustbench.rtb.policy._rules import PolicyRule
from trustbench.rtb.review._audit import _grade
from trustbench.rtb.review._demo import DEMO_SPEC
from trustbench.rtb.review._figures import configuration_figures
from trustbench.rtb.review._rows import ReviewTrialRow
from trustbench.rtb.review._validation import validate_response
from trustbench.rtb.review.reviewers._protocol import Reviewer


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
