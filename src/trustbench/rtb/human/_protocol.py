"""The human session protocol of a frozen run: participants, case orders, recommendations.

Everything here is read from the frozen manifest (the spec's `human` candidates and
`human_protocol`) plus the corpus it pins and the recommendation source runs it names, so a
served session cannot drift from what was frozen.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from trustbench.core import Manifest, ParticipantSpec
from trustbench.errors import InputError
from trustbench.rtb.human._order import case_order
from trustbench.rtb.human._recommendations import SourceRun, load_source_run

if TYPE_CHECKING:  # the corpus and the review track load when a session is served, not on import
    from trustbench.rtb.corpus._load import Corpus
    from trustbench.rtb.policy._protocol import AuthoredCase


@dataclass(frozen=True)
class ParticipantPlan:
    """One participant's frozen protocol and case order."""

    candidate: str
    """The human candidate's name (its configuration in the report)."""
    participant: ParticipantSpec
    """Declared participant facts (qualifications, tools, evidence access, time limit, ...)."""
    order: tuple[str, ...]
    """Case ids in review order (see `case_order`)."""
    recommendations: dict[str, str | None]
    """Case id -> the paired AI configuration's outcome; empty when none is paired."""

    @property
    def shows_recommendation(self) -> bool:
        """True when the participant is shown the AI configuration's decision."""
        spec = self.participant.recommendation
        return spec is not None and spec.visible


def reference_suppliers(manifest: Manifest, corpus: Corpus) -> set[str]:
    """Everyone recorded as supplying reference decisions: declared, corpus authors, reviewers."""
    declared = set(
        manifest.spec.human_protocol.reference_suppliers if manifest.spec.human_protocol else []
    )
    for case in corpus.cases:
        declared.add(case.authoring.author)
        declared.update(case.reference_status.reviewers)
    return declared


def planned_cases(manifest: Manifest, corpus: Corpus) -> list[AuthoredCase]:
    """The cases of the frozen plan: those `track_options.cases` selects, in corpus order.

    A participant reviews exactly what the frozen plan holds (the trials `report` grades); an
    order over the whole corpus served cases the plan never had, recorded as foreign trials.
    """
    from trustbench.rtb.review._options import parse_options, select_cases

    ids = set(select_cases([c.case_id for c in corpus.cases], parse_options(manifest.spec).cases))
    return [case for case in corpus.cases if case.case_id in ids]


def participant_plans(
    manifest: Manifest, corpus: Corpus, sources: dict[str, SourceRun] | None = None
) -> list[ParticipantPlan]:
    """Build every participant's plan, loading (and verifying) the recommendation sources.

    Args:
        manifest: The frozen manifest of the human run.
        corpus: The corpus it pins (whole: every author there is a reference supplier); the
            plans hold only the cases `track_options.cases` selects.
        sources: Already loaded source runs by manifest hash (loaded here when absent).

    Raises:
        InputError: a candidate is not `human`, trials_per_case is not 1, a participant is a
            reference supplier, or a recommendation source does not fit.
    """
    spec = manifest.spec
    if spec.track_id != "rtb/review":
        raise InputError(f"a {spec.track_id} run has no human sessions", location="manifest.json")
    if spec.trials_per_case != 1:
        raise InputError(
            "a human session reviews each case once: set trials_per_case = 1",
            location="manifest.json#/spec/trials_per_case",
        )
    suppliers = reference_suppliers(manifest, corpus)
    cases = planned_cases(manifest, corpus)
    loaded = sources if sources is not None else {}
    plans: list[ParticipantPlan] = []
    for candidate in spec.candidates:
        where = f"manifest.json candidate {candidate.name}"
        if candidate.participant is None:
            raise InputError(
                "a served run holds only human candidates (run AI reviewers in their own run "
                "and name it as the recommendation source)",
                location=where,
            )
        participant = candidate.participant
        if participant.id in suppliers:
            raise InputError(
                f"participant {participant.id!r} supplied reference decisions of this corpus",
                location=where,
            )
        recommendations: dict[str, str | None] = {}
        if participant.recommendation is not None:
            rec = participant.recommendation
            if rec.manifest_sha256 not in loaded:
                loaded[rec.manifest_sha256] = load_source_run(rec, manifest, corpus)
            source = loaded[rec.manifest_sha256]
            if rec.configuration not in source.rows:
                raise InputError(f"no configuration {rec.configuration!r}", location=where)
            recommendations = {
                case.case_id: source.decision(rec.configuration, case.case_id) for case in cases
            }
        plans.append(
            ParticipantPlan(
                candidate=candidate.name,
                participant=participant,
                order=tuple(case_order(cases, spec.order_seed, participant.id)),
                recommendations=recommendations,
            )
        )
    return plans
