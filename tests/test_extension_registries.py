"""Every extension registry refuses a duplicate the same way (`AlreadyRegistered`), never
replaces a built-in, and names the close key when asked to remove an unknown one.

One parametrised test per behaviour runs over the public registries (review metrics,
boundaries, TRB measures, corpus policies, TRB worlds), each through its public `register_*` /
`unregister_*` pair.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import pytest

from trustbench.errors import AlreadyRegistered, InputError
from trustbench.rtb.boundaries import (
    PythonPolicyBoundary,
    UncheckedBoundary,
    boundary_factory,
    register_boundary,
    unregister_boundary,
)
from trustbench.rtb.corpus._models import CandidateInput, Case
from trustbench.rtb.policy import policy_for, register_policy, unregister_policy
from trustbench.rtb.policy.narrow_v1 import NarrowApprovalV1
from trustbench.rtb.review import (
    Outcome,
    ReviewRate,
    register_review_metric,
    unregister_review_metric,
)
from trustbench.rtb.review._rates import review_rates
from trustbench.trb.track import measure_targets, register_measure, unregister_measure
from trustbench.trb.world import (
    CORRIDOR_DECLARATION,
    CorridorWorld,
    register_world,
    unregister_world,
    world_for,
)


def _rate(name: str) -> ReviewRate:
    return ReviewRate(
        name=name,
        label="permit / all",
        description="observed permit / every trial",
        population=lambda row: True,
        event=lambda row: row.observed is Outcome.PERMIT,
        reduction="any",
    )


class _PlugInCase(Case):
    pass


class _PlugInInput(CandidateInput):
    pass


class _PlugInPolicy(NarrowApprovalV1):
    """v0.1's policy under another id, with models of its own (a policy's models are its own)."""

    case_model = _PlugInCase
    candidate_model = _PlugInInput

    def __init__(self, policy_id: str) -> None:
        self.policy_id = policy_id


class _OtherPlugInPolicy(_PlugInPolicy):
    pass


class _PlugInWorld(CorridorWorld):
    """The corridor under another world id (a world is registered under its declared id)."""

    def __init__(self, world_id: str) -> None:
        super().__init__()
        self.declaration = CORRIDOR_DECLARATION.model_copy(update={"world_id": world_id})


class _OtherPlugInWorld(_PlugInWorld):
    pass


@dataclass(frozen=True)
class Extension:
    """One registry seen through its public functions, with two entries to register."""

    registry: str
    built_in: str
    """A built-in key, with `look_up` returning what it holds now."""
    register: Callable[[str, Any], None]
    unregister: Callable[[str], None]
    look_up: Callable[[str], Any]
    first: Any
    second: Any


def _metric(name: str) -> ReviewRate | None:
    return next((rate for rate in review_rates() if rate.name == name), None)


EXTENSIONS = [
    Extension(
        registry="review metric",
        built_in="false_approval_rate",
        register=lambda name, rate: register_review_metric(replace(rate, name=name)),
        unregister=unregister_review_metric,
        look_up=_metric,
        first=_rate("plug_in_permit_rate"),
        second=_rate("plug_in_permit_rate"),  # equal but for its own functions
    ),
    Extension(
        registry="boundary",
        built_in="reference",
        register=register_boundary,
        unregister=unregister_boundary,
        look_up=boundary_factory,
        first=UncheckedBoundary,
        second=PythonPolicyBoundary,
    ),
    Extension(
        registry="TRB measure",
        built_in="governance",
        register=register_measure,
        unregister=unregister_measure,
        look_up=lambda key: measure_targets()[key],
        first="my_package.measures:FIRST",
        second="my_package.measures:SECOND",
    ),
    Extension(
        registry="corpus policy",
        built_in="rtb-narrow-approval-v1",
        register=lambda policy_id, kind: register_policy(kind(policy_id)),
        unregister=unregister_policy,
        look_up=lambda policy_id: type(policy_for(policy_id)),
        first=_PlugInPolicy,
        second=_OtherPlugInPolicy,
    ),
    Extension(
        registry="TRB world",
        built_in="corridor",
        register=lambda world_id, kind: register_world(kind(world_id)),
        unregister=unregister_world,
        look_up=lambda world_id: type(world_for(world_id)),
        first=_PlugInWorld,
        second=_OtherPlugInWorld,
    ),
]
KEY = "plug_in_permit_rate"
"""The key every test registers (a review metric's key is its rate's name)."""


@pytest.fixture(params=EXTENSIONS, ids=[e.registry for e in EXTENSIONS])
def extension(request: pytest.FixtureRequest) -> Iterator[Extension]:
    chosen: Extension = request.param
    yield chosen
    with contextlib.suppress(InputError):  # unless the test removed it itself
        chosen.unregister(KEY)


def test_a_second_registration_of_a_key_is_refused_naming_the_registry_and_key(
    extension: Extension,
) -> None:
    extension.register(KEY, extension.first)
    with pytest.raises(AlreadyRegistered) as refused:
        extension.register(KEY, extension.second)
    message = str(refused.value)
    assert extension.registry in message and repr(KEY) in message
    assert "unregister" in message and "first" in message
    assert extension.look_up(KEY) == extension.first  # the first one is kept


def test_after_unregistering_a_key_it_can_be_registered_again(extension: Extension) -> None:
    extension.register(KEY, extension.first)
    extension.unregister(KEY)
    extension.register(KEY, extension.second)
    assert extension.look_up(KEY) == extension.second


def test_a_built_in_cannot_be_replaced_or_removed(extension: Extension) -> None:
    before = extension.look_up(extension.built_in)
    with pytest.raises(AlreadyRegistered, match="built in and cannot be replaced"):
        extension.register(extension.built_in, extension.first)
    with pytest.raises(InputError, match="built in and cannot be removed"):
        extension.unregister(extension.built_in)
    assert extension.look_up(extension.built_in) == before


def test_unregistering_an_unknown_key_names_the_close_registered_one(
    extension: Extension,
) -> None:
    extension.register(KEY, extension.first)
    with pytest.raises(InputError, match=f"did you mean {KEY!r}") as unknown:
        extension.unregister(KEY.replace("permit", "permti"))
    assert extension.registry in str(unknown.value)
    assert not isinstance(unknown.value, AlreadyRegistered)


def test_a_registered_boundary_is_made_by_its_name() -> None:
    register_boundary("plug-in-unchecked", UncheckedBoundary)
    try:
        assert isinstance(boundary_factory("plug-in-unchecked")(), UncheckedBoundary)
    finally:
        unregister_boundary("plug-in-unchecked")
    with pytest.raises(InputError, match="unknown boundary 'plug-in-unchecked'"):
        boundary_factory("plug-in-unchecked")


def test_the_http_boundary_name_is_taken_though_it_is_made_per_url() -> None:
    with pytest.raises(AlreadyRegistered, match="'http' is built in"):
        register_boundary("http", UncheckedBoundary)
