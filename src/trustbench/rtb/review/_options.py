"""The reviewer track's `[track_options]` and its configurations (built at analysis time).

Every spec candidate is a reviewer and becomes a `single` configuration; `unchecked` (no review,
every proposal proceeds) is always added as the baseline; chains are declared:

    [track_options]
    chains = [{ name = "policy+llm", members = ["reference-policy", "llm"] }]

Each candidate reviews under a declared information condition (`access`, default `packet`):

    [track_options.access.llm-tools]
    information = "tools"          # the proposal only; evidence read through read-only tools
    tools = ["read_resource", "list_approvals", "read_change_records"]
    max_tool_calls = 8             # review budget; one call more is the reviewer's hold
    time_limit_s = 60.0            # wall seconds for the whole review; past it, a hold

A chain's trial k on case c pairs its members' own trials k on case c. Members review
independently (neither sees the other's reply), so the pair is a real joint decision of two
independent reviews, and shared misses stay countable.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field, ValidationError

from trustbench._docstrings import documented
from trustbench.core import (
    CandidateSpec,
    ExperimentSpec,
    ParticipantSpec,
    RecommendationSpec,
    read_manifest,
    verify_run,
)
from trustbench.errors import CheckFailed, InputError
from trustbench.rtb.review._extraction import AnswerExtraction

if TYPE_CHECKING:
    from trustbench.rtb.review._chain import MemberIdentity, ReviewConfiguration


UNCHECKED = "unchecked"
"""Name of the baseline configuration (no reviewer)."""


class ChainOption(BaseModel):
    """One declared chain: its members must all permit for the chain to permit."""

    model_config = documented(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:+-]*$")
    """Configuration name used in the report and the gates."""
    members: list[str] = Field(min_length=2, max_length=2)
    """Candidate names in review order (exactly two, so the chain conditionals
    P(second approves | prohibited, first approves) are defined)."""


InformationCondition = Literal["packet", "tools"]
"""What a reviewer is given: the fixed evidence `packet`, or the proposal and read-only `tools`
over the case's authoritative records (the spec's "Keep Information Access Visible")."""

RECORD_TOOL_NAMES: tuple[str, ...] = ("read_resource", "list_approvals", "read_change_records")
"""The read-only tools a `tools` reviewer may be given: the workflow track's read tools by name."""


class ReviewerAccess(BaseModel):
    """One candidate's declared information condition, tool set, review budget and time limit.

    Declared per candidate (a configuration of its own), frozen with the spec and printed in the
    report, so a comparison never credits better access to better reasoning unseen.
    """

    model_config = documented(extra="forbid", frozen=True)

    information: InformationCondition = "packet"
    """`packet` (the fixed evidence packet, one call) or `tools` (the proposal only; the reviewer
    retrieves the evidence itself, every tool call a ledger attempt)."""
    tools: tuple[Literal["read_resource", "list_approvals", "read_change_records"], ...] = (
        RECORD_TOOL_NAMES
    )
    """The read-only tools offered under `tools` (ignored under `packet`)."""
    max_tool_calls: int = Field(default=8, ge=1, le=200)
    """Review budget under `tools`: a tool call beyond it ends the review as the reviewer's
    hold (recorded as `review_budget_exhausted`)."""
    time_limit_s: float | None = Field(default=120.0, gt=0)
    """Wall seconds for the whole review under `tools` (model turns and tool calls); past it
    the review ends as the reviewer's hold. None: no limit beyond the trial's. For a human
    reviewer: the time on task per case, enforced (it must equal the participant's declared
    `time_limit_s`); a case not answered within it is the reviewer's hold
    (`time_limit_exceeded`), never an approval."""
    max_submissions: int | None = Field(default=None, ge=1, le=100)
    """A human reviewer's review budget: findings submitted for one case, those the form
    refuses included; when the last one allowed is refused the case is the reviewer's hold
    (`review_budget_exhausted`). None: no budget. Human reviewers only (a model gets one
    reply)."""

    def describe(self) -> str:
        """The condition in words, as the report prints it."""
        if self.information == "packet":
            return "packet (the fixed evidence packet)"
        limit = "no time limit" if self.time_limit_s is None else f"{self.time_limit_s:g} s"
        return f"tools ({', '.join(self.tools)}; at most {self.max_tool_calls} tool calls; {limit})"

    def declared_limits(self) -> str:
        """A model reviewer's declared time limit and review budget, as the report prints them.

        Under `packet` a model reviewer makes one call, limited by the spec's `timeout_s`.
        """
        if self.information == "packet":
            return "one reply per case (the spec's timeout_s per call)"
        limit = "no time limit" if self.time_limit_s is None else f"{self.time_limit_s:g} s"
        return f"review budget {self.max_tool_calls} tool calls; time limit {limit} per review"


def human_limits(access: ReviewerAccess | None, participant: ParticipantSpec) -> str:
    """A human reviewer's declared time limit, tool set and review budget, as printed.

    Declared in `track_options.access.<name>`, the limit is enforced; without it the
    participant's limit is advisory (overruns recorded, the finding kept), as before.
    """
    tools = ", ".join(participant.permitted_tools) or "none beyond the review page"
    if access is None:
        limit = f"time limit {participant.time_limit_s:g} s per case (advisory, not enforced)"
        budget = "no review budget"
    else:
        limit = (
            f"time limit {participant.time_limit_s:g} s per case (enforced: past it the case is "
            "the reviewer's hold)"
        )
        budget = (
            "no review budget"
            if access.max_submissions is None
            else f"review budget {access.max_submissions} submission(s) per case"
        )
    return f"{limit}; tools: {tools}; {budget}"


PACKET = ReviewerAccess()
"""The default condition: the fixed evidence packet."""


class ReviewTrackOptions(BaseModel):
    """`[track_options]` of an `rtb/review` experiment."""

    model_config = documented(extra="forbid", frozen=True)

    chains: list[ChainOption] = Field(default_factory=list)
    """Declared chains of two candidates."""
    cases: list[str] | None = Field(default=None, min_length=1)
    """Run only these cases: case ids or shell-style patterns (`dns_changes-*`), each of which
    must match at least one case. Frozen with the spec, so a quick check on a few cases is its
    own declared experiment, never a silently partial one. None runs every case."""
    answer_extraction: AnswerExtraction = "strict"
    """How the answer is taken out of a reply (`strict`, `fenced`, `first_json_object`,
    `final_json_object`, `structured_output`; see `trustbench.rtb.review._extraction`; for a
    chat model, especially one that reasons before answering, `final_json_object`). Frozen
    with the spec, stated in the prompt, recorded with every trial, applied alike to every
    candidate."""
    access: dict[str, ReviewerAccess] = Field(default_factory=dict)
    """Candidate name -> its information condition; a candidate not named reviews the packet."""
    heldout_reason: str = ""
    """Why a sealed held-out corpus is frozen past its declared exposure budget (required
    then; recorded in the set's exposure log and printed by `freeze` and `report`)."""


_SHELL_CHARS = frozenset("*?[")


def select_cases(case_ids: list[str], patterns: list[str] | None) -> list[str]:
    """The case ids matching any of `patterns` (all of them for None), in corpus order.

    Raises:
        InputError: A pattern matches no case (a typo must not silently shrink the run).
    """
    if patterns is None:
        return list(case_ids)
    known = set(case_ids)
    # A pattern without `*`, `?` or `[` matches exactly itself: a set lookup, not a scan (a quick
    # check naming 50 case ids cost 6,100 fnmatch calls, twice, at every run's start).
    exact = {p for p in patterns if not _SHELL_CHARS & set(p)}
    shells = [p for p in patterns if p not in exact]
    for pattern in patterns:
        if pattern in exact:
            matched = pattern in known
        else:
            matched = any(fnmatch.fnmatchcase(c, pattern) for c in case_ids)
        if not matched:
            raise InputError(
                f"{pattern!r} matches no case of the corpus", location="track_options/cases"
            )
    return [c for c in case_ids if c in exact or any(fnmatch.fnmatchcase(c, p) for p in shells)]


def parse_options(spec: ExperimentSpec) -> ReviewTrackOptions:
    """Validate `track_options` against the spec's candidates.

    Raises:
        InputError: naming the offending `track_options` field.
    """
    try:
        options = ReviewTrackOptions.model_validate(spec.track_options)
    except ValidationError as error:
        first = error.errors()[0]
        pointer = "/".join(str(part) for part in first["loc"])
        raise InputError(first["msg"], location=f"track_options/{pointer}") from None
    names = {candidate.name for candidate in spec.candidates}
    taken = set(names) | {UNCHECKED}
    for index, chain in enumerate(options.chains):
        where = f"track_options/chains/{index}"
        if chain.name in taken:
            raise InputError(f"chain name {chain.name!r} is already used", location=f"{where}/name")
        taken.add(chain.name)
        for member in chain.members:
            if member not in names:
                raise InputError(f"unknown candidate {member!r}", location=f"{where}/members")
        if len(set(chain.members)) != len(chain.members):
            raise InputError("a chain needs two different candidates", location=f"{where}/members")
    _check_access(spec, options)
    return options


TOOL_KINDS = frozenset({"openai_chat", "anthropic_messages"})
"""Candidate kinds whose provider sends tools and returns tool calls."""


def _check_access(spec: ExperimentSpec, options: ReviewTrackOptions) -> None:
    """Refuse access declared for an unknown candidate, or `tools` for one that cannot call tools.

    An in-process reviewer answers one message pair (`chat_responder` has no tool interface)
    and a person reviews through the human app: neither can work a tool loop, so declaring
    `tools` for them would freeze a condition the run could not honour.
    """
    by_name = {candidate.name: candidate for candidate in spec.candidates}
    for name, access in options.access.items():
        where = f"track_options/access/{name}"
        if name not in by_name:
            raise InputError(f"unknown candidate {name!r}", location=where)
        kind = by_name[name].kind
        if access.information == "tools" and kind not in TOOL_KINDS:
            raise InputError(
                f'information = "tools" needs a candidate that can call tools '
                f"({', '.join(sorted(TOOL_KINDS))}); candidate {name!r} is kind "
                f"{kind!r}, which has no tool interface",
                location=f"{where}/information",
            )
        check_human_access(where, by_name[name], access)


def check_human_access(where: str, candidate: CandidateSpec, access: ReviewerAccess) -> None:
    """A human's declared limits are one time limit (the participant's) and a submission budget.

    Raises:
        InputError: `max_submissions` for a model, or a human's time limit that differs from
            (or leaves out) the participant's declared `time_limit_s`.
    """
    participant = candidate.participant
    if participant is None:
        if access.max_submissions is not None:
            raise InputError(
                f"max_submissions is a human reviewer's budget; candidate {candidate.name!r} "
                f"is kind {candidate.kind!r}, which gets one reply",
                location=f"{where}/max_submissions",
            )
        return
    if access.time_limit_s != participant.time_limit_s:
        raise InputError(
            f"the enforced time limit ({access.time_limit_s}) must equal participant "
            f"{participant.id!r}'s declared time_limit_s ({participant.time_limit_s:g}): declare "
            "one limit",
            location=f"{where}/time_limit_s",
        )


def access_of(options: ReviewTrackOptions, candidate: str) -> ReviewerAccess:
    """A candidate's declared information condition (`packet` when it declares none)."""
    return options.access.get(candidate, PACKET)


def information_label(options: ReviewTrackOptions, members: list[str]) -> str:
    """A configuration's information condition, as the report labels it.

    `packet`, `tools`, `packet+tools` for a chain mixing them, or `none` for the unchecked
    baseline (no reviewer reads anything).
    """
    if not members:
        return "none"
    return "+".join(dict.fromkeys(access_of(options, member).information for member in members))


ACCESS_VARIABLE = "information access differs: packet vs tools; same model"
"""How a paired comparison of one model under both conditions names what it varies."""


def access_pairing(
    spec: ExperimentSpec, first: list[str], second: list[str]
) -> tuple[bool, str | None]:
    """Whether two configurations may share a paired comparison, and what it then varies.

    The spec's "Keep Information Access Visible": better access is an architectural advantage,
    not better reasoning, unless an experiment isolates it. So a `packet` configuration and a
    `tools` one are paired only when both are single reviewers of the same model (same kind,
    requested model and endpoint): access is then the one variable, and named as such.

    Args:
        spec: The experiment spec (candidates and their declared access).
        first: The first configuration's member candidate names (empty for the baseline).
        second: The second configuration's.

    Returns:
        `(comparable, note)`: the note names the variable, or why the pair is withheld.
    """
    options = parse_options(spec)
    labels = (information_label(options, first), information_label(options, second))
    if "none" in labels or labels[0] == labels[1]:
        return True, None
    by_name = {candidate.name: candidate for candidate in spec.candidates}
    if len(first) == len(second) == 1 and first[0] in by_name and second[0] in by_name:
        a, b = by_name[first[0]], by_name[second[0]]
        if a.model is not None and (a.kind, a.model, a.base_url) == (b.kind, b.model, b.base_url):
            return True, ACCESS_VARIABLE
    return False, (
        f"not compared: information access differs ({labels[0]} vs {labels[1]}) and the models "
        "differ too, so a difference would not isolate either (run one model under both "
        "conditions to measure access)"
    )


def member_identity(candidate: CandidateSpec) -> MemberIdentity:
    """A candidate's identity as a chain member (requested model; provider from its kind)."""
    from trustbench.rtb.review._chain import MemberIdentity

    if candidate.participant is not None:
        # A person is named by pseudonym, team and workflow: never as "humans" in general.
        person = candidate.participant
        return MemberIdentity(
            reviewer=f"participant {person.id} ({person.team}; {person.workflow})",
            provider="human",
        )
    if candidate.kind == "inprocess":
        reviewer: Any = candidate.settings.get("reviewer", candidate.name)
        return MemberIdentity(reviewer=str(reviewer))
    provider = (
        candidate.kind if candidate.base_url is None else f"{candidate.kind}@{candidate.base_url}"
    )
    return MemberIdentity(reviewer=candidate.name, provider=provider, model=candidate.model)


def configurations(spec: ExperimentSpec) -> list[tuple[ReviewConfiguration, list[str]]]:
    """Every configuration of the experiment with its member candidate names, in report order.

    Returns:
        `unchecked` first, then one `single` per candidate, then the declared chains.
    """
    from trustbench.rtb.review._chain import ConfigurationKind, ReviewConfiguration

    options = parse_options(spec)
    by_name = {candidate.name: candidate for candidate in spec.candidates}
    result: list[tuple[ReviewConfiguration, list[str]]] = [
        (ReviewConfiguration(name=UNCHECKED, kind=ConfigurationKind.UNCHECKED), [])
    ]
    for candidate in spec.candidates:
        single = ReviewConfiguration(
            name=candidate.name,
            kind=ConfigurationKind.SINGLE,
            members=(member_identity(candidate),),
        )
        result.append((single, [candidate.name]))
    for chain in options.chains:
        configuration = ReviewConfiguration(
            name=chain.name,
            kind=ConfigurationKind.CHAIN,
            members=tuple(member_identity(by_name[m]) for m in chain.members),
        )
        result.append((configuration, list(chain.members)))
    return result


# ------------------------------------------------------------------------------------------------
# Freeze-time checks of a human participant's recommendation source run.
#
# Core's `check_references` proves the named folder holds the pinned manifest; only this track
# knows what else a source must be. docs/human-review.md promises a *finished* run that has the
# named configuration: a configuration the run lacks, or a run of which only part was run (a
# `--limit`, an interruption), froze without complaint and failed only when a participant was
# served, or paired the participant with decisions on some cases and "not run" on the rest.


def check_recommendation_sources(spec: ExperimentSpec, base_dir: Path) -> None:
    """Every participant's recommendation source is finished, intact and has its configuration.

    Raises:
        InputError: naming the `recommendation` field of the first participant whose source
            lacks the configuration, or is unfinished, interrupted or altered.
    """
    for index, candidate in enumerate(spec.candidates):
        participant = candidate.participant
        if participant is None or participant.recommendation is None:
            continue
        where = f"/candidates/{index}/participant/recommendation"
        problem = source_problem(participant.recommendation, base_dir)
        if problem is not None:
            field, text = problem
            raise InputError(text, location=f"{where}/{field}")


def source_problem(spec: RecommendationSpec, base_dir: Path) -> tuple[str, str] | None:
    """`(field, why)` when the source run cannot pair with a participant, else None.

    The configuration is checked first (it needs only the manifest); then the ledger must be
    intact, signed off and hold a finished row for every planned trial.
    """
    folder = Path(spec.run) if Path(spec.run).is_absolute() else base_dir / spec.run
    names = sorted(c.name for c, _ in configurations(read_manifest(folder).spec))
    if spec.configuration not in names:
        return "configuration", (
            f"run {spec.run!r} has no configuration {spec.configuration!r} (it has: "
            f"{', '.join(names)})"
        )
    try:
        report = verify_run(folder)
    except (InputError, CheckFailed) as error:
        return "run", f"run {spec.run!r} is not a finished run: {error.message}"
    if not report.ok:
        return "run", f"run {spec.run!r} is not a finished, intact run: {report.problems[0]}"
    if report.finished_trials < report.planned_trials:
        return "run", (
            f"run {spec.run!r} is not finished: {report.finished_trials} of "
            f"{report.planned_trials} planned trials ran (finish it with `trustbench run`)"
        )
    return None
