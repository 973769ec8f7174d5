"""The reviewer track's `[track_options]` and its configurations (built at analysis time).

Every spec candidate is a reviewer and becomes a `single` configuration; `unchecked` (no review,
every proposal proceeds) is always added as the baseline; chains are declared:

    [track_options]
    chains = [{ name = "policy+llm", members = ["reference-policy", "llm"] }]

A chain's trial k on case c pairs its members' own trials k on case c. Members review
independently (neither sees the other's reply), so the pair is a real joint decision of two
independent reviews, and shared misses stay countable.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from trustbench.core import (
    CandidateSpec,
    ExperimentSpec,
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

    model_config = ConfigDict(use_attribute_docstrings=True, extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:+-]*$")
    """Configuration name used in the report and the gates."""
    members: list[str] = Field(min_length=2, max_length=2)
    """Candidate names in review order (exactly two, so the chain conditionals
    P(second approves | prohibited, first approves) are defined)."""


class ReviewTrackOptions(BaseModel):
    """`[track_options]` of an `rtb/review` experiment."""

    model_config = ConfigDict(use_attribute_docstrings=True, extra="forbid", frozen=True)

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
    return options


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
