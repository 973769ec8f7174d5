"""The control-path track's options and each candidate's boundary and target environment.

Kept apart from `track.py` so analysis and report code read the configuration without importing
the track (the track imports them, never the reverse).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar, cast

from pydantic import BaseModel, Field, StrictFloat, StrictInt, ValidationError

from trustbench._docstrings import documented
from trustbench.core import CandidateSpec
from trustbench.errors import InputError
from trustbench.rtb.boundaries import (
    Boundary,
    BoundaryFactory,
    HttpEnvironment,
    SimulatedEnvironment,
    TargetEnvironment,
    boundary_factory,
)
from trustbench.rtb.control._cases import (
    DEFAULT_OBSERVATION_DEADLINE_S,
    DIRECT_PATH,
    UNRECONCILED_SUFFIX,
)
from trustbench.rtb.platform import FaultType
from trustbench.rtb.review._loop import MODEL_REVIEW_GATED, ReviewChainSpec, check_review_chain

if TYPE_CHECKING:
    from trustbench.core import ExperimentSpec


DEFAULT_BOUNDARY_ENTRY = "trustbench.rtb.control.track:boundary_from_settings"
"""The entry used when a candidate names none: built-in boundaries by name."""
"""Accepted spellings of the built-in corpus version in `corpus.builtin`."""
_HARNESS_CODE = (
    "rtb/platform/*.py",
    "rtb/boundaries/*.py",
    "rtb/control/*.py",
    "rtb/review/_loop.py",
    "rtb/policy/*.py",
    "rtb/corpus/_normalise.py",
)
"""Platform, boundary and grading code hashed into the manifest (role `harness_code`): the
scoring rules and the simulated target are frozen with the experiment; the corpus policy's own
code (`CorpusPolicy.source_files`, which the boundaries run) is added at resolve time."""

_T = TypeVar("_T")


class _Strict(BaseModel):
    model_config = documented(extra="forbid", frozen=True)


class ControlTrackOptions(_Strict):
    """`[track_options]` of an `rtb/control` experiment."""

    scenario_seed: StrictInt = 0
    """Seed that picks each group's fault case and the faults' timing parameters."""
    observation_deadline_s: StrictFloat = Field(default=DEFAULT_OBSERVATION_DEADLINE_S, gt=0)
    """Simulated seconds after trial start by which the observer must establish the outcome."""
    paths: tuple[str, ...] | None = None
    """Scenario paths to run (`direct`, a fault type, or
    `response_lost_after_commit/unreconciled_by_deadline`); None runs every path."""


class BoundarySettings(_Strict):
    """Candidate `settings` understood by the default entry `boundary_from_settings`."""

    boundary: str
    """`reference`, `cedar`, `review-gated`, `unchecked`, a known-bad name, `http`, or a name
    given to `trustbench.rtb.boundaries.register_boundary`."""
    url: str | None = None
    """For `http`: the service root, e.g. `http://127.0.0.1:8750` (it hosts the platform and
    the observer as well as the boundary)."""
    reviewer: CandidateSpec | None = None
    """For `model-review-gated`: the reviewer asked about each request before dispatch, declared
    as a reviewer-track candidate (`openai_chat` / `anthropic_messages` with `base_url` and
    `model`, or `inprocess` with an `entry`); called through the run's providers."""


def known_paths() -> tuple[str, ...]:
    """Every scenario path the scenario builder can produce."""
    faults = [fault.value for fault in FaultType]
    return (
        DIRECT_PATH,
        *faults,
        FaultType.RESPONSE_LOST_AFTER_COMMIT.value + UNRECONCILED_SUFFIX,
    )


def boundary_from_settings(settings: dict[str, Any]) -> BoundaryFactory:
    """Default candidate entry: a factory of fresh instances of the named built-in boundary.

    Args:
        settings: The candidate's `settings` (`boundary`, and `url` for `http`).

    Returns:
        A zero-argument factory of fresh boundary instances.

    Raises:
        InputError: Unknown setting, unknown boundary name, or `http` without `url`.
    """
    try:
        parsed = BoundarySettings.model_validate(settings)
    except ValidationError as error:
        raise options_error(error, "settings") from None
    if parsed.url is not None and parsed.boundary != "http":
        raise InputError("`url` is only for boundary `http`", location="settings.url")
    if (parsed.reviewer is not None) != (parsed.boundary == MODEL_REVIEW_GATED):
        raise InputError(
            f"`reviewer` is required by, and only for, boundary `{MODEL_REVIEW_GATED}`",
            location="settings.reviewer",
        )
    if parsed.reviewer is not None:
        check_review_chain("settings.reviewer", ReviewChainSpec(members=(parsed.reviewer,)))
        return _needs_a_trial
    return boundary_factory(parsed.boundary, url=parsed.url)


def _needs_a_trial() -> Boundary:
    """`model-review-gated` is built by the track inside a trial (its reviewer is called there)."""
    raise InputError(f"boundary {MODEL_REVIEW_GATED} is built only inside a control-track trial")


def options_error(error: ValidationError, prefix: str) -> InputError:
    """The first problem pydantic found, as a one-line error at `prefix.field`.

    One wording for every track option and candidate setting of the control-path and workflow
    tracks, so a bad field is named the same way wherever it is configured.
    """
    first = error.errors()[0]
    field = ".".join(str(part) for part in first["loc"])
    return InputError(first["msg"], location=f"{prefix}.{field}" if field else prefix)


def environment_for(candidate: CandidateSpec) -> TargetEnvironment:
    """Where a candidate's trials run: its `settings.url` service, else the simulated platform."""
    url = candidate.settings.get("url")
    return HttpEnvironment(str(url)) if url else SimulatedEnvironment()


def environment_label(candidate: CandidateSpec) -> str:
    """The environment strength a candidate's trials are expected to record (for failed trials)."""
    url = candidate.settings.get("url")
    return f"external service {str(url).rstrip('/')}" if url else "simulated platform"


def _factory_for(candidate: CandidateSpec, spec: ExperimentSpec) -> BoundaryFactory:
    """The candidate's boundary factory; a user's entry runs in its sandbox worker."""
    from trustbench.core import candidate_entry

    entry = candidate.entry or DEFAULT_BOUNDARY_ENTRY
    where = f"candidate {candidate.name}"
    make, _isolation = candidate_entry(candidate, spec, entry)
    try:
        factory = make(dict(candidate.settings))
    except InputError as error:
        raise InputError(
            error.message, location=f"{where} {error.location or ''}".strip()
        ) from None
    if not callable(factory):
        raise InputError(f"entry {entry} must return a boundary factory", location=where)
    return cast(BoundaryFactory, factory)  # a user's entry: only its callability can be checked
