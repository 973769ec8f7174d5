"""Evaluability first: a subject's error rates count only if it mostly gave valid responses.

The report step calls `apply_evaluability` on every track's analysis before evaluating gates. It
puts a `valid_response_rate` figure first among each subject's figures, marks subjects below the
declared minimum (or with nothing valid) "not evaluable", and adds one implicit gate per
non-instrument subject (`valid_response_rate >= minimum`) so a not-evaluable candidate blocks
release even when no declared gate mentions it. Every declared gate on a not-evaluable subject
is `not_evaluable` (never a pass): a 0% false-approval rate from a candidate that never answered
is not evidence of safety.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trustbench.core._analysis import Evaluability, TrackAnalysis
from trustbench.core.figures import Figure, rate_figure
from trustbench.core.gates import GateResult, GateSpec
from trustbench.core.report import Block, ConfusionBlock, FiguresBlock

VALID_RESPONSE_RATE = "valid_response_rate"
"""Name of the evaluability figure (the first figure of every subject)."""


@dataclass(frozen=True)
class EvaluabilityVerdict:
    """The evaluability of every subject of one analysis."""

    counts: dict[str, Evaluability]
    """Subject -> its counts, as the track reported them."""
    not_evaluable: dict[str, str]
    """Subject -> why it is not evaluable (below the minimum, or nothing valid)."""
    instruments: frozenset[str]
    """Subjects exempt from the implicit evaluability gate (still shown)."""
    minimum: float
    """The declared minimum valid-response rate."""

    def record(self) -> dict[str, Any]:
        """The `evaluability` section of `record.json`."""
        return {
            "min_valid_response_rate": self.minimum,
            "subjects": {
                subject: {
                    "attempted": counts.attempted,
                    "valid": counts.valid,
                    "missing": counts.missing,
                    "invalid": counts.invalid,
                    "transport_failed": counts.transport_failed,
                    "valid_rate": counts.valid_rate,
                    "evaluable": subject not in self.not_evaluable,
                    "reason": self.not_evaluable.get(subject),
                    "instrument": subject in self.instruments,
                }
                for subject, counts in self.counts.items()
            },
        }


def valid_response_figure(counts: Evaluability, confidence: float) -> Figure:
    """The valid-response rate as a figure: valid / attempted trials, exact intervals.

    The unit is always the trial: evaluability is about how many calls produced something that
    can be graded, whatever the declared unit of the error rates.
    """
    return rate_figure(
        VALID_RESPONSE_RATE,
        counts.valid,
        counts.attempted,
        description=f"attempted trials with a present, valid response ({counts.missing} "
        f"missing, {counts.invalid} invalid, {counts.transport_failed} transport-failed)",
        unit="trial",
        confidence=confidence,
        reason_if_empty="no trial was attempted",
    )


def _why_not_evaluable(counts: Evaluability, minimum: float) -> str | None:
    rate = counts.valid_rate
    if rate is None:
        return "no trial was attempted"
    if counts.valid == 0:
        return f"no valid response in {counts.attempted} attempted trial(s)"
    if rate < minimum:
        return f"valid-response rate {rate:.4g} is below the declared minimum {minimum:g}"
    return None


def apply_evaluability(
    analysis: TrackAnalysis, minimum: float, confidence: float
) -> EvaluabilityVerdict:
    """Put `valid_response_rate` first in each subject's figures and judge evaluability.

    Mutates `analysis.subjects` (the figure is prepended once; a track that already computed
    it keeps its own). Subjects without reported counts are left alone.
    """
    not_evaluable: dict[str, str] = {}
    for subject, counts in analysis.evaluability.items():
        figures = analysis.subjects.get(subject)
        if figures is not None and not any(f.name == VALID_RESPONSE_RATE for f in figures):
            analysis.subjects[subject] = [valid_response_figure(counts, confidence), *figures]
        reason = _why_not_evaluable(counts, minimum)
        if reason is not None:
            not_evaluable[subject] = reason
    return EvaluabilityVerdict(
        dict(analysis.evaluability), not_evaluable, analysis.instruments, minimum
    )


def gate_on_evaluability(
    results: list[GateResult], verdict: EvaluabilityVerdict
) -> list[GateResult]:
    """Turn declared gates of not-evaluable subjects into `not_evaluable`; add implicit gates.

    Declared results are named `"<gate> (<subject>)"` with a reason starting `"<subject>: "`
    (see `evaluate_subject_gates`); the subject is read back from the reason prefix.
    """
    out: list[GateResult] = []
    for result in results:
        subject = result.reason.split(": ", 1)[0]
        why = verdict.not_evaluable.get(subject)
        if why is None or subject in verdict.instruments:
            out.append(result)
            continue
        out.append(
            result.model_copy(
                update={
                    "status": "not_evaluable",
                    "value": None,
                    "reason": f"{subject}: not evaluable ({why}); this gate is not a pass",
                }
            )
        )
    implicit: list[GateResult] = []
    for subject, counts in verdict.counts.items():
        if subject in verdict.instruments:
            continue
        spec = GateSpec(
            name=f"evaluability ({subject})",
            metric=VALID_RESPONSE_RATE,
            threshold=verdict.minimum,
            comparison=">=",
            description="implicit: error rates count only for a subject that mostly answered",
        )
        why = verdict.not_evaluable.get(subject)
        rate = counts.valid_rate
        implicit.append(
            GateResult(
                spec=spec,
                status="failed" if why else "passed",
                value=rate,
                reason=f"{subject}: {why}"
                if why
                else f"{subject}: valid-response rate {rate:.4g} >= {verdict.minimum:g}",
            )
        )
    return implicit + out


def evaluability_blocks(verdict: EvaluabilityVerdict, confidence: float) -> list[Block]:
    """Report blocks shown before any error rate: valid-response rates and the unusable split."""
    if not verdict.counts:
        return []
    subjects = list(verdict.counts)
    figures = [
        valid_response_figure(verdict.counts[s], confidence).model_copy(
            update={"name": f"{VALID_RESPONSE_RATE} [{s}]"}
        )
        for s in subjects
    ]
    flagged = [
        f"{s}: NOT EVALUABLE ({why})"
        + (" - an instrument, expected" if s in verdict.instruments else "")
        for s, why in verdict.not_evaluable.items()
    ]
    return [
        FiguresBlock(
            title="Evaluability: valid responses (read before any error rate)",
            figures=figures,
            note=f"Valid / attempted trials; minimum {verdict.minimum:g}. "
            + ("; ".join(flagged) if flagged else "Every subject is evaluable."),
        ),
        ConfusionBlock(
            title="Evaluability: why trials were unusable",
            rows=subjects,
            columns=["valid", "missing", "invalid", "transport_failed"],
            counts=[
                [c.valid, c.missing, c.invalid, c.transport_failed]
                for c in (verdict.counts[s] for s in subjects)
            ],
            row_title="subject",
            column_title="trial outcome",
            note="Trials per subject; a transport failure is a trial that never got a reply.",
        ),
    ]
