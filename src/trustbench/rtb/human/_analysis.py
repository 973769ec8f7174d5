"""The human part of a reviewer-track report: paired AI runs, protocol, timings, agreement.

A human run's candidates are participants; their trials are graded by the reviewer track like
any reviewer's (same validation, support judgement, metrics, intervals). This module adds what
only a human comparison has:

- the AI configurations the participants were paired with, read from their verified source runs
  and added as configurations of the report (named `<configuration> [run <sha8>]`), so paired
  comparisons against them use the same cases and trial index;
- each participant's declared protocol (team, workflow, qualifications, tools, evidence access,
  time limit, whether the AI recommendation was visible), so the report never speaks of "humans"
  in general;
- time on task and time-limit overruns per configuration;
- supported findings by half of the session (position in the interleaved order), for learning;
- agreement with the paired AI decision, split by whether it was visible, overall and on the
  cases where the AI decision differs from the reference (following an AI error).

Agreement counts only cases where the AI configuration gave a decision; a participant's outcome
that is not the same decision (another decision, missing or invalid) is disagreement. Intervals
are exact Clopper-Pearson over cases, which assumes independent cases: related variants of one
template are not independent, so read them as descriptive.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from trustbench.core import CandidateRecord, Manifest, ParticipantSpec, RecommendationSpec
from trustbench.core.figures import Figure, rate_figure
from trustbench.core.report import Block, FiguresBlock, TextBlock
from trustbench.rtb.corpus._load import Corpus
from trustbench.rtb.human._store import SourceRun, load_source_run
from trustbench.rtb.review._chain import ReviewConfiguration
from trustbench.rtb.review._grading import ConfigurationRow, MemberTrial


@dataclass(frozen=True)
class PairedConfiguration:
    """An AI configuration from a source run, added to a human run's report."""

    name: str
    """Report name: `<configuration> [run <sha8>]`."""
    configuration: ReviewConfiguration
    """The configuration, renamed."""
    members: list[str]
    """Its member candidate names in the source run."""
    rows: list[ConfigurationRow]
    """Its graded rows for the human run's trial indices."""
    not_run: list[tuple[str, int]]
    """(case, trial) keys the source run has no result for."""
    candidates: dict[str, CandidateRecord]
    """The source run's candidate records (for member identities)."""


def paired_name(configuration: str, manifest_sha256: str) -> str:
    """How a paired AI configuration is named in a human run's report."""
    return f"{configuration} [run {manifest_sha256[:8]}]"


def paired_configurations(
    manifest: Manifest, corpus: Corpus
) -> tuple[list[PairedConfiguration], dict[str, SourceRun]]:
    """Load every recommendation source (verified) and its paired configurations, once each."""
    sources: dict[str, SourceRun] = {}
    result: list[PairedConfiguration] = []
    seen: set[str] = set()
    k = manifest.spec.trials_per_case
    for candidate in manifest.spec.candidates:
        rec = candidate.participant.recommendation if candidate.participant else None
        if rec is None:
            continue
        if rec.manifest_sha256 not in sources:
            sources[rec.manifest_sha256] = load_source_run(rec, manifest, corpus)
        source = sources[rec.manifest_sha256]
        name = paired_name(rec.configuration, rec.manifest_sha256)
        if name in seen:
            continue
        seen.add(name)
        from trustbench.rtb.review._options import configurations

        configuration, members = next(
            (c, m) for c, m in configurations(source.manifest.spec) if c.name == rec.configuration
        )
        rows = [
            ConfigurationRow(name, item.row, item.members)
            for item in source.rows[rec.configuration]
            if item.row.trial < k
        ]
        present = {(r.row.case_id, r.row.trial) for r in rows}
        result.append(
            PairedConfiguration(
                name=name,
                configuration=configuration.model_copy(update={"name": name}),
                members=members,
                rows=rows,
                not_run=[
                    (case.case_id, t)
                    for case in corpus.cases
                    for t in range(k)
                    if (case.case_id, t) not in present
                ],
                candidates={c.name: c for c in source.manifest.candidates},
            )
        )
    return result, sources


def describe_participant(name: str, participant: ParticipantSpec, order_seed: int) -> str:
    """One paragraph naming a human configuration's team, workflow and protocol."""
    rec = participant.recommendation
    shown = (
        "no AI recommendation paired"
        if rec is None
        else f"AI configuration {paired_name(rec.configuration, rec.manifest_sha256)} paired, "
        + (
            "recommendation VISIBLE to the participant"
            if rec.visible
            else "recommendation NOT shown"
        )
    )
    tools = ", ".join(participant.permitted_tools) or "none beyond the review page"
    return (
        f"{name}: participant {participant.id}, team {participant.team}, workflow "
        f"{participant.workflow}. Qualifications (declared): "
        f"{'; '.join(participant.qualifications)}. Tools allowed: {tools}."
        f" Evidence access: {participant.evidence_access}. Time limit per case: "
        f"{participant.time_limit_s:g} s (not enforced; overruns counted). {shown}. Case order: "
        f"seeded from order_seed {order_seed} and the participant id, variants of each group "
        "interleaved across the session."
    )


def _outcome(trial: MemberTrial) -> str:
    return trial.validated.outcome.value


def _by_session_half(
    name: str,
    trials: list[MemberTrial],
    outcomes: list[dict[str, Any]],
    n_cases: int,
    confidence: float,
) -> tuple[dict[str, dict[str, int]], list[Figure]]:
    """Supported findings in the first and second half of a session (does a reviewer learn?)."""
    half = (n_cases + 1) // 2
    learning: dict[str, dict[str, int]] = {}
    figures: list[Figure] = []
    positions = [o.get("position") for o in outcomes]
    for label, first_half in (
        (f"positions 1-{half}", True),
        (f"positions {half + 1}-{n_cases}", False),
    ):
        chosen = [
            t
            for t, p in zip(trials, positions, strict=True)
            if isinstance(p, int) and (p < half) == first_half
        ]
        learning[label] = {"supported": sum(t.supported for t in chosen), "cases": len(chosen)}
        figures.append(
            rate_figure(
                f"supported_finding_rate [{name}; {label}]",
                sum(t.supported for t in chosen),
                len(chosen),
                description=f"supported findings of cases reviewed at {label} of the session",
                unit="case",
                confidence=confidence,
            )
        )
    return learning, figures


def _agreement_counts(
    source: SourceRun, rec: RecommendationSpec, trials: list[MemberTrial]
) -> tuple[int, int, int, int]:
    """(agreed, AI decisions, followed AI errors, AI errors) of one participant's trials."""
    agree = n = follow_err = n_err = 0
    for trial in trials:
        ai = source.decision(rec.configuration, trial.case.case_id, trial.trial)
        if ai not in ("permit", "deny", "hold"):
            continue
        n += 1
        same = _outcome(trial) == ai
        agree += same
        if ai != trial.case.expectations.reference_decision.value:
            n_err += 1
            follow_err += same
    return agree, n, follow_err, n_err


def human_report(
    manifest: Manifest,
    corpus: Corpus,
    graded: dict[tuple[str, str, int], MemberTrial],
    outcomes_of: dict[str, dict[str, Any]],
    sources: dict[str, SourceRun],
    confidence: float,
) -> tuple[list[Block], dict[str, Any]]:
    """Protocol, timing and agreement sections, and their record.

    Args:
        manifest: The human run's manifest.
        corpus: Its corpus.
        graded: Its graded member trials.
        outcomes_of: trial id -> the trial's recorded outcome (time on task, overrun, shown).
        sources: Loaded recommendation sources by manifest hash.
        confidence: Confidence level of every interval.
    """
    spec = manifest.spec
    protocol = [
        describe_participant(c.name, c.participant, spec.order_seed)
        for c in spec.candidates
        if c.participant is not None
    ]
    suppliers = spec.human_protocol.reference_suppliers if spec.human_protocol else []
    protocol.append(
        f"Reference decisions supplied by: {', '.join(suppliers)} (declared; none of them is a "
        "measured participant) and, per case, the corpus authoring and review records."
    )
    timing_lines: list[str] = []
    timing_figures: list[Figure] = []
    agreement_figures: list[Figure] = []
    learning_figures: list[Figure] = []
    record: dict[str, Any] = {"participants": {}, "agreement_by_visibility": {}}
    pooled: dict[str, list[int]] = {"visible": [0, 0, 0, 0], "not_visible": [0, 0, 0, 0]}
    for candidate in spec.candidates:
        participant = candidate.participant
        if participant is None:
            continue
        trials = [t for (case_id, name, _), t in graded.items() if name == candidate.name]
        times = [t.latency_s for t in trials if t.latency_s is not None]
        outcomes = [
            outcomes_of.get(f"{t.case.case_id}/{candidate.name}/{t.trial}", {}) for t in trials
        ]
        overruns = sum(1 for o in outcomes if o.get("overran_time_limit") is True)
        rejected = sum(int(o.get("rejected_submissions") or 0) for o in outcomes)
        timing_figures.append(
            rate_figure(
                f"time_limit_overrun_rate [{candidate.name}]",
                overruns,
                len(trials),
                description=f"cases whose time on task exceeded {participant.time_limit_s:g} s, "
                "of cases submitted",
                unit="case",
                confidence=confidence,
            )
        )
        learning, figures = _by_session_half(
            candidate.name, trials, outcomes, len(corpus.cases), confidence
        )
        learning_figures += figures
        timing_lines.append(
            f"{candidate.name}: {len(trials)} case(s) submitted of {len(corpus.cases)}; time on "
            "task (pauses excluded) "
            + (
                f"median {statistics.median(times):.1f} s, max {max(times):.1f} s, total "
                f"{sum(times):.1f} s"
                if times
                else "not measured (nothing submitted)"
            )
            + f"; {overruns} over the {participant.time_limit_s:g} s limit; {rejected} form "
            "submission(s) refused by validation and corrected."
        )
        entry: dict[str, Any] = {
            "participant": participant.model_dump(mode="json"),
            "submitted": len(trials),
            "time_on_task_s": times,
            "time_limit_overruns": overruns,
            "rejected_submissions": rejected,
            "supported_by_session_half": learning,
        }
        rec = participant.recommendation
        if rec is not None:
            source = sources[rec.manifest_sha256]
            key = "visible" if rec.visible else "not_visible"
            agree, n, follow_err, n_err = _agreement_counts(source, rec, trials)
            counts = [agree, n, follow_err, n_err]
            pooled[key] = [a + b for a, b in zip(pooled[key], counts, strict=True)]
            label = "visible" if rec.visible else "not visible"
            agreement_figures += [
                rate_figure(
                    f"agreement_with_ai [{candidate.name}; {label}]",
                    agree,
                    n,
                    description=f"cases where the participant's outcome equals the decision of "
                    f"{paired_name(rec.configuration, rec.manifest_sha256)}, of cases where it "
                    "gave a decision",
                    unit="case",
                    confidence=confidence,
                ),
                rate_figure(
                    f"followed_ai_error [{candidate.name}; {label}]",
                    follow_err,
                    n_err,
                    description="cases where the participant made the same decision as the AI "
                    "configuration, of cases where that decision differs from the reference",
                    unit="case",
                    confidence=confidence,
                    reason_if_empty="the AI configuration made no decision that differs from "
                    "the reference on these cases",
                ),
            ]
            entry["agreement"] = {
                "recommendation_visible": rec.visible,
                "configuration": paired_name(rec.configuration, rec.manifest_sha256),
                "agree": agree,
                "ai_decisions": n,
                "followed_ai_errors": follow_err,
                "ai_errors": n_err,
            }
        record["participants"][candidate.name] = entry
    for key, (agree, n, follow_err, n_err) in pooled.items():
        label = key.replace("_", " ")
        agreement_figures += [
            rate_figure(
                f"agreement_with_ai [all participants; {label}]",
                agree,
                n,
                description=f"cases, pooled over participants whose AI recommendation was {label}",
                unit="case",
                confidence=confidence,
                reason_if_empty=f"no participant with a {label} AI recommendation",
            ),
            rate_figure(
                f"followed_ai_error [all participants; {label}]",
                follow_err,
                n_err,
                description=f"AI errors (decision differs from the reference), pooled over "
                f"participants whose AI recommendation was {label}",
                unit="case",
                confidence=confidence,
                reason_if_empty=f"no AI error paired with a {label} recommendation",
            ),
        ]
        record["agreement_by_visibility"][key] = {
            "agree": agree,
            "ai_decisions": n,
            "followed_ai_errors": follow_err,
            "ai_errors": n_err,
        }
    blocks: list[Block] = [
        TextBlock(title="Human configurations: participants and protocol", paragraphs=protocol),
        TextBlock(title="Time on task", paragraphs=timing_lines),
        FiguresBlock(
            title="Time-limit overruns",
            figures=timing_figures,
            note="Time limits are not enforced; an overrun is recorded, not cut off.",
        ),
        FiguresBlock(
            title="Learning across the session",
            figures=learning_figures,
            note="Each participant's cases split by their position in the seeded, interleaved "
            "order. The halves hold different cases, so a difference mixes learning (or fatigue) "
            "with case difficulty.",
        ),
        FiguresBlock(
            title="Agreement with the AI recommendation, by visibility",
            figures=agreement_figures,
            note="Same cases on both sides. Agreement when the recommendation was not visible "
            "measures shared judgement; the difference to the visible split is an estimate of "
            "the recommendation's influence only if participants are otherwise comparable.",
        ),
    ]
    return blocks, record
