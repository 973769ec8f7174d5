"""Grade the reviewer track from the ledger alone: member trials, then configuration trials.

Grader side: this is the only place the answer key is read. For each recorded trial the
candidate input is rebuilt from the case and the *recorded* evaluation id, the raw reply is
validated against it (`validate_response`) and judged for support (`is_supported`). A failed
trial (no reply after the declared retries) is `missing` with its error class kept: never
approval. A planned trial with no finished row (an interrupted run) is *not run*: it is left out
of every denominator and listed as such, never counted as zero or as missing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from trustbench.core import LedgerContents, Manifest
from trustbench.errors import CheckFailed
from trustbench.rtb.corpus._export import to_candidate_input
from trustbench.rtb.corpus._load import Corpus
from trustbench.rtb.policy._protocol import AuthoredCase
from trustbench.rtb.review._chain import (
    ConfigurationKind,
    ReviewConfiguration,
    aggregate_chain,
    chain_supported,
)
from trustbench.rtb.review._member_store import MemberStore
from trustbench.rtb.review._member_trial import MemberTrial, slim_validated
from trustbench.rtb.review._metrics import ReviewTrialRow
from trustbench.rtb.review._options import parse_options
from trustbench.rtb.review._reply_grader import ReplyGrader
from trustbench.rtb.review._validation import (
    Outcome,
    ValidatedResponse,
    support_gaps,
)

NOT_RUN = "not_run"
"""Outcome label of a planned trial that never finished."""


def _sum_or_none(values: list[Any]) -> Any:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _attempt_tokens(attempt: dict[str, Any]) -> Any:
    """Prompt plus completion tokens of one attempt; None when it reported neither."""
    prompt, completion = attempt["prompt_tokens"], attempt["completion_tokens"]
    if prompt is None and completion is None:
        return None
    return (prompt or 0) + (completion or 0)


def _attempt_totals(attempts: list[dict[str, Any]]) -> tuple[Any, Any, Any]:
    """Latency, tokens and cost summed over a trial's attempts (`_sum_or_none` each).

    A trial mostly has one attempt: its totals are made without the three lists (`_one`).
    """
    if len(attempts) == 1:
        attempt = attempts[0]
        return (
            _one(attempt["latency_s"]),
            _one(_attempt_tokens(attempt)),
            _one(attempt["cost_usd"]),
        )
    return (
        _sum_or_none([a["latency_s"] for a in attempts]),
        _sum_or_none([_attempt_tokens(a) for a in attempts]),
        _sum_or_none([a["cost_usd"] for a in attempts]),
    )


def _member_trial(
    case: AuthoredCase,
    trial: dict[str, Any],
    attempts: list[dict[str, Any]],
    extraction: str,
    grader: ReplyGrader,
) -> MemberTrial:
    outcome = found if isinstance(found := trial.get("outcome"), dict) else {}
    evaluation_id = outcome.get("evaluation_id")
    raw = outcome.get("reply") if trial["status"] == "completed" else None
    if trial["status"] == "completed" and isinstance(evaluation_id, str):
        # `validate_response` against `to_candidate_input(case, evaluation_id)`, then
        # `support_gaps`: the same results, each distinct reply of a case graded once.
        validated, explanation, gaps = grader.grade(raw, case, evaluation_id, extraction)
    else:
        if trial.get("error_class") == "response_too_large":
            # The candidate answered, but past the declared size cap: an unusable answer is
            # invalid.
            validated = ValidatedResponse(
                outcome=Outcome.INVALID, invalid_reason="response exceeded max_response_bytes"
            )
        else:
            validated = ValidatedResponse(outcome=Outcome.MISSING)
        explanation, gaps = None, tuple(support_gaps(validated, case))
    latency_s, tokens, cost_usd = _attempt_totals(attempts)
    return MemberTrial(
        case=case,
        candidate=trial["candidate"],
        trial=int(trial["trial_index"]),
        status=trial["status"],
        evaluation_id=evaluation_id if isinstance(evaluation_id, str) else None,
        # The raw text is read only where no finding was parsed (the invalid-reply reasons, the
        # drill-down's excerpt): a parsed reply's text is not held for the whole report.
        raw_reply=raw if isinstance(raw, str) and not validated.outcome.is_decision else None,
        reported_model=outcome.get("reported_model"),
        validated=slim_validated(validated),
        supported=not gaps,
        latency_s=latency_s,
        tokens=tokens,
        cost_usd=cost_usd,
        attempts=len(attempts),
        error_class=trial.get("error_class"),
        explanation=explanation,
        support_gaps=tuple(gaps),
    )


def member_trials(
    manifest: Manifest,
    ledger: LedgerContents,
    corpus: Corpus,
    on_graded: Callable[[MemberTrial], None] | None = None,
    *,
    skip_other_cases: bool = False,
) -> Mapping[tuple[str, str, int], MemberTrial]:
    """Grade every finished trial: `(case_id, candidate, k)` -> `MemberTrial`.

    Streams the ledger (`LedgerContents.iter_trials`): each trial row and its attempts are
    dropped once graded, and each graded trial goes to a `MemberStore` (a temporary file, 8
    bytes a trial in memory). `on_graded` sees each graded trial in ledger order.

    Raises:
        CheckFailed: a trial names a case outside `corpus` (the plan's cases; as
            `LedgerContents.trials_in_plan`, streamed): grading it counts an unplanned outcome.
            `skip_other_cases` skips it: a human run's source is graded on that run's cases.
    """
    cases = {case.case_id: case for case in corpus.cases}
    # The frozen spec's rule grades every trial alike (each trial also records it).
    extraction = parse_options(manifest.spec).answer_extraction
    graded = MemberStore(
        corpus, [c.name for c in manifest.spec.candidates], manifest.spec.trials_per_case
    )
    grader = ReplyGrader(to_candidate_input)  # this corpus's: it keeps results by case id
    for trial, attempts in ledger.iter_trials():
        case = cases.get(trial["case_id"])
        if case is None and skip_other_cases:
            continue
        if case is None:
            raise CheckFailed(
                f"trial {trial['trial_id']} names a case outside the frozen plan",
                location="ledger.sqlite",
            )
        member = _member_trial(case, trial, attempts, extraction, grader)
        graded.put(member)
        if on_graded is not None:
            on_graded(member)
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


class ConfigurationTrials:
    """A configuration's trials, made one at a time from its members' graded trials.

    Iterating yields a `ConfigurationRow` per (case, k) whose members all finished, in corpus
    order then k; nothing is held between rows (the member trials are read from the
    `MemberStore`), so each pass over a million-trial configuration costs time, not memory.
    """

    def __init__(
        self,
        configuration: ReviewConfiguration,
        member_names: list[str],
        corpus: Corpus,
        trials_per_case: int,
        graded: Mapping[tuple[str, str, int], MemberTrial],
    ) -> None:
        self._configuration = configuration
        self._names = member_names
        self._cases = corpus.cases
        self._k = trials_per_case
        self._graded = graded
        self._indexes: list[int] | None = None
        """Each member's place in the `MemberStore` plan, read by position (`_members`)."""
        if isinstance(graded, MemberStore):
            found = [graded.candidate_index(name) for name in member_names]
            self._indexes = [i for i in found if i is not None] if None not in found else None
        self.not_run: list[tuple[str, int]] = []
        """(case, k) keys not run because some member trial never finished."""
        self._unchecked = configuration.kind is ConfigurationKind.UNCHECKED
        self.case_ids: list[str] = []
        """Cases with at least one trial here, in corpus order."""
        count = 0
        for case in self._cases:
            before = count
            for k in range(trials_per_case):
                if self._unchecked or all(
                    (case.case_id, name, k) in graded for name in member_names
                ):
                    count += 1
                else:
                    self.not_run.append((case.case_id, k))
            if count > before:
                self.case_ids.append(case.case_id)
        self._count = count
        self._observed: list[Outcome | None] | None = None
        """Each (case, k)'s observed outcome (None when not run), kept by the first full pass so
        `decisions` need not read the member trials again."""

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[ConfigurationRow]:
        observed: list[Outcome | None] = [None] * (len(self._cases) * self._k)
        for slot, item in self._made():
            observed[slot] = item.row.observed
            yield item
        self._observed = observed

    def decisions(self) -> Iterator[ReviewTrialRow]:
        """Each trial's row as far as a comparison reads it.

        Case, group, trial, reference and observed outcome (no support, cost or members), made
        without reading a member trial again once the trials were iterated in full.
        """
        if self._observed is None:
            yield from (item.row for item in self)
            return
        outcomes = self._observed
        for position, case in enumerate(self._cases):
            for k in range(self._k):
                outcome = outcomes[position * self._k + k]
                if outcome is not None:
                    yield ReviewTrialRow(
                        case_id=case.case_id, group=case.group, variant=case.variant, trial=k,
                        reference=case.expectations.reference_decision,
                        observed=outcome, supported=None,
                    )  # fmt: skip

    def joint_decisions(
        self, other: ConfigurationTrials
    ) -> Iterator[tuple[str, str, Any, Outcome, Outcome]]:
        """`(case id, group, reference, own outcome, other's)` per (case, k) both finished.

        In (case, k) order, from the outcomes the first full pass kept, with no row made (see
        `_paired.compare_joint`).

        Raises:
            ValueError: a side has not been iterated in full yet, or the two are not of the same
                cases and K.
        """
        mine, theirs = self._observed, other._observed
        if mine is None or theirs is None or len(mine) != len(theirs) or self._k != other._k:
            raise ValueError("joint decisions need both sides iterated in full, of one plan")
        k = self._k
        for position, case in enumerate(self._cases):
            case_id, group = case.case_id, case.group
            reference = case.expectations.reference_decision
            for slot in range(position * k, (position + 1) * k):
                a, b = mine[slot], theirs[slot]
                if a is not None and b is not None:
                    yield case_id, group, reference, a, b

    def baseline_cases(self) -> Iterator[tuple[ConfigurationRow, int]]:
        """The unchecked baseline's trials a case at a time: `(its trial 0, K)` per case.

        A case's K baseline trials are alike but for their index (each permits, with no
        finding, latency or cost), so they can be counted and written at once
        (`ConfigurationTally.add_alike`, `TrialRowSpool.add_trials`). Like a full iteration, it
        keeps every trial's outcome for the comparisons.

        Raises:
            ValueError: this is not the unchecked baseline.
        """
        if not self._unchecked:
            raise ValueError(f"{self._configuration.name} is not the unchecked baseline")
        name = self._configuration.name
        for case in self._cases:
            yield ConfigurationRow(name, configuration_row(case, 0, ()), ()), self._k
        permitted: list[Outcome | None] = [Outcome.PERMIT] * (len(self._cases) * self._k)
        self._observed = permitted

    def _made(self) -> Iterator[tuple[int, ConfigurationRow]]:
        name = self._configuration.name
        for position, case in enumerate(self._cases):
            for k in range(self._k):
                slot = position * self._k + k
                if self._unchecked:
                    yield slot, ConfigurationRow(name, configuration_row(case, k, ()), ())
                    continue
                present = self._members(position, case.case_id, k)
                if present is not None:
                    row = configuration_row(case, k, present)
                    yield slot, ConfigurationRow(name, row, present)

    def _members(self, position: int, case_id: str, k: int) -> tuple[MemberTrial, ...] | None:
        """Every member's graded trial of (case, k), or None when one of them did not finish."""
        graded = self._graded
        if isinstance(graded, MemberStore) and self._indexes is not None:
            present = []
            for index in self._indexes:
                member = graded.at(position, index, k)
                if member is None:
                    return None
                present.append(member)
            return tuple(present)
        keys = [(case_id, member, k) for member in self._names]
        if any(key not in graded for key in keys):
            return None
        return tuple(graded[key] for key in keys)


def case_ids(rows: Iterable[ConfigurationRow]) -> set[str]:
    """The cases with a trial in `rows` (without making the trials of `ConfigurationTrials`)."""
    if isinstance(rows, ConfigurationTrials):
        return set(rows.case_ids)
    return {item.row.case_id for item in rows}


def _one(value: Any) -> Any:
    """`_sum_or_none([value])` without the list: `0 + value`, as `sum` adds (-0.0 gives 0.0)."""
    return None if value is None else 0 + value


def configuration_row(
    case: AuthoredCase, k: int, members: tuple[MemberTrial, ...]
) -> ReviewTrialRow:
    """The metrics row of one configuration trial (case, trial k) from its members' trials.

    The one builder of a `ReviewTrialRow` from graded trials (the track's counting, the record's
    per-trial rows and the tests all read rows made here), so a field added to the row is filled
    in one place. No members is the unchecked baseline: it permits and gives no finding to judge
    (`supported` None). One member's outcome and support are the row's; a chain's are
    `aggregate_chain` and `chain_supported` of its members', with the joint member outcomes kept
    and latency, tokens and cost summed over the members (None where none reported any).
    """
    base = {
        "case_id": case.case_id,
        "group": case.group,
        "variant": case.variant,
        "trial": k,
        "reference": case.expectations.reference_decision,
    }
    if not members:
        return ReviewTrialRow(**base, observed=Outcome.PERMIT, supported=None)
    if len(members) == 1:  # a single reviewer: most configurations, so made the short way
        member = members[0]
        return ReviewTrialRow(
            **base,
            observed=member.validated.outcome,
            supported=member.supported,
            latency_s=_one(member.latency_s),
            tokens=_one(member.tokens),
            cost_usd=_one(member.cost_usd),
        )
    outcomes = tuple(m.validated.outcome for m in members)
    return ReviewTrialRow(
        **base,
        observed=aggregate_chain(outcomes),
        supported=chain_supported(outcomes, [m.supported for m in members]),
        latency_s=_sum_or_none([m.latency_s for m in members]),
        tokens=_sum_or_none([m.tokens for m in members]),
        cost_usd=_sum_or_none([m.cost_usd for m in members]),
        member_outcomes=outcomes,
    )


def configuration_rows(
    configuration: ReviewConfiguration,
    member_names: list[str],
    corpus: Corpus,
    trials_per_case: int,
    graded: Mapping[tuple[str, str, int], MemberTrial],
) -> tuple[ConfigurationTrials, list[tuple[str, int]]]:
    """Assemble a configuration's trials from its members' trials.

    Returns:
        `(rows, not_run)`: a row for every (case, k) whose members all finished (made as they
        are iterated, see `ConfigurationTrials`), and the (case, k) keys that are not run
        because some member trial never finished.
    """
    rows = ConfigurationTrials(configuration, member_names, corpus, trials_per_case, graded)
    return rows, rows.not_run


def evaluability_kind(item: ConfigurationRow) -> int:
    """Where one trial counts in `Evaluability`: 0 valid, 1 missing, 2 invalid, 3 no reply.

    A configuration trial is valid only when every member gave a valid decision: a chain whose
    second member never answered has not been reviewed by the chain that was declared. Among the
    rest, a trial with any member that got no reply (the ledger's `failed`: connection error,
    timeout, refused request after the declared retries) is `transport_failed`; otherwise one
    with any invalid member is `invalid`; otherwise `missing` (an empty reply).
    """
    outcomes = [m.validated.outcome for m in item.members]
    if all(o.is_decision for o in outcomes):
        return 0
    if any(m.status != "completed" for m in item.members):
        return 3
    return 2 if any(o is Outcome.INVALID for o in outcomes) else 1


def count_error_classes(item: ConfigurationRow, counts: dict[str, int]) -> None:
    """Add one configuration trial's failed member trials to `counts` by error class."""
    for member in item.members:
        if member.status != "completed":
            key = member.error_class or "unknown"
            counts[key] = counts.get(key, 0) + 1
