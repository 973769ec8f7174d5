"""Session state kept in the run's ledger: what each participant was shown, paused and submitted.

The review app is the single writer of the ledger while it serves (it holds the run folder's
lock, the same one `trustbench run` takes). Nothing lives only in memory: every state change is
a committed ledger row, so a closed browser or a killed server loses nothing already submitted,
and a restarted server rebuilds each session from the ledger.

Rows written:

- event `human_case_shown` `{candidate, case_id, evaluation_id, at_epoch}`: the first time a case
  is displayed (its evaluation id is issued then and reused until submission);
- events `human_paused` / `human_resumed` `{candidate, case_id, at_epoch}`;
- event `human_submission_rejected` `{candidate, case_id, reason}`: a form that failed
  `validate_response` (the participant is shown why and may correct it; the count is reported);
- one `attempts` row (kind `human_response`, `latency_s` = time on task) and one `trials` row per
  submitted case, in one transaction, in the shape the reviewer track grades.

Declared limits (`track_options.access.<name>`, like a model reviewer's): the participant's time
limit is then enforced and a submission budget may be set. A case whose time on task passes the
limit, or whose last allowed submission is refused, is recorded as the reviewer's hold: the same
two rows with no reply, the trial's `error_class` (`time_limit_exceeded`,
`review_budget_exhausted`) and the outcome's `review_budget_exhausted` (what the grader counts
as a hold), never an approval. The limit is checked whenever the participant's session is
touched (a page, a submission, a pause) and when the app closes, on the store's clock.

Time on task is the sum of the intervals during which the case was shown and not paused. The
clock cannot see a closed browser: such time counts as time on task until a pause.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trustbench._canonical import canonical_json, sha256_hex
from trustbench.core import (
    Ledger,
    LedgerContents,
    Manifest,
    ParticipantSpec,
    RecommendationSpec,
    TrialKey,
    read_ledger,
    read_manifest,
    utc_now,
    verify_run,
)
from trustbench.errors import CheckFailed, InputError
from trustbench.rtb.policy import policy_for

if TYPE_CHECKING:
    from trustbench.rtb.corpus._load import Corpus
    from trustbench.rtb.corpus._models import CandidateInput
    from trustbench.rtb.policy._protocol import AuthoredCase
    from trustbench.rtb.review._grading import ConfigurationRow


# ------------------------------------------------------------------------------------------------
# The seeded case order of one participant, interleaving comparable variants.
#
# A person learns while reviewing: the third variant of a template is easier once the first two
# were seen. The order therefore spreads each domain group's variants across the session (round r
# holds one variant of every group, groups shuffled per round) so that position effects can be
# analysed and no group is reviewed as a block. The order is a pure function of the frozen
# `order_seed` and the participant id, so it is reproducible from the manifest alone.


def participant_seed(order_seed: int, participant_id: str) -> int:
    """A per-participant seed derived from the frozen order seed (stable across Python runs).

    `hash()` of a string is salted per process, so the seed comes from SHA-256 instead.
    """
    digest = hashlib.sha256(f"{order_seed}:{participant_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def case_order(cases: list[AuthoredCase], order_seed: int, participant_id: str) -> list[str]:
    """The case ids in the order this participant reviews them.

    Args:
        cases: The corpus cases.
        order_seed: The experiment's frozen `order_seed`.
        participant_id: The participant's pseudonymous id.

    Returns:
        Every case id once: round r takes the r-th variant (after a per-group shuffle) of each
        group that still has one, with the groups in a freshly shuffled order each round.
    """
    rng = random.Random(participant_seed(order_seed, participant_id))
    by_group: dict[str, list[str]] = defaultdict(list)
    for case in sorted(cases, key=lambda c: c.case_id):
        by_group[case.group].append(case.case_id)
    for ids in by_group.values():
        rng.shuffle(ids)
    order: list[str] = []
    groups = sorted(by_group)
    for round_index in range(max((len(v) for v in by_group.values()), default=0)):
        rng.shuffle(groups)
        order += [by_group[g][round_index] for g in groups if round_index < len(by_group[g])]
    return order


# ------------------------------------------------------------------------------------------------
# AI recommendations: an earlier, finished run's configuration decisions, per case.
#
# The source run is named in the participant's frozen `recommendation` and pinned by its manifest
# hash. It is verified (manifest hash, ledger chain, finished) and graded with the same functions
# as any reviewer-track run, so a recommendation shown to a participant is exactly the outcome the
# report attributes to that configuration: a missing or invalid AI reply is shown as "no valid
# recommendation", never as a decision.


@dataclass(frozen=True)
class SourceRun:
    """A verified, graded AI run whose configurations can be paired with human trials."""

    run_dir: Path
    """The run folder."""
    manifest: Manifest
    """Its frozen manifest."""
    rows: dict[str, list[ConfigurationRow]]
    """Configuration name -> graded rows (every case x trial that finished)."""

    def decision(self, configuration: str, case_id: str, trial: int = 0) -> str | None:
        """The configuration's outcome on a case (`permit`/`deny`/`hold`/`missing`/`invalid`).

        Returns None when that trial is not in the run (not run).
        """
        for item in self.rows[configuration]:
            if item.row.case_id == case_id and item.row.trial == trial:
                return item.row.observed.value
        return None


def source_run_dir(spec: RecommendationSpec, base_dir: Path) -> Path:
    """The source run folder, relative paths resolved against the spec's folder."""
    path = Path(spec.run)
    return path if path.is_absolute() else (base_dir / path).resolve()


def load_source_run(
    spec: RecommendationSpec, human_manifest: Manifest, corpus: Corpus
) -> SourceRun:
    """Verify and grade the recommendation source run.

    Args:
        spec: The participant's frozen recommendation.
        human_manifest: The human run's manifest (its spec folder resolves a relative `run`;
            its hashed corpus files must equal the source run's, byte for byte).
        corpus: The corpus the human run pins.

    Raises:
        InputError: the folder is not a run, is another manifest, another corpus or lacks the
            configuration.
        CheckFailed: its ledger was altered or the run did not finish.
    """
    from trustbench.rtb.review._grading import configuration_rows, member_trials
    from trustbench.rtb.review._options import configurations

    run_dir = source_run_dir(spec, Path(human_manifest.base_dir))
    where = f"{run_dir} (recommendation source)"
    manifest = read_manifest(run_dir)
    if manifest.manifest_sha256 != spec.manifest_sha256:
        raise InputError(
            f"manifest sha256 {manifest.manifest_sha256[:12]}… is not the frozen "
            f"{spec.manifest_sha256[:12]}…",
            location=where,
        )
    if manifest.spec.track_id != "rtb/review":
        raise InputError(f"is a {manifest.spec.track_id} run, not rtb/review", location=where)
    if _corpus_files(manifest) != _corpus_files(human_manifest):
        raise InputError(
            f"reviewed corpus {manifest.corpus.version} at {manifest.corpus.root}, whose files "
            f"differ from the human run's ({human_manifest.corpus.version} at "
            f"{human_manifest.corpus.root})",
            location=where,
        )
    report = verify_run(run_dir)
    if not report.ok:
        raise CheckFailed(
            f"recommendation source is not a finished, intact run: {report.problems[0]}",
            location=where,
        )
    configs = {c.name: (c, members) for c, members in configurations(manifest.spec)}
    if spec.configuration not in configs:
        raise InputError(
            f"has no configuration {spec.configuration!r} (it has {sorted(configs)})",
            location=where,
        )
    # Only the human run's cases are paired: the source may have reviewed more of the corpus.
    graded = member_trials(manifest, read_ledger(run_dir), corpus, skip_other_cases=True)
    rows: dict[str, list[ConfigurationRow]] = {}
    for name, (configuration, members) in configs.items():
        trials, _ = configuration_rows(
            configuration, members, corpus, manifest.spec.trials_per_case, graded
        )
        rows[name] = list(trials)  # a human run's trials: few
    return SourceRun(run_dir=run_dir, manifest=manifest, rows=rows)


def _corpus_files(manifest: Manifest) -> dict[str, str]:
    return {f.name: f.sha256 for f in manifest.files if f.role == "corpus"}


# ------------------------------------------------------------------------------------------------
# The human session protocol of a frozen run: participants, case orders, recommendations.
#
# Everything here is read from the frozen manifest (the spec's `human` candidates and
# `human_protocol`) plus the corpus it pins and the recommendation source runs it names, so a
# served session cannot drift from what was frozen.


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
    time_limit_enforced: bool = False
    """Whether the participant's time limit is enforced (declared in `track_options.access`):
    past it the open case is recorded as the reviewer's hold."""
    max_submissions: int | None = None
    """Submissions allowed per case (refused ones included); None: no budget."""

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
    from trustbench.rtb.review._options import parse_options

    declared = parse_options(spec).access
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
                time_limit_enforced=candidate.name in declared,
                max_submissions=(
                    declared[candidate.name].max_submissions if candidate.name in declared else None
                ),
            )
        )
    return plans


# ------------------------------------------------------------------------------------------------
# The finding form's structured discrepancies, one per line, for policies whose grader reads them.
#
# A corpus policy may support a finding by structured discrepancies (`Discrepancy`: record, JSON
# pointer, proposed and evidence values; `CorpusPolicy.structured_discrepancies`), and its
# response schema then requires the list.
# A participant writes them as lines `RECORD_ID | /json/pointer | proposed value | evidence value`;
# a value is read as JSON when it parses (`14`, `"14"`, `["a", "b"]`, `null`) and as text
# otherwise, and an empty value is null. The list built from the lines goes into the reply as a
# model's would, so `validate_response` checks it exactly as it checks a model's.

FORMAT = "RECORD_ID | /json/pointer | proposed value | evidence value"
"""How one discrepancy line is written (shown beside the form field)."""


class DiscrepancyLineError(ValueError):
    """A discrepancy line that is not four `|`-separated parts (names the line)."""


def _value(text: str) -> Any:
    text = text.strip()
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_discrepancies(text: str) -> list[dict[str, Any]]:
    """The discrepancies a participant wrote, one per non-blank line.

    Raises:
        DiscrepancyLineError: a line without exactly four parts (its number and the format).
    """
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split("|")
        if len(parts) != 4:
            raise DiscrepancyLineError(
                f"discrepancy line {number} has {len(parts)} part(s); write {FORMAT}"
            )
        record_id, pointer, proposed, evidence = parts
        found.append(
            {
                "record_id": record_id.strip(),
                "field": pointer.strip(),
                "proposed_value": _value(proposed),
                "evidence_value": _value(evidence),
            }
        )
    return found


def discrepancy_lines(discrepancies: list[dict[str, Any]]) -> str:
    """The lines that `parse_discrepancies` reads back as `discrepancies` (values as JSON)."""
    return "\n".join(
        " | ".join(
            [
                str(d["record_id"]),
                str(d["field"]),
                json.dumps(d.get("proposed_value")),
                json.dumps(d.get("evidence_value")),
            ]
        )
        for d in discrepancies
    )


def finding_reply(form: dict[str, Any], *, structured_discrepancies: bool) -> str:
    """A posted finding form as the reply a model reviewer would send (canonical JSON).

    The one translation of the form, shared by the review app and the live review desk, so a
    person's answer goes through the reviewer track's `validate_response` like a model's.

    Raises:
        DiscrepancyLineError: A discrepancy line that cannot be read (when the policy asks).
    """
    response: dict[str, Any] = {
        "evaluation_id": form.get("evaluation_id"),
        "decision": form.get("decision"),
        "reason_codes": list(form.get("reason_codes") or []),
        "evidence_refs": list(form.get("evidence_refs") or []),
        "explanation": form.get("explanation") or "",
    }
    if structured_discrepancies:
        response["discrepancies"] = parse_discrepancies(form.get("discrepancies") or "")
    return canonical_json(response).decode("utf-8")


RESPONSE_KIND = "human_response"
"""`attempts.kind` of a participant's submitted form."""
BUDGET = "review_budget_exhausted"
"""Error class of a case whose declared submission budget ran out (the reviewer's hold)."""

APP_ENDPOINT = "trustbench-rtb-human-app"
"""`attempts.endpoint` of human responses (no network endpoint is involved)."""


@dataclass
class CaseClock:
    """The open case of a session: its evaluation id and active-time intervals."""

    case_id: str
    """The case being reviewed (grader-side; never sent to the page)."""
    evaluation_id: str
    """The id shown to the participant; the response must echo it."""
    shown_at: str
    """ISO time the case was first shown."""
    active_since: float | None
    """Epoch seconds the current active interval began; None while paused."""
    active_s: float = 0.0
    """Active seconds accumulated before `active_since`."""
    rejected: int = 0
    """Submissions refused by validation so far."""

    def time_on_task(self, now: float) -> float:
        """Active seconds so far."""
        return self.active_s + (now - self.active_since if self.active_since is not None else 0.0)


@dataclass
class Session:
    """One participant's session state."""

    plan: ParticipantPlan
    """Frozen protocol and order."""
    submitted: set[str] = field(default_factory=set)
    """Case ids already recorded as trials."""
    clock: CaseClock | None = None
    """The open case, if one has been shown and not submitted."""

    @property
    def position(self) -> int:
        """0-based position of the next case in the order (== cases submitted)."""
        return len(self.submitted)

    @property
    def next_case(self) -> str | None:
        """The next case id to review, or None when the session is finished."""
        return next((c for c in self.plan.order if c not in self.submitted), None)

    @property
    def paused(self) -> bool:
        """True while the open case is paused."""
        return self.clock is not None and self.clock.active_since is None


@dataclass(frozen=True)
class SubmitResult:
    """What happened to a submitted form."""

    recorded: bool
    """True when the response was recorded as the case's trial."""
    reason: str | None = None
    """Why it was not recorded (validation failure or a stale form)."""


class SessionStore:
    """Every participant's session, persisted through the ledger."""

    def __init__(
        self,
        ledger: Ledger,
        corpus: Corpus,
        plans: list[ParticipantPlan],
        contents: LedgerContents,
        recommendation_labels: dict[str, str],
        clock: Callable[[], float] = time.time,
    ) -> None:
        """Rebuild sessions from the ledger's rows.

        Args:
            ledger: The open ledger (this store is its only writer).
            corpus: The corpus the run pins.
            plans: Every participant's plan.
            contents: The ledger's rows at start (read before serving).
            recommendation_labels: Candidate -> how the paired AI configuration is named.
            clock: Epoch seconds now (time on task and the enforced limit read it; a test
                passes a fake one).
        """
        self._clock = clock
        self._ledger = ledger
        self._corpus = corpus
        self.structured_discrepancies = policy_for(corpus.policy_id).structured_discrepancies
        """Whether the corpus policy's replies carry structured discrepancies (the form asks)."""
        self.recommendation_labels = recommendation_labels
        self.sessions = {plan.candidate: Session(plan) for plan in plans}
        for trial in contents.trials:
            if trial["candidate"] in self.sessions:
                self.sessions[trial["candidate"]].submitted.add(trial["case_id"])
        for event in contents.events:
            self._replay(event["kind"], event["data"])

    def _replay(self, kind: str, data: Any) -> None:
        if not isinstance(data, dict) or data.get("candidate") not in self.sessions:
            return
        session = self.sessions[data["candidate"]]
        if data.get("case_id") in session.submitted:
            return
        at = float(data.get("at_epoch", 0.0))
        if kind == "human_case_shown":
            session.clock = CaseClock(data["case_id"], data["evaluation_id"], data["at"], at)
        elif session.clock is None or session.clock.case_id != data.get("case_id"):
            return
        elif kind == "human_paused" and session.clock.active_since is not None:
            session.clock.active_s += at - session.clock.active_since
            session.clock.active_since = None
        elif kind == "human_resumed" and session.clock.active_since is None:
            session.clock.active_since = at
        elif kind == "human_submission_rejected":
            session.clock.rejected += 1

    def _event(self, kind: str, data: dict[str, Any]) -> None:
        self._ledger.event(kind, data)
        self._replay(kind, data)

    def finished_count(self) -> int:
        """Trials recorded so far, all participants together."""
        return sum(len(s.submitted) for s in self.sessions.values())

    def open_case(self, candidate: str) -> tuple[CaseClock, CandidateInput] | None:
        """The case to show now (issuing its evaluation id the first time); None when finished."""
        from trustbench.rtb.corpus._export import new_evaluation_id, to_candidate_input

        session = self.sessions[candidate]
        case_id = session.next_case
        if case_id is None:
            return None
        if self.expire_overdue(candidate):
            return self.open_case(candidate)  # the next case, or None when that was the last
        if session.clock is None or session.clock.case_id != case_id:
            now = self._clock()
            self._event(
                "human_case_shown",
                {
                    "candidate": candidate,
                    "case_id": case_id,
                    "evaluation_id": new_evaluation_id(),
                    "at": utc_now(),
                    "at_epoch": now,
                },
            )
        clock = session.clock
        assert clock is not None
        return clock, to_candidate_input(self._corpus.case(case_id), clock.evaluation_id)

    def pause(self, candidate: str) -> None:
        """Stop the open case's clock (no-op when nothing is open or it is already paused)."""
        session = self.sessions[candidate]
        if self.expire_overdue(candidate):
            return
        if session.clock is not None and not session.paused:
            self._event(
                "human_paused",
                {
                    "candidate": candidate,
                    "case_id": session.clock.case_id,
                    "at_epoch": self._clock(),
                },
            )

    def resume(self, candidate: str) -> None:
        """Restart the open case's clock."""
        session = self.sessions[candidate]
        if session.clock is not None and session.paused:
            self._event(
                "human_resumed",
                {
                    "candidate": candidate,
                    "case_id": session.clock.case_id,
                    "at_epoch": self._clock(),
                },
            )

    def expire_overdue(self, candidate: str) -> bool:
        """Record the open case as the reviewer's hold when its enforced time limit has passed.

        Returns:
            True when a hold was recorded (the session moves on to its next case).
        """
        session = self.sessions[candidate]
        clock, plan = session.clock, session.plan
        if clock is None or not plan.time_limit_enforced or clock.case_id != session.next_case:
            return False
        now = self._clock()
        limit = plan.participant.time_limit_s
        if clock.time_on_task(now) <= limit:
            return False
        detail = f"time_limit: no finding within the declared {limit:g} s on task"
        self._record(session, clock, None, now, hold=("time_limit_exceeded", detail))
        return True

    def submit(self, candidate: str, form: dict[str, Any]) -> SubmitResult:
        """Validate a submitted form like any reviewer reply and record it as the case's trial.

        Args:
            candidate: The session's candidate name.
            form: `evaluation_id`, `decision`, `reason_codes` (list), `evidence_refs` (list),
                `explanation`, `discrepancies` (lines, read when the policy asks for them),
                exactly as posted.

        Returns:
            Recorded, or not with the validation reason (the form is shown again).
        """
        session = self.sessions[candidate]
        clock = session.clock
        if clock is None or session.paused or clock.case_id != session.next_case:
            return SubmitResult(False, "no case is open for review (resume the session first)")
        if form.get("evaluation_id") != clock.evaluation_id:
            return SubmitResult(False, "this form belongs to a case that is no longer open")
        if self.expire_overdue(candidate):
            limit = session.plan.participant.time_limit_s
            return SubmitResult(
                False, f"the declared time limit of {limit:g} s passed: the case was held"
            )
        try:
            raw = finding_reply(form, structured_discrepancies=self.structured_discrepancies)
        except DiscrepancyLineError as error:
            return SubmitResult(False, str(error))
        # The reply validator (jsonschema) loads with the first submission, not with the
        # package: `trustbench --help` imports it.
        from trustbench.rtb.corpus._export import to_candidate_input
        from trustbench.rtb.review._validation import validate_response

        case = self._corpus.case(clock.case_id)
        validated = validate_response(raw, to_candidate_input(case, clock.evaluation_id))
        if not validated.outcome.is_decision:
            reason = validated.invalid_reason or validated.outcome.value
            self._event(
                "human_submission_rejected",
                {"candidate": candidate, "case_id": clock.case_id, "reason": reason},
            )
            budget = session.plan.max_submissions
            if budget is not None and clock.rejected >= budget:
                detail = f"submissions: {budget} refused, the declared budget; last: {reason}"
                self._record(session, clock, None, self._clock(), hold=(BUDGET, detail))
                return SubmitResult(False, f"{reason}; the review budget is spent: case held")
            return SubmitResult(False, reason)
        self._record(session, clock, raw, self._clock())
        return SubmitResult(True)

    def _record(
        self,
        session: Session,
        clock: CaseClock,
        raw: str | None,
        now: float,
        hold: tuple[str, str] | None = None,
    ) -> None:
        """Record the case's trial: the participant's finding, or the reviewer's hold.

        `hold` (error class, detail) records a case past a declared limit, with no reply.
        """
        plan = session.plan
        key = TrialKey(clock.case_id, plan.candidate, 0)
        on_task = clock.time_on_task(now)
        limit = plan.participant.time_limit_s
        rec = plan.participant.recommendation
        shown = (
            {
                "configuration": rec.configuration,
                "run_manifest_sha256": rec.manifest_sha256,
                "outcome": plan.recommendations.get(clock.case_id),
            }
            if rec is not None and rec.visible
            else None
        )
        request = canonical_json(
            {"evaluation_id": clock.evaluation_id, "recommendation_shown": shown}
        )
        finished_at = utc_now()
        outcome = {
            "evaluation_id": clock.evaluation_id,
            "requested_model": None,
            "reply": raw,
            "reported_model": None,
            "participant": plan.participant.id,
            "position": session.position,
            "time_on_task_s": on_task,
            "time_limit_s": limit,
            "overran_time_limit": on_task > limit,
            "rejected_submissions": clock.rejected,
            "recommendation_shown": shown,
        }
        if hold is not None:
            outcome["review_budget_exhausted"] = hold[1]  # graded as the reviewer's hold
        error_class, detail = hold if hold is not None else (None, None)
        self._ledger.append_many(
            [
                (
                    "attempts",
                    {
                        "trial_id": key.trial_id,
                        "execution": 1,
                        "call_index": 0,
                        "attempt_index": 0,
                        "kind": RESPONSE_KIND,
                        "call": "review_form",
                        "started_at": clock.shown_at,
                        "request_digest": sha256_hex(request),
                        "request": request.decode("utf-8"),
                        "raw_response": raw,
                        "error_class": error_class,
                        "error_message": detail,
                        "latency_s": on_task,
                        "endpoint": APP_ENDPOINT,
                    },
                ),
                (
                    "trials",
                    {
                        "trial_id": key.trial_id,
                        "case_id": key.case_id,
                        "candidate": key.candidate,
                        "trial_index": 0,
                        "execution": 1,
                        "order_position": session.position,
                        "status": "completed",
                        "outcome": canonical_json(outcome).decode("utf-8"),
                        "error_class": error_class,
                        "error": detail,
                        "started_at": clock.shown_at,
                        "finished_at": finished_at,
                        "duration_s": on_task,
                        "attempts": 1,
                    },
                ),
            ]
        )
        self._ledger.anchor(force=True)  # human pace: anchor every recorded finding
        session.submitted.add(clock.case_id)
        session.clock = None
