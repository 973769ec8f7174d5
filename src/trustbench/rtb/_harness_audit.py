"""`trustbench rtb audit`: the harness self-audit of every RTB track, as one table.

Each track's audit lives beside the track (`_audit.py` for reviewers, `_control_audit.py` for the
control path, `workflow/_audit.py` for the end-to-end workflow, whose scripted agents' known
signatures must be reported by the grader: e.g. the false-claiming agent's unsupported claims and
the metadata-forging agent's violation, prevented or caught). This module only runs them on one
corpus and flattens their checks into rows so the CLI and the demo print the same thing. These
are tests of the measurement path, not evidence that any candidate is secure.

`run_corpus_saturation` is the corpus's own check, reported beside them: whether surface rules with
no domain understanding reproduce the reference decisions (see `review/_shortcuts.py`). A
saturated corpus fails `trustbench rtb audit` too, because a score on it is not evidence of review
ability, but it is reported apart: the measurement path can be sound on a saturated corpus.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from trustbench.rtb.control._audit import run_control_audit
from trustbench.rtb.corpus._export import new_evaluation_id, to_candidate_input
from trustbench.rtb.corpus._load import Corpus
from trustbench.rtb.policy._registry import policy_for
from trustbench.rtb.review._audit import run_self_audit
from trustbench.rtb.review._shortcuts import DEFAULT_MARGIN, SaturationReport, corpus_saturation
from trustbench.rtb.workflow import run_workflow_audit

if TYPE_CHECKING:
    from trustbench.rtb.review._audit import AblationReport
    from trustbench.rtb.review._learning_audit import LearningAudit
    from trustbench.rtb.review._unfiltered_attackers import UnfilteredReport


@dataclass(frozen=True)
class AuditRow:
    """One signature check of one track's audit."""

    track: str
    """`reviewer`, `control` or `workflow`."""
    check: str
    """What was checked (reviewer and signature, or the control-path check name)."""
    passed: bool
    """Whether the expected signature held."""
    detail: str
    """Counts or the offending case ids."""
    not_run: bool = False
    """The check could not run on this corpus (e.g. its policy has no boundary yet): shown as
    "not run", never as a pass, and not a failure of the measurement path either."""


def run_harness_audit(corpus: Corpus, *, seed: int = 0) -> list[AuditRow]:
    """Run the reviewer, control-path and workflow self-audits on `corpus`; return every check."""
    reviewer = run_self_audit(
        corpus.cases,
        corpus.review_prompt,
        lambda case: to_candidate_input(case, new_evaluation_id()),
        seed=seed,
        policy_id=corpus.policy_id,
    )
    rows = [
        AuditRow("reviewer", f"{check.reviewer}: {check.signature}", check.passed, check.detail)
        for check in reviewer.checks
    ]
    # Both tracks take platform state, fault targets and live evaluation from the corpus's policy
    # object, so they run on every corpus whose policy is registered (a loaded corpus's is).
    policy = policy_for(corpus.policy_id)
    if not policy.control_path:
        why = f"not run: policy {corpus.policy_id} has no control-path mapping (see its object)"
        rows.append(AuditRow("control", "harness self-audit", False, why, not_run=True))
        rows.append(_workflow_not_run(corpus.policy_id))
        return rows
    control = run_control_audit(corpus.cases, seed=seed)
    rows += [
        AuditRow("control", check.name, check.passed, check.detail) for check in control.checks
    ]
    rows += [
        AuditRow("control", "harness defect", False, defect) for defect in control.harness_defects
    ]
    if not policy.scripted_workflow_agents:
        rows.append(_workflow_not_run(corpus.policy_id))
        return rows
    workflow = run_workflow_audit(corpus.cases, seed=seed)
    rows += [
        AuditRow("workflow", check.name, check.passed, check.detail) for check in workflow.checks
    ]
    return rows


def _workflow_not_run(policy_id: str) -> AuditRow:
    why = (
        "not run: the scripted workflow agents (the audit's instruments) read approvals as "
        f"another policy does, not as {policy_id} does"
    )
    return AuditRow("workflow", "harness self-audit", False, why, not_run=True)


def run_corpus_saturation(corpus: Corpus, *, margin: float = DEFAULT_MARGIN) -> SaturationReport:
    """Score the shortcut rules on `corpus` (see `trustbench.rtb.review._shortcuts`)."""
    return corpus_saturation(corpus, margin=margin)


@dataclass(frozen=True)
class CorpusAudit:
    """Every corpus audit `trustbench rtb audit` runs on one corpus (beside the self-audit)."""

    saturation: SaturationReport
    """The fixed surface rules."""
    learning: LearningAudit
    """The learned attackers (held out: accuracy reported, review gates gated) and the artifact
    scan (gated)."""
    ablation: AblationReport
    """The reference reviewer without each rule, against the built-in review spec's gates."""
    unfiltered: UnfilteredReport
    """The attackers the corpus was not selected against: policy-blind (within the corpus and
    pool-trained; gated, in a two-sided band) and shallow relational (pool-trained; reported),
    none passing the review gates."""

    def verdicts(self) -> list[tuple[bool | None, str]]:
        """(passed, line) per audit, in the order `rtb audit` prints them (the ablation's last).

        passed None: not run (pool-trained attackers without a generator), never a pass. A
        reported figure (how much of the policy a shallow learner recovers) is passed True: it
        is never a failing check, so the summary of a failing corpus never lists it.
        """
        from trustbench.rtb.review import _audit as _ablation
        from trustbench.rtb.review import _learning_audit
        from trustbench.rtb.review._shortcuts import verdict_line
        from trustbench.rtb.review._unfiltered_attackers import unfiltered_verdicts

        return [
            (self.saturation.ok, verdict_line(self.saturation)),
            *_learning_audit.verdict_lines(self.learning),
            *unfiltered_verdicts(self.unfiltered),
            (self.ablation.ok, _ablation.verdict_line(self.ablation)),
        ]

    @property
    def ok(self) -> bool:
        """True when no audit finds the corpus saturated, leaking or with an idle rule."""
        return all(passed is not False for passed, _ in self.verdicts())

    def summary(self) -> str:
        """One line: passed, or each failed audit's own line (what `rtb audit` exits 1 on).

        The reported learners (issue 51: how much of the policy a shallow learner recovers) are
        counted, not quoted: a line each would bury the verdict, and `rtb audit` prints them.
        """
        from trustbench.rtb.review._learning_audit import REPORTED_MARK

        verdicts = self.verdicts()
        failed = [line for passed, line in verdicts if passed is False]
        if failed:
            return "FAILS, as `rtb audit` exits 1: " + "; ".join(failed)
        ran = "passed" if all(p for p, _ in verdicts) else "passed what ran"
        checks = [line for _, line in verdicts if not line.startswith(REPORTED_MARK)]
        reported = len(verdicts) - len(checks)
        if reported:
            checks.append(f"{reported} learners of the fields the rules read reported, not gated "
                          "(`rtb audit` prints how much of the policy each recovers)")  # fmt: skip
        return f"{ran} (" + "; ".join(checks) + ")"


def run_corpus_audits(
    corpus: Corpus,
    *,
    margin: float = DEFAULT_MARGIN,
    seed: int = 0,
    attacked: Corpus | None = None,
    pool_size: int | None = None,
) -> CorpusAudit:
    """Run the surface-rule, learned, artifact, unfiltered-attacker and rule-ablation audits.

    `attacked`: the cases the learned and unfiltered attackers are fitted and scored on (default
    the corpus; the demo passes its declared subset, since those attackers are most of the
    cost). The surface rules and the rule ablation always read every case: the ablation's
    release gates are sized for the corpus's count, and a subset would leave them underpowered.
    `pool_size`: cases drawn from the generator for the pool-trained attackers (default
    `_unfiltered_attackers.POOL_SIZE`, what `rtb audit` draws; the demo declares a smaller pool).
    """
    from trustbench.rtb.review import _audit, _learning_audit, _unfiltered_attackers

    learners_on = corpus if attacked is None else attacked
    ablation = _audit.run_ablation_audit(corpus)
    deciding = _audit.deciding_rules(ablation)
    return CorpusAudit(
        saturation=run_corpus_saturation(corpus, margin=margin),
        learning=_learning_audit.run_learning_audit(learners_on, deciding, seed=seed),
        ablation=ablation,
        unfiltered=_unfiltered_attackers.run_unfiltered_audit(
            learners_on,
            deciding,
            margin=margin,
            seed=seed,
            pool_size=_unfiltered_attackers.POOL_SIZE if pool_size is None else pool_size,
        ),
    )
