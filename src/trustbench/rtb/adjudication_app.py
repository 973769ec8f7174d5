"""`trustbench rtb adjudicate serve`: domain reviewers review reference decisions in a local app.

The spec asks that a qualified reviewer establish, for each case, which rule governs, which
facts are available and what evidence supports the decision, and that another reviewer examine
consequential cases without seeing candidate verdicts first. This app is where they do it,
on the same stack and guards as `rtb human serve` (`trustbench._local_app`): bound to
127.0.0.1 only, one access token per person, every request's `Host` checked, every form post
checked to come from the app's own page (its CSRF guard), a form that cannot be parsed
answered 400.

What a reviewer sees is built from the candidate input alone (`case_view`, the page a
participant of `rtb human serve` reads, under a fresh evaluation id, never the case id) plus
the review prompt with its policy text: never the label, the variant, a candidate's verdict or
another reviewer's answer. Their declared qualification comes from the roster given at start,
not from the page. Each submission goes into the adjudication record through `record_reviews`,
the path `rtb adjudicate import` takes, so the same things are refused with the same words (a
case reviewed already by this reviewer, a case outside the frozen protocol) and nothing
recorded is rewritten.

An adjudicator (a roster entry under `adjudicators`) is served, one at a time, the cases the
protocol's `adjudicated` rule sends to adjudication: every review in, not all agreeing with
the label. They see the case as a reviewer does plus each review's decision and grounds (still
no label and no candidate verdict) and record an `adjudication` entry in the same chain
(`record_adjudication`); `rtb adjudicate apply` then writes the case `reviewed` when the
adjudication upholds the label, `disputed` when it does not or none was made.

Routes: `GET /`, `GET /s/<token>` (the next case, or the page saying none is left) and
`POST /s/<token>/submit`. Nothing else is served.
"""

from __future__ import annotations

import random
import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from aiohttp import web
from multidict import MultiDictProxy
from pydantic import BaseModel, Field, ValidationError

from trustbench._canonical import loads_refusing_duplicate_keys, read_input_file, sha256_hex
from trustbench._docstrings import documented
from trustbench._local_app import (
    ServedFolder,
    back_to_session,
    check_origin,
    html,
    new_app,
    page_renderer,
    posted_form,
    session_owner,
)
from trustbench.core import load_private_key
from trustbench.errors import InputError
from trustbench.rtb.adjudication import (
    DECISIONS,
    AdjudicationRecord,
    Qualification,
    ReferenceReview,
    awaiting_adjudication,
    first_error,
    loaded_corpus,
    rationale_of,
    read_record,
    record_adjudication,
    record_reviews,
)
from trustbench.rtb.corpus import new_evaluation_id, to_candidate_input
from trustbench.rtb.human._app import case_view

TITLE = "trustbench reference review"
"""Title of every page (it names no case, reviewer or label)."""
SOURCE = "adjudicate-serve"
"""How the record names where an entry submitted here came from (`adjudicate-serve:row`)."""

render = page_renderer("trustbench.rtb.human", TITLE)
"""The human app's templates (`case_input.html.j2` is the case both apps show)."""

Role = Literal["reviewer", "adjudicator"]


class Roster(BaseModel):
    """Who may open the app (`--reviewers FILE`, JSON): each declares their qualification once."""

    model_config = documented(extra="forbid", frozen=True)

    reviewers: list[Qualification] = Field(default_factory=list)
    """Domain reviewers: each reviews the protocol's cases blind."""
    adjudicators: list[Qualification] = Field(default_factory=list)
    """Adjudicators: each settles disagreements under the `adjudicated` rule."""

    def roles(self) -> dict[str, tuple[Role, Qualification]]:
        """Reviewer id -> role and qualification (an id in both lists is refused when read)."""
        found: dict[str, tuple[Role, Qualification]] = {}
        for q in self.reviewers:
            found[q.reviewer_id] = ("reviewer", q)
        for q in self.adjudicators:
            found[q.reviewer_id] = ("adjudicator", q)
        return found


def read_roster(path: Path) -> Roster:
    """The roster file: `{"reviewers": [{reviewer_id, role, years}], "adjudicators": [...]}`.

    Raises:
        InputError: naming the file and field: not JSON, a qualification that does not
            validate, an id given twice, nobody at all.
    """
    try:
        roster = Roster.model_validate(loads_refusing_duplicate_keys(read_input_file(path)))
    except ValidationError as error:
        raise InputError(first_error(error), location=str(path)) from None
    except ValueError as error:
        raise InputError(f"not JSON ({first_error(error)})", location=str(path)) from None
    ids = [q.reviewer_id for q in [*roster.reviewers, *roster.adjudicators]]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise InputError(f"reviewer id(s) listed twice: {', '.join(twice)}", location=str(path))
    if not ids:
        raise InputError("no reviewers and no adjudicators", location=str(path))
    return roster


@dataclass
class Desk:
    """One person's place in the app: role, declared qualification, the ids of cases shown."""

    role: Role
    qualification: Qualification
    evaluation_ids: dict[str, str] = field(default_factory=dict)
    """Case id -> the evaluation id its page carries (fresh per serve, from the CSPRNG)."""

    def case_of(self, evaluation_id: str) -> str | None:
        """The case a form's evaluation id was issued for (to this person), or None."""
        return next((c for c, e in self.evaluation_ids.items() if e == evaluation_id), None)


@dataclass
class ReviewDesks:
    """The record, the corpus it vouches for, and each person's desk."""

    record_path: Path
    loaded: Any
    """The corpus (`loaded_corpus`): its cases, labels (never shown) and review prompt."""
    desks: dict[str, Desk]
    sign_key: Path | None = None

    def record(self) -> AdjudicationRecord:
        """The record as it is now, verified whole (another writer may have appended)."""
        return read_record(self.record_path)

    def next_case(self, who: str) -> str | None:
        """The case to show `who` next (None: nothing left for them).

        A reviewer's next unreviewed case, in an order of their own; an adjudicator's next
        disagreement awaiting adjudication that they did not review.
        """
        record, desk = self.record(), self.desks[who]
        if desk.role == "adjudicator":
            by_case = record.reviews_by_case()
            return next(
                (
                    case_id
                    for case_id in awaiting_adjudication(record, self.loaded)
                    if who not in {r.qualification.reviewer_id for r in by_case[case_id]}
                ),
                None,
            )
        done = {r.review.case_id for r in record.reviews() if r.qualification.reviewer_id == who}
        order = list(record.protocol.cases)
        # Each reviewer meets the cases in an order of their own (fixed by the protocol's hash
        # and their id, so a reload shows the same case): two reviewers never share a sequence.
        random.Random(sha256_hex(f"{record.entries[0].hash}:{who}".encode())).shuffle(order)
        return next((case_id for case_id in order if case_id not in done), None)

    def candidate_input(self, who: str, case_id: str) -> BaseModel:
        """The case as a candidate receives it, under this person's evaluation id for it."""
        desk = self.desks[who]
        if case_id not in desk.evaluation_ids:
            desk.evaluation_ids[case_id] = new_evaluation_id()
        case = next(c for c in self.loaded.cases if c.case_id == case_id)
        return to_candidate_input(case, desk.evaluation_ids[case_id])

    def record_ids(self, who: str, case_id: str) -> set[str]:
        """The evidence record ids of a case: the facts a review may rely on."""
        shown = self.candidate_input(who, case_id).model_dump(mode="json")
        return {record["record_id"] for record in shown["evidence"]}

    def progress(self, who: str) -> str:
        """`case k of n` for a reviewer; the count left for an adjudicator."""
        record, desk = self.record(), self.desks[who]
        if desk.role == "adjudicator":
            return "disagreements to adjudicate"
        done = sum(r.qualification.reviewer_id == who for r in record.reviews())
        return f"case {done + 1} of {len(record.protocol.cases)}"

    def disagreeing_reviews(self, case_id: str) -> list[dict[str, Any]]:
        """What an adjudicator reads of each review of a case (never the label)."""
        return [rationale_of(r) for r in self.record().reviews_by_case()[case_id]]

    def submit(self, who: str, case_id: str, review: ReferenceReview) -> None:
        """Record a review (reviewer) or an adjudication (adjudicator) in the chain.

        Raises:
            InputError: whatever `record_reviews` / `record_adjudication` refuse.
        """
        record, desk = self.record(), self.desks[who]
        if desk.role == "adjudicator":
            record_adjudication(
                record, self.loaded, SOURCE, desk.qualification, review, self.sign_key
            )
            return
        row = record.protocol.cases.index(case_id) + 1
        # Blind by construction: a reviewer's page shows the case and the policy, never the
        # label, a candidate's verdict or another review (the leak scan checks it).
        record_reviews(
            record,
            self.loaded,
            SOURCE,
            desk.qualification,
            [(row, review)],
            self.sign_key,
            blind=True,
        )


# ------------------------------------------------------------------------------------------------
# Handlers.

DESKS_KEY: web.AppKey[ReviewDesks] = web.AppKey("desks", ReviewDesks)
"""Where the app keeps the record, the corpus and the desks."""

_EMPTY_FORM: dict[str, Any] = {
    "decision": None,
    "governing_rules": "",
    "facts_relied_on": [],
    "evidence": "",
    "confidence": "",
    "notes": "",
}


def _person(request: web.Request) -> str:
    """Whose token is in the URL (constant-time comparison), or 403 with no content."""
    return session_owner(
        request,
        lambda: render(
            "landing.html.j2",
            heading="Unknown link",
            message="This link does not open a review. Use the link you were given.",
        ),
    )


def _page(
    request: web.Request, who: str, *, error: str | None = None, form: dict[str, Any] | None = None
) -> web.Response:
    desks = request.app[DESKS_KEY]
    case_id = desks.next_case(who)
    role = desks.desks[who].role
    if case_id is None:
        heading, message = (
            ("Nothing to adjudicate", "No disagreement is waiting for an adjudicator. Come back "
             "once the reviews are in.")
            if role == "adjudicator"
            else ("All cases reviewed", "Every case of the protocol has your review; it is "
                  "recorded. You can close this window.")
        )  # fmt: skip
        return html(render("landing.html.j2", heading=heading, message=message))
    return html(
        render(
            "adjudicate.html.j2",
            **case_view(desks.candidate_input(who, case_id)),
            base=f"/s/{request.match_info['token']}",
            prompt=desks.loaded.review_prompt,
            progress=desks.progress(who),
            who=f"{role} {desks.desks[who].qualification.text()}",
            reviews=desks.disagreeing_reviews(case_id) if role == "adjudicator" else [],
            decisions=list(DECISIONS),
            error=error,
            form=form or _EMPTY_FORM,
        )
    )


def _form_fields(data: MultiDictProxy[str]) -> dict[str, Any]:
    """The posted form's fields as the page shows them back on a refusal."""
    return {
        "evaluation_id": data.get("evaluation_id", ""),
        "decision": data.get("decision"),
        "governing_rules": data.get("governing_rules", ""),
        "facts_relied_on": data.getall("facts_relied_on", []),
        "evidence": data.get("evidence", ""),
        "confidence": data.get("confidence", "").strip(),
        "notes": data.get("notes", ""),
    }


def review_of(case_id: str, form: dict[str, Any], record_ids: set[str]) -> ReferenceReview:
    """The review a form states, for the case its evaluation id was issued for.

    Rules are the policy text's rule numbers, separated by `;`, `,` or spaces.

    Raises:
        InputError: no decision, a confidence that is no number in 0-1, a fact that is not a
            record of the case, or another field the review model refuses.
    """
    unknown = sorted(set(form["facts_relied_on"]) - record_ids)
    if unknown:
        raise InputError(f"facts relied on: {', '.join(unknown)} is not a record of this case")
    rules = re.split(r"[;,\s]+", form["governing_rules"])
    try:
        return ReferenceReview(
            case_id=case_id,
            decision=form["decision"],
            governing_rules=[rule for rule in rules if rule],
            facts_relied_on=list(form["facts_relied_on"]),
            evidence=form["evidence"].strip(),
            confidence=float(form["confidence"]) if form["confidence"] else None,
            notes=form["notes"].strip(),
        )
    except ValidationError as error:
        raise InputError(first_error(error)) from None
    except ValueError as error:  # the only other: a confidence that is no number
        raise InputError(f"confidence: {error}") from None


async def _landing(request: web.Request) -> web.Response:
    return html(
        render(
            "landing.html.j2",
            heading="Reference review",
            message="Open the personal link you were given.",
        )
    )


async def _show(request: web.Request) -> web.Response:
    return _page(request, _person(request))


async def _submit(request: web.Request) -> web.Response:
    who = _person(request)
    check_origin(request)
    form = _form_fields(await posted_form(request))
    desks = request.app[DESKS_KEY]
    case_id = desks.desks[who].case_of(form["evaluation_id"])
    if case_id is None:
        error = "this form is for no case open to you; the page now shows your next case"
        return _page(request, who, error=error)
    try:
        review = review_of(case_id, form, desks.record_ids(who, case_id))
        desks.submit(who, case_id, review)
    except InputError as refused:
        # The form comes back filled in only on the case it was for (a stale form's case may
        # be done, and the page then shows the next one).
        same_case = desks.next_case(who) == case_id
        return _page(request, who, error=str(refused), form=form if same_case else None)
    raise back_to_session(request)


def build_app(desks: ReviewDesks, tokens: dict[str, str]) -> web.Application:
    """The app over `desks`; `tokens` maps each access token to its reviewer id."""
    app = new_app(tokens, _landing, _show)
    app[DESKS_KEY] = desks
    app.router.add_post("/s/{token}/submit", _submit)
    return app


# ------------------------------------------------------------------------------------------------
# Open a record for serving.


@dataclass(kw_only=True)
class AdjudicationServer(ServedFolder):
    """A record open for serving (use as a context manager).

    Opening verifies the record, checks the corpus against it and issues one fresh token per
    person on the roster, under the lock of the record's folder.
    """

    record_path: Path
    """The adjudication record."""
    roster_path: Path
    """The roster file (`read_roster`)."""
    corpus: Path | None = None
    """The corpus folder when not where the protocol names it."""
    sign_key: Path | None = None
    """Ed25519 private key to sign each entry with."""
    desks: ReviewDesks | None = None
    """The desks (set while open)."""

    @property
    def served_folder(self) -> Path:
        """The record's folder: one server at a time writes a record."""
        return self.record_path.resolve().parent

    def _open(self) -> None:
        if self.sign_key is not None:
            load_private_key(self.sign_key)  # a bad key is refused before anyone is served
        roster = read_roster(self.roster_path)
        record = read_record(self.record_path)
        rule = record.protocol.adjudication_rule
        if roster.adjudicators and rule != "adjudicated":
            raise InputError(
                f"adjudicators are listed, but the protocol's rule is {rule}: it settles "
                "disagreements itself and none goes to an adjudicator (freeze a protocol with "
                "--rule adjudicated, or list reviewers only)",
                location=str(self.roster_path),
            )
        loaded = loaded_corpus(record, self.corpus)
        self.desks = ReviewDesks(
            record_path=self.record_path,
            loaded=loaded,
            desks={who: Desk(role, q) for who, (role, q) in roster.roles().items()},
            sign_key=self.sign_key,
        )
        self.tokens = {secrets.token_urlsafe(24): who for who in self.desks.desks}
        self.app = build_app(self.desks, self.tokens)


def open_adjudication(
    record_path: Path, roster_path: Path, corpus: Path | None = None, sign_key: Path | None = None
) -> AdjudicationServer:
    """An `AdjudicationServer` (enter it to open; exit to release the folder's lock)."""
    return AdjudicationServer(
        record_path=Path(record_path),
        roster_path=Path(roster_path),
        corpus=corpus,
        sign_key=sign_key,
    )
