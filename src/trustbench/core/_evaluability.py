"""Evaluability first: a subject's error rates count only if it mostly gave valid responses.

The report step calls `apply_evaluability` on every track's analysis before evaluating gates. It
puts a `valid_response_rate` figure first among each subject's figures, marks subjects below the
declared minimum (or with nothing valid) "not evaluable", and adds one implicit gate per
non-instrument subject (`valid_response_rate >= minimum`) so a not-evaluable candidate blocks
release even when no declared gate mentions it. Every declared gate on a not-evaluable subject
is `not_evaluable` (never a pass): a 0% false-approval rate from a candidate that never answered
is not evidence of safety.

Nor is it shown as one: `withhold_not_evaluable` turns every other figure of such a subject into
a `not_evaluable` figure (counts kept, estimate and intervals withheld) in the record, in the
per-subject tables and in every forest plot row named for it, so an unreachable candidate
cannot sit at 0% next to the candidates that answered.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from trustbench.core._analysis import VALID_RESPONSE_RATE, Evaluability, TrackAnalysis
from trustbench.core.figures import Figure, rate_figure
from trustbench.core.gates import GateResult, GateSpec

if TYPE_CHECKING:  # the report's blocks are built when a report is written, not on import
    from trustbench.core.report import Block


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


def not_evaluable_reason(counts: Evaluability, minimum: float) -> str | None:
    """Why a subject with these counts is not evaluable under `minimum`; None when it is."""
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
        reason = not_evaluable_reason(counts, minimum)
        if reason is not None:
            not_evaluable[subject] = reason
    return EvaluabilityVerdict(
        dict(analysis.evaluability), not_evaluable, analysis.instruments, minimum
    )


def not_evaluable_subjects(
    counts: Mapping[str, Evaluability], minimum: float, instruments: Collection[str] = ()
) -> dict[str, str]:
    """Subject -> why it is not evaluable, instruments left out: whose detail a track withholds.

    The same rule `withhold_not_evaluable` applies to the headline figures, for the track-built
    detail (breakdowns, record sections) it cannot reach.
    """
    return {
        subject: why
        for subject, evaluability in counts.items()
        if subject not in instruments
        and (why := not_evaluable_reason(evaluability, minimum)) is not None
    }


def withhold_not_evaluable(analysis: TrackAnalysis, verdict: EvaluabilityVerdict) -> None:
    """Withhold the estimates of not-evaluable subjects wherever the page or record shows them.

    Mutates `analysis`. Each figure of a not-evaluable subject but its `valid_response_rate`
    and the track's `response_figures` becomes `not_evaluable` (`withheld_figure`) in
    `analysis.subjects`, which record.json and the gates read, and in the sections:

    - a figures table or forest plot holding that same figure object;
    - every figure of a figures or forest block whose `subject` is that subject;
    - a row named for the subject (a plot or table of configurations), or `"<subject>: ..."`
      or `"<subject> · ..."` (several metrics or paths of each configuration in one block).

    Figures are matched by identity and by subject name, never by value, so an evaluable
    subject with the same numbers (0 of 20 false approvals, say) is left alone. Text (tables,
    paragraphs) is the track's: it builds such detail from figures it withheld itself
    (`not_evaluable_reason`, `withheld_figure`), as it does for its own record sections.
    Instruments are left alone, as their gates are (`gate_on_evaluability`): a sentinel that
    never answers is built that way, and its figures are the signature its gates check.
    """
    unusable = {
        subject: why
        for subject, why in verdict.not_evaluable.items()
        if subject not in verdict.instruments
    }
    keep = analysis.response_figures
    withheld: dict[int, Figure] = {}
    for subject, why in unusable.items():
        figures = analysis.subjects.get(subject)
        if figures is None:
            continue
        masked = [withheld_figure(figure, subject, why, keep) for figure in figures]
        withheld.update((id(old), new) for old, new in zip(figures, masked, strict=True))
        analysis.subjects[subject] = masked
    if unusable:
        analysis.sections = [
            _withheld_block(section, withheld, unusable, keep) for section in analysis.sections
        ]


def _withheld_block(
    block: Block, withheld: dict[int, Figure], unusable: dict[str, str], keep: frozenset[str]
) -> Block:
    from trustbench.core.report import FiguresBlock, ForestBlock

    if not isinstance(block, FiguresBlock | ForestBlock):
        return block  # tables are text: a track builds them from figures it withheld itself
    owner = block.subject if block.subject in unusable else None

    def row(figure: Figure) -> Figure:
        if id(figure) in withheld:
            return withheld[id(figure)]
        subject = owner or _row_subject(figure.name, unusable)
        if subject is None:
            return figure
        return withheld_figure(figure, subject, unusable[subject], keep)

    return block.model_copy(update={"figures": [row(figure) for figure in block.figures]})


_ROW_SEPARATORS = (": ", " · ")
"""What follows a subject's name in a row that names its metric or path."""


def _row_subject(name: str, subjects: dict[str, str]) -> str | None:
    """The subject of `subjects` a row is named for, if any (see `withhold_not_evaluable`)."""
    if name in subjects:
        return name
    for separator in _ROW_SEPARATORS:
        head = name.split(separator, 1)[0]
        if head != name and head in subjects:
            return head
    return None


def withheld_figure(
    figure: Figure, subject: str, why: str | None, keep: frozenset[str] = frozenset()
) -> Figure:
    """`figure` as `not_evaluable` (counts kept, estimate and intervals withheld).

    Returned unchanged: every figure when `why` is None (the subject is evaluable), the
    valid-response rate, the figures named in `keep` (response counts, see
    `TrackAnalysis.response_figures`) and figures already not run or not applicable. Tracks
    use it for detail they build themselves from a subject's trials (breakdowns, chain
    conditionals, paired differences), passing `not_evaluable_subjects(...).get(subject)`.
    """
    # The figure's own name: rows may read "<subject>: <name>", per-split figures "<split>.<name>".
    name = figure.name.rsplit(": ", 1)[-1].rsplit(".", 1)[-1]
    if why is None or name == VALID_RESPONSE_RATE or name in keep or figure.status != "measured":
        return figure
    return Figure.model_validate(  # validated: the new status's rules hold
        {
            **figure.model_dump(),
            "status": "not_evaluable",
            "estimate": None,
            "intervals": [],
            "reason": f"{subject} is not evaluable ({why}): the estimate is withheld",
        }
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
                subject=subject,  # so the subject's verdict rests on it, declared gates or not
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
    from trustbench.core.report import ConfusionBlock, FiguresBlock

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
            # A valid reply is the desired outcome; every other kind of trial is an error of
            # the subject or its transport (the colours follow the heatmap's key).
            good=[[True, False, False, False] for _ in subjects],
            note="Trials per subject; a transport failure is a trial that never got a reply.",
        ),
    ]
