"""Grade the reviewer track from the ledger alone: member trials, then configuration trials.

Grader side: this is the only place the answer key is read. For each recorded trial the
candidate input is rebuilt from the case and the *recorded* evaluation id, the raw reply is
validated against it (`validate_response`) and judged for support (`is_supported`). A failed
trial (no reply after the declared retries) is `missing` with its error class kept: never
approval. A planned trial with no finished row (an interrupted run) is *not run*: it is left out
of every denominator and listed as such, never counted as zero or as missing.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from trustbench.core import Evaluability, LedgerContents, Manifest
from trustbench.rtb.corpus._export import to_candidate_input
from trustbench.rtb.corpus._load import Corpus
from trustbench.rtb.policy._protocol import AuthoredCase
from trustbench.rtb.review._chain import ConfigurationKind, ReviewConfiguration, aggregate_chain
from trustbench.rtb.review._chain import chain_supported as _chain_supported
from trustbench.rtb.review._metrics import ReviewTrialRow
from trustbench.rtb.review._options import parse_options
from trustbench.rtb.review._validation import (
    Outcome,
    ValidatedResponse,
    is_supported,
    support_gaps,
    validate_response,
)

NOT_RUN = "not_run"
"""Outcome label of a planned trial that never finished."""


@dataclass(frozen=True, slots=True)
class MemberTrial:
    """One candidate's graded trial of one case (trial index k).

    One is held per finished trial for the whole report, so it keeps what the figures and the
    per-trial rows read, not the parsed reply: `validated` has no `response` (its explanation
    and support gaps are kept instead), repeated names are interned.
    """

    case: AuthoredCase
    """The authored case (grader side)."""
    candidate: str
    """The candidate's name."""
    trial: int
    """Trial index k."""
    status: str
    """`completed` or `failed` (the ledger's trial status)."""
    evaluation_id: str | None
    """The evaluation id the candidate saw; None if the trial failed before recording one."""
    raw_reply: str | None
    """The reply text exactly as received, kept only when no finding was parsed from it (a
    missing or invalid reply: its reasons and excerpts read it); None otherwise."""
    reported_model: str | None
    """Model id the service reported."""
    validated: ValidatedResponse
    """Outcome of validation (missing for a failed trial) and why a reply was invalid; its
    parsed `response` is not kept (see `explanation`, `support_gaps`)."""
    supported: bool
    """Whether the finding is valid and supported for the case."""
    latency_s: float | None
    """Sum of the trial's counted attempts' latencies (retries included)."""
    tokens: int | None
    """Sum of reported prompt + completion tokens; None when no attempt reported any."""
    cost_usd: float | None
    """Sum of reported attempt costs; None (unknown, never 0) when no attempt had a cost."""
    attempts: int
    """Counted attempts of the trial."""
    error_class: str | None
    """Why a failed trial failed (e.g. `server_error` after the retries ran out)."""
    explanation: str | None = None
    """The valid finding's explanation (for people to read, never scored); None without one."""
    support_gaps: tuple[str, ...] = ()
    """Why the finding is not supported for the case (`support_gaps`); empty when it is."""


_SLIM: dict[Outcome, ValidatedResponse] = {}


def _slim(validated: ValidatedResponse) -> ValidatedResponse:
    """`validated` without its parsed response: one shared instance per plain outcome."""
    if validated.invalid_reason is not None:
        return ValidatedResponse(outcome=validated.outcome, invalid_reason=validated.invalid_reason)
    if validated.outcome not in _SLIM:
        _SLIM[validated.outcome] = ValidatedResponse(outcome=validated.outcome)
    return _SLIM[validated.outcome]


def _name(value: Any) -> Any:
    """A repeated name (candidate, model, error class) held once, not once per trial."""
    return sys.intern(value) if type(value) is str else value


def _sum_or_none(values: list[Any]) -> Any:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _member_trial(
    case: AuthoredCase,
    trial: dict[str, Any],
    attempts: list[dict[str, Any]],
    extraction: str = "strict",
) -> MemberTrial:
    outcome = found if isinstance(found := trial.get("outcome"), dict) else {}
    evaluation_id = outcome.get("evaluation_id")
    raw = outcome.get("reply") if trial["status"] == "completed" else None
    if trial["status"] == "completed" and isinstance(evaluation_id, str):
        validated = validate_response(raw, to_candidate_input(case, evaluation_id), extraction)
    elif trial.get("error_class") == "response_too_large":
        # The candidate answered, but past the declared size cap: an unusable answer is invalid.
        validated = ValidatedResponse(
            outcome=Outcome.INVALID, invalid_reason="response exceeded max_response_bytes"
        )
    else:
        validated = ValidatedResponse(outcome=Outcome.MISSING)
    tokens = [
        (a["prompt_tokens"] or 0) + (a["completion_tokens"] or 0)
        if a["prompt_tokens"] is not None or a["completion_tokens"] is not None
        else None
        for a in attempts
    ]
    response = validated.response
    return MemberTrial(
        case=case,
        candidate=_name(trial["candidate"]),
        trial=int(trial["trial_index"]),
        status=_name(trial["status"]),
        evaluation_id=evaluation_id if isinstance(evaluation_id, str) else None,
        # The raw text is read only where no finding was parsed (the invalid-reply reasons, the
        # drill-down's excerpt): a parsed reply's text is not held for the whole report.
        raw_reply=raw if isinstance(raw, str) and response is None else None,
        reported_model=_name(outcome.get("reported_model")),
        validated=_slim(validated),
        supported=is_supported(validated, case),
        latency_s=_sum_or_none([a["latency_s"] for a in attempts]),
        tokens=_sum_or_none(tokens),
        cost_usd=_sum_or_none([a["cost_usd"] for a in attempts]),
        attempts=len(attempts),
        error_class=_name(trial.get("error_class")),
        explanation=response.explanation if response is not None else None,
        support_gaps=tuple(_name(gap) for gap in support_gaps(validated, case)),
    )


def member_trials(
    manifest: Manifest, ledger: LedgerContents, corpus: Corpus
) -> dict[tuple[str, str, int], MemberTrial]:
    """Grade every finished trial: `(case_id, candidate, k)` -> `MemberTrial`.

    Streams the ledger (`LedgerContents.iter_trials`): each trial row and its attempts are
    dropped once graded, so only the graded trials are held.
    """
    cases = {case.case_id: case for case in corpus.cases}
    # The frozen spec's rule grades every trial alike (each trial also records it).
    extraction = parse_options(manifest.spec).answer_extraction
    graded: dict[tuple[str, str, int], MemberTrial] = {}
    for trial, attempts in ledger.iter_trials():
        case = cases[trial["case_id"]]
        graded[(trial["case_id"], trial["candidate"], int(trial["trial_index"]))] = _member_trial(
            case, trial, attempts, extraction
        )
    return graded


@dataclass(frozen=True, slots=True)
class ConfigurationRow:
    """One configuration trial (case c, trial k) with its graded row and its members."""

    configuration: str
    """Configuration name."""
    row: ReviewTrialRow
    """The metrics row (outcome, supported, latency, tokens, cost, joint member outcomes)."""
    members: tuple[MemberTrial, ...]
    """The member trials behind it (empty for the unchecked baseline)."""


def configuration_rows(
    configuration: ReviewConfiguration,
    member_names: list[str],
    corpus: Corpus,
    trials_per_case: int,
    graded: dict[tuple[str, str, int], MemberTrial],
) -> tuple[list[ConfigurationRow], list[tuple[str, int]]]:
    """Assemble a configuration's trials from its members' trials.

    Returns:
        `(rows, not_run)`: a row for every (case, k) whose members all finished, and the
        (case, k) keys that are not run because some member trial never finished.
    """
    rows: list[ConfigurationRow] = []
    not_run: list[tuple[str, int]] = []
    for case in corpus.cases:
        for k in range(trials_per_case):
            base = {
                "case_id": case.case_id,
                "group": case.group,
                "variant": case.variant,
                "trial": k,
                "reference": case.expectations.reference_decision,
            }
            if configuration.kind is ConfigurationKind.UNCHECKED:
                row = ReviewTrialRow(**base, observed=Outcome.PERMIT, supported=None)
                rows.append(ConfigurationRow(configuration.name, row, ()))
                continue
            members = [graded.get((case.case_id, name, k)) for name in member_names]
            if any(member is None for member in members):
                not_run.append((case.case_id, k))
                continue
            present = tuple(m for m in members if m is not None)
            outcomes = tuple(m.validated.outcome for m in present)
            if len(present) == 1:
                observed, supported = outcomes[0], present[0].supported
            else:
                observed = aggregate_chain(outcomes)
                supported = _chain_supported(outcomes, [m.supported for m in present])
            row = ReviewTrialRow(
                **base,
                observed=observed,
                supported=supported,
                latency_s=_sum_or_none([m.latency_s for m in present]),
                tokens=_sum_or_none([m.tokens for m in present]),
                cost_usd=_sum_or_none([m.cost_usd for m in present]),
                member_outcomes=outcomes if len(present) > 1 else (),
            )
            rows.append(ConfigurationRow(configuration.name, row, present))
    return rows, not_run


def configuration_evaluability(rows: list[ConfigurationRow]) -> Evaluability:
    """Valid-response counts of one configuration's finished trials.

    A configuration trial is valid only when every member gave a valid decision: a chain whose
    second member never answered has not been reviewed by the chain that was declared. Among the
    rest, a trial with any member that got no reply (the ledger's `failed`: connection error,
    timeout, refused request after the declared retries) is `transport_failed`; otherwise one
    with any invalid member is `invalid`; otherwise `missing` (an empty reply).
    """
    valid = missing = invalid = transport = 0
    for item in rows:
        outcomes = [m.validated.outcome for m in item.members]
        if all(o.is_decision for o in outcomes):
            valid += 1
        elif any(m.status != "completed" for m in item.members):
            transport += 1
        elif any(o is Outcome.INVALID for o in outcomes):
            invalid += 1
        else:
            missing += 1
    return Evaluability(len(rows), valid, missing, invalid, transport)


def error_class_counts(rows: list[ConfigurationRow]) -> dict[str, int]:
    """Failed member trials by error class (`connection_error`, `timeout`, ...), sorted."""
    counts: dict[str, int] = {}
    for item in rows:
        for member in item.members:
            if member.status != "completed":
                key = member.error_class or "unknown"
                counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items()))


def record_rows(
    configuration: str,
    rows: list[ConfigurationRow],
    not_run: list[tuple[str, int]],
    corpus: Corpus,
) -> Iterator[dict[str, Any]]:
    """Per-trial rows of one configuration (not-run trials included, null), one at a time.

    A generator: `report` writes each row to `record.trials.jsonl` as it is made, so the rows
    (about 1.5 kB each as dicts) are never all held.
    """
    cases = {case.case_id: case for case in corpus.cases}
    for item in rows:
        row = item.row
        yield {
            "configuration": configuration,
            "case_id": row.case_id,
            "group": row.group,
            "variant": row.variant,
            "trial": row.trial,
            "reference": row.reference.value,
            "outcome": row.observed.value,
            "baseline": not item.members,
            "supported": row.supported,
            "evaluation_ids": [m.evaluation_id for m in item.members],
            "member_outcomes": [m.validated.outcome.value for m in item.members],
            "invalid_reasons": [m.validated.invalid_reason for m in item.members],
            # Kept for people to read (never keyword-scored), with why support failed.
            "explanations": [m.explanation for m in item.members],
            "support_gaps": [list(m.support_gaps) for m in item.members],
            "error_classes": [m.error_class for m in item.members],
            "reported_models": [m.reported_model for m in item.members],
            "latency_s": row.latency_s,
            "tokens": row.tokens,
            "cost_usd": row.cost_usd,
        }
    for case_id, k in not_run:
        case = cases[case_id]
        yield {
            "configuration": configuration,
            "case_id": case_id,
            "group": case.group,
            "variant": case.variant,
            "trial": k,
            "reference": case.expectations.reference_decision.value,
            "outcome": NOT_RUN,
            "baseline": False,
            "supported": None,
            "evaluation_ids": [],
            "member_outcomes": [],
            "invalid_reasons": [],
            "explanations": [],
            "support_gaps": [],
            "error_classes": [],
            "reported_models": [],
            "latency_s": None,
            "tokens": None,
            "cost_usd": None,
        }
