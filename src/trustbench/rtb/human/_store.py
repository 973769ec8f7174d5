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

Time on task is the sum of the intervals during which the case was shown and not paused. The
clock cannot see a closed browser: such time counts as time on task until a pause.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from trustbench._canonical import canonical_json, sha256_hex
from trustbench.core import Ledger, LedgerContents, TrialKey, utc_now
from trustbench.rtb.human._discrepancies import DiscrepancyLineError, parse_discrepancies
from trustbench.rtb.human._protocol import ParticipantPlan
from trustbench.rtb.policy import policy_for

if TYPE_CHECKING:  # the corpus package loads with the run it serves (`--help` imports this)
    from trustbench.rtb.corpus._load import Corpus
    from trustbench.rtb.corpus._models import CandidateInput

RESPONSE_KIND = "human_response"
"""`attempts.kind` of a participant's submitted form."""
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
    ) -> None:
        """Rebuild sessions from the ledger's rows.

        Args:
            ledger: The open ledger (this store is its only writer).
            corpus: The corpus the run pins.
            plans: Every participant's plan.
            contents: The ledger's rows at start (read before serving).
            recommendation_labels: Candidate -> how the paired AI configuration is named.
        """
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
        if session.clock is None or session.clock.case_id != case_id:
            now = time.time()
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
        if session.clock is not None and not session.paused:
            self._event(
                "human_paused",
                {"candidate": candidate, "case_id": session.clock.case_id, "at_epoch": time.time()},
            )

    def resume(self, candidate: str) -> None:
        """Restart the open case's clock."""
        session = self.sessions[candidate]
        if session.clock is not None and session.paused:
            self._event(
                "human_resumed",
                {"candidate": candidate, "case_id": session.clock.case_id, "at_epoch": time.time()},
            )

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
        response: dict[str, Any] = {
            "evaluation_id": form.get("evaluation_id"),
            "decision": form.get("decision"),
            "reason_codes": list(form.get("reason_codes") or []),
            "evidence_refs": list(form.get("evidence_refs") or []),
            "explanation": form.get("explanation") or "",
        }
        if self.structured_discrepancies:
            try:
                response["discrepancies"] = parse_discrepancies(form.get("discrepancies") or "")
            except DiscrepancyLineError as error:
                return SubmitResult(False, str(error))
        # The reply validator (jsonschema) loads with the first submission, not with the
        # package: `trustbench --help` imports it.
        from trustbench.rtb.corpus._export import to_candidate_input
        from trustbench.rtb.review._validation import validate_response

        raw = canonical_json(response).decode("utf-8")
        case = self._corpus.case(clock.case_id)
        validated = validate_response(raw, to_candidate_input(case, clock.evaluation_id))
        if not validated.outcome.is_decision:
            reason = validated.invalid_reason or validated.outcome.value
            self._event(
                "human_submission_rejected",
                {"candidate": candidate, "case_id": clock.case_id, "reason": reason},
            )
            return SubmitResult(False, reason)
        self._record(session, clock, raw, time.time())
        return SubmitResult(True)

    def _record(self, session: Session, clock: CaseClock, raw: str, now: float) -> None:
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
