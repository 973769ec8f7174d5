"""Policy id -> the one `CorpusPolicy` object that owns it.

The built-in policies are declared here (id, where the object lives, the reviewers it names) and
imported only when first asked for: a run of a corpus of one policy loads that policy's models,
checks and reviewers, not every version's (issue 35: each built-in costs tens of milliseconds of
pydantic model building at import). Questions about every policy (`registered_policies`,
`parse_candidate_input`, `policy_of` a value of an unloaded policy) load them all first, so the
answers are those of the eager registry. A plug-in registers its own with `register_policy`
before a corpus declaring its id is loaded. A second registration of an id is refused
(`AlreadyRegistered`, as every registry does: `trustbench.core.Registry`), so two
implementations can never silently disagree about one corpus; `unregister_policy` removes a
registered one, never a built-in.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

from pydantic import ValidationError

from trustbench.core import Registry
from trustbench.errors import InputError
from trustbench.rtb.policy._default import DEFAULT_POLICY_ID
from trustbench.rtb.policy._protocol import CorpusPolicy

if TYPE_CHECKING:
    from pydantic import BaseModel

    from trustbench.rtb.review.reviewers._protocol import Reviewer


class _BuiltIn(NamedTuple):
    """A built-in policy, before its module is imported."""

    module: str
    """Module holding the registered instance."""
    attribute: str
    """The instance's name in it."""
    reviewers: tuple[str, ...]
    """Its `reviewers` names (checked against the object when it loads)."""


_BUILT_IN: dict[str, _BuiltIn] = {
    DEFAULT_POLICY_ID: _BuiltIn(
        "trustbench.rtb.policy.narrow_v1._policy", "NARROW_V1", ("reference-policy",)
    ),
    "rtb-narrow-approval-v2": _BuiltIn(
        "trustbench.rtb.policy.narrow_v2._policy", "NARROW_V2", ("reference-policy-v2",)
    ),
    "rtb-narrow-approval-v3": _BuiltIn(
        "trustbench.rtb.policy.narrow_v3._policy", "NARROW_V3", ("reference-policy-v3",)
    ),
    "rtb-narrow-approval-v4": _BuiltIn(
        "trustbench.rtb.policy.narrow_v4._policy", "NARROW_V4", ("reference-policy-v4",)
    ),
}
"""The built-in policies in registration order; each is imported on first use."""

_POLICIES: Registry[CorpusPolicy | None] = Registry(
    "corpus policy", dict.fromkeys(_BUILT_IN), unregister_with="unregister_policy"
)
"""Every registered id in registration order -> its object (None: a built-in, see `_LOADED`)."""

_LOADED: dict[str, CorpusPolicy] = {}
"""The built-in policies imported so far, by id."""


def _held(policy_id: str) -> CorpusPolicy | None:
    """The object of a registered id, or a built-in's once imported; None before that."""
    registered = _POLICIES.get(policy_id)
    return registered if registered is not None else _LOADED.get(policy_id)


def _load(policy_id: str) -> CorpusPolicy:
    """The object of a registered id, importing a built-in on first use."""
    policy = _held(policy_id)
    if policy is None:
        declared = _BUILT_IN[policy_id]
        policy = getattr(importlib.import_module(declared.module), declared.attribute)
        if policy.policy_id != policy_id or tuple(policy.reviewers) != declared.reviewers:
            raise RuntimeError(
                f"built-in policy {declared.module}:{declared.attribute} is not the one declared "
                f"for {policy_id!r} in the registry (id or reviewers differ)"
            )
        _refuse_reused_models(policy)
        _LOADED[policy_id] = policy
    return policy


def _loaded() -> list[CorpusPolicy]:
    found = (_held(policy_id) for policy_id in _POLICIES)
    return [policy for policy in found if policy is not None]


def _refuse_reused_models(policy: CorpusPolicy) -> None:
    for other in _loaded():
        if other is not policy and (
            other.case_model is policy.case_model or other.candidate_model is policy.candidate_model
        ):
            raise ValueError(
                f"policy {policy.policy_id!r} reuses the models of {other.policy_id!r}"
            )


def register_policy(policy: CorpusPolicy) -> CorpusPolicy:
    """Register `policy` under its `policy_id`.

    Returns:
        The policy (so a module can write `POLICY = register_policy(MyPolicy())`).

    Raises:
        AlreadyRegistered: The id is built in or registered already.
        ValueError: Another policy owns the same case or candidate-input model (the model type
            is how a case finds its policy).
    """
    registered_policies()  # every built-in loaded, so the checks below see all of them
    if policy.policy_id not in _POLICIES:
        _refuse_reused_models(policy)
    _POLICIES.register(policy.policy_id, policy)
    return policy


def unregister_policy(policy_id: str) -> None:
    """Remove a policy registered with `register_policy`.

    Raises:
        InputError: The id is built in, or no policy of that id is registered.
    """
    _POLICIES.unregister(policy_id)


def known_policy_ids() -> tuple[str, ...]:
    """Every registered policy id, in registration order (loads no policy)."""
    return _POLICIES.keys()


def registered_policies() -> tuple[CorpusPolicy, ...]:
    """Every registered policy object, in registration order (loads every built-in)."""
    return tuple(_load(policy_id) for policy_id in _POLICIES)


def holds_reason_code(code: str) -> bool:
    """Whether `code` is in some registered policy's vocabulary (`reason_codes`).

    The answer of `registered_policies`, asking the policies already loaded first: a run
    checks every boundary reply's reason code, and one in its own corpus's vocabulary then
    imports no other version's policy (loading all four built-ins cost a v0.2 workflow run
    0.16 to 0.18 s of CPU at start-up, bench/README.md "Reviewers in the loop").
    """
    return any(code in policy.reason_codes for policy in _loaded()) or any(
        code in policy.reason_codes for policy in registered_policies()
    )


def policy_for(policy_id: str | None) -> CorpusPolicy:
    """The policy object for a declared id (None: the default policy of an undeclared corpus).

    Raises:
        InputError: No policy of that id is registered (the message lists the known ones).
    """
    chosen = DEFAULT_POLICY_ID if policy_id is None else policy_id
    if chosen not in _POLICIES:
        raise InputError(
            f"policy id {chosen!r} is not implemented; known: {', '.join(known_policy_ids())}",
            location="MANIFEST.json/policy_id",
        )
    return _load(chosen)


def policy_of(value: object) -> CorpusPolicy:
    """The policy whose case, candidate-input or response model `value` is an instance of.

    Raises:
        InputError: `value` belongs to no registered policy (names its type).
    """
    # A later policy's models may subclass an earlier one's: the exact model type wins. A value
    # of a loaded policy's own model is that policy's (no two policies share a case or input
    # model); anything else is looked up among all of them, as before policies loaded lazily.
    for policy in _loaded():
        if type(value) in (policy.case_model, policy.candidate_model):
            return policy
    policies = registered_policies()
    for policy in policies:
        if type(value) in (policy.case_model, policy.candidate_model, policy.response_model):
            return policy
    for policy in policies:
        if isinstance(value, policy.case_model | policy.candidate_model | policy.response_model):
            return policy
    raise InputError(
        f"a {type(value).__name__} belongs to no registered corpus policy "
        f"(known: {', '.join(known_policy_ids())})",
        location=f"case {getattr(value, 'case_id', getattr(value, 'evaluation_id', '?'))}",
    )


def parse_candidate_input(text: str) -> BaseModel:
    """A candidate input read back from its JSON text, in the policy format it was written in.

    Each policy's candidate model forbids fields it does not define, so an input validates
    against the model of the policy that wrote it. Policies are tried newest first (a later
    format may extend an earlier one); when none accepts the text, the error reported is that
    of the format whose field names best match it.

    Raises:
        ValidationError: The text is an input of no registered policy.
    """
    document: Any = json.loads(text)
    keys = set(document) if isinstance(document, dict) else set()
    failures: list[tuple[int, ValidationError]] = []
    for policy in reversed(registered_policies()):
        try:
            return policy.candidate_model.model_validate_json(text)
        except ValidationError as error:
            fields = set(policy.candidate_model.model_fields)
            failures.append((len(keys ^ fields), error))
    raise min(failures, key=lambda failure: failure[0])[1]


def require_policy(
    corpus_root: object, policy_id: str, implemented: Iterable[str], who: str
) -> None:
    """Refuse a corpus whose policy `who` does not implement.

    Args:
        corpus_root: The corpus folder or label (named in the message).
        policy_id: The corpus's declared policy id.
        implemented: The policy ids `who` implements.
        who: The reviewer, boundary or track doing the check (named in the message).

    Raises:
        InputError: `policy_id` is not in `implemented`.
    """
    implemented = tuple(implemented)
    if policy_id not in implemented:
        raise InputError(
            f"{who} implements policy {', '.join(implemented)}, but the corpus at {corpus_root} "
            f"declares policy {policy_id!r}; it would be graded by the wrong rules",
            location="MANIFEST.json/policy_id",
        )


def reviewer_policies() -> dict[str, tuple[str, ...]]:
    """Reviewer name -> the ids of the policies whose `reviewers` name it, in registration order.

    Read from the built-ins' declarations and the registered objects: loads no policy.
    """
    owners: dict[str, tuple[str, ...]] = {}
    for policy_id, policy in _POLICIES.items():  # a built-in's entry stays None
        names = _BUILT_IN[policy_id].reviewers if policy is None else tuple(policy.reviewers)
        for name in names:
            owners[name] = (*owners.get(name, ()), policy_id)
    return owners


def policy_reviewer(policy_id: str, name: str) -> Callable[[int], Reviewer]:
    """The factory of reviewer `name` of the policy `policy_id` (loads that policy only)."""
    return policy_for(policy_id).reviewers[name]
