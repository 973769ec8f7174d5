"""Review configurations: a single reviewer, a chain of reviewers, and the unchecked baseline.

Aggregation rule for a chain whose approval requires every member (here: a chain of two), in
order of precedence:

1. `permit` only if **every** member's outcome is `permit`;
2. otherwise `deny` if any member denies (an established prohibition stops the change);
3. otherwise `invalid` if any member's reply was invalid, then `missing` if any member produced no
   output: a broken member keeps the chain's error path visible in the confusion table instead of
   being credited as a cautious `hold` (which would score as correct on hold-reference cases);
4. otherwise `hold`.

So a missing or invalid member can never make the chain approve, and every trial keeps the
joint member outcomes, so shared misses stay countable (`P(both approve | prohibited)` is counted
from joint decisions, never multiplied from marginals).

"Same provider" / "cross provider" is a *label* computed from the recorded model identities; it is
a description of the configuration, never a finding that the members fail independently.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, model_validator

from trustbench.rtb.corpus._models import CandidateInput, Case
from trustbench.rtb.review._rows import ReviewTrialRow
from trustbench.rtb.review._validation import (
    Outcome,
    ValidatedResponse,
    is_supported,
    validate_response,
)
from trustbench.rtb.review.reviewers._protocol import Reviewer


class ConfigurationKind(StrEnum):
    """How a configuration turns member replies into one outcome."""

    SINGLE = "single"
    """One reviewer; its outcome is the configuration's outcome."""
    CHAIN = "chain"
    """Two or more reviewers whose approval is all required (see the module's rule)."""
    UNCHECKED = "unchecked"
    """No reviewer: every proposal proceeds. A baseline configuration, not a reviewer."""


class ProviderRelation(StrEnum):
    """Label describing the members' recorded identities (not a finding of independence)."""

    NOT_APPLICABLE = "not_applicable"
    """Fewer than two members."""
    SAME_MODEL = "same_model"
    """All members name the same provider and model."""
    SAME_PROVIDER = "same_provider"
    """All members name the same provider, with different models."""
    CROSS_PROVIDER = "cross_provider"
    """Members name different providers."""
    UNKNOWN = "unknown"
    """Some member has no recorded provider or model (e.g. in-process reviewers)."""


class MemberIdentity(BaseModel):
    """Who a configuration member is, as recorded for the run."""

    model_config = ConfigDict(use_attribute_docstrings=True, frozen=True, extra="forbid")

    reviewer: str
    """Reviewer name (registry name or LLM reviewer label)."""
    provider: str | None = None
    """Provider name for a chat-model reviewer; None for an in-process reviewer."""
    model: str | None = None
    """Requested model identifier; None for an in-process reviewer."""


class ReviewConfiguration(BaseModel):
    """A named assurance configuration of the reviewer track."""

    model_config = ConfigDict(use_attribute_docstrings=True, frozen=True, extra="forbid")

    name: str
    """Configuration name used in reports."""
    kind: ConfigurationKind
    """single, chain or unchecked."""
    members: tuple[MemberIdentity, ...] = ()
    """Members in review order: one for single, two or more for chain, none for unchecked."""

    @model_validator(mode="after")
    def _member_count_matches_kind(self) -> ReviewConfiguration:
        expected = {
            ConfigurationKind.SINGLE: len(self.members) == 1,
            ConfigurationKind.CHAIN: len(self.members) >= 2,
            ConfigurationKind.UNCHECKED: not self.members,
        }[self.kind]
        if not expected:
            raise ValueError(
                f"configuration {self.name!r}: kind {self.kind.value} cannot have "
                f"{len(self.members)} member(s)"
            )
        return self

    @property
    def provider_relation(self) -> ProviderRelation:
        """Same/cross-provider label from the recorded identities (a label, not a finding)."""
        if len(self.members) < 2:
            return ProviderRelation.NOT_APPLICABLE
        if any(m.provider is None or m.model is None for m in self.members):
            return ProviderRelation.UNKNOWN
        if len({m.provider for m in self.members}) > 1:
            return ProviderRelation.CROSS_PROVIDER
        if len({m.model for m in self.members}) > 1:
            return ProviderRelation.SAME_PROVIDER
        return ProviderRelation.SAME_MODEL


def aggregate_chain(member_outcomes: Sequence[Outcome]) -> Outcome:
    """Combine the member outcomes of an all-must-approve chain (rule in the module docstring).

    Args:
        member_outcomes: One outcome per member, in review order (at least one).

    Returns:
        The chain's outcome.
    """
    if not member_outcomes:
        raise ValueError("a chain needs at least one member outcome")
    if all(o is Outcome.PERMIT for o in member_outcomes):
        return Outcome.PERMIT
    for outcome in (Outcome.DENY, Outcome.INVALID, Outcome.MISSING):
        if outcome in member_outcomes:
            return outcome
    return Outcome.HOLD


def chain_supported(member_outcomes: Sequence[Outcome], member_supported: Sequence[bool]) -> bool:
    """Whether a chain's finding is supported.

    A chain's finding is supported when its outcome is a decision and at least one member that
    reached that same decision gave a supported finding (the chain's output then contains a
    finding that cites the decisive records for the decisive reasons).
    """
    outcome = aggregate_chain(member_outcomes)
    if not outcome.is_decision:
        return False
    return any(o is outcome and s for o, s in zip(member_outcomes, member_supported, strict=True))


class ConfigurationTrial(BaseModel):
    """One trial of a configuration on one input, with every member's validated reply."""

    model_config = ConfigDict(use_attribute_docstrings=True, frozen=True)

    configuration: str
    """The configuration's name."""
    outcome: Outcome
    """The configuration's outcome (unchecked: always permit)."""
    member_outcomes: tuple[Outcome, ...]
    """Joint member outcomes in review order (empty for unchecked)."""
    member_responses: tuple[ValidatedResponse, ...]
    """Each member's validated reply, in review order (empty for unchecked)."""


def run_configuration(
    configuration: ReviewConfiguration,
    reviewers: Sequence[Reviewer],
    prompt: str,
    candidate_input: CandidateInput,
) -> ConfigurationTrial:
    """Run an in-process configuration on one input.

    Every member reviews the same input independently (no member sees another's reply), so the
    joint outcomes are available for every trial.

    Args:
        configuration: What is being run.
        reviewers: One reviewer per configuration member, in the same order.
        prompt: The shared review prompt.
        candidate_input: The candidate-visible input.

    Returns:
        The trial with the configuration outcome and the joint member outcomes.
    """
    if len(reviewers) != len(configuration.members):
        raise ValueError(
            f"configuration {configuration.name!r} has {len(configuration.members)} member(s) "
            f"but {len(reviewers)} reviewer(s) were given"
        )
    if configuration.kind is ConfigurationKind.UNCHECKED:
        return ConfigurationTrial(
            configuration=configuration.name,
            outcome=Outcome.PERMIT,
            member_outcomes=(),
            member_responses=(),
        )
    responses = tuple(
        validate_response(r.review(prompt, candidate_input), candidate_input) for r in reviewers
    )
    outcomes = tuple(v.outcome for v in responses)
    return ConfigurationTrial(
        configuration=configuration.name,
        outcome=aggregate_chain(outcomes),
        member_outcomes=outcomes,
        member_responses=responses,
    )


def grade_trial(
    case: Case,
    trial: ConfigurationTrial,
    *,
    trial_index: int = 0,
    latency_s: float | None = None,
    tokens: int | None = None,
    cost_usd: float | None = None,
) -> ReviewTrialRow:
    """Grade one configuration trial against its case (grader side) into a metrics row.

    `supported` is `is_supported` for a single reviewer, `chain_supported` for a chain, and None
    for the unchecked baseline (it gives no finding to judge). Chain rows keep the joint member
    outcomes; single-reviewer rows do not (their one member outcome is the outcome).

    Args:
        case: The authored case the trial's input was exported from.
        trial: The configuration trial.
        trial_index: Index of this repeated trial of the case.
        latency_s: Wall-clock seconds of the whole review, if measured.
        tokens: Total tokens over every call, if reported.
        cost_usd: Total cost, if reported.

    Returns:
        The row for `review_metrics`.
    """
    members = trial.member_responses
    if not members:
        supported: bool | None = None
    elif len(members) == 1:
        supported = is_supported(members[0], case)
    else:
        supported = chain_supported(trial.member_outcomes, [is_supported(m, case) for m in members])
    return ReviewTrialRow(
        case_id=case.case_id,
        group=case.group,
        variant=case.variant,
        trial=trial_index,
        reference=case.expectations.reference_decision,
        observed=trial.outcome,
        supported=supported,
        latency_s=latency_s,
        tokens=tokens,
        cost_usd=cost_usd,
        member_outcomes=trial.member_outcomes if len(members) > 1 else (),
    )
