"""Policy id -> the one `CorpusPolicy` object that owns it.

The built-in policies register here on import; a plug-in registers its own with
`register_policy` before a corpus declaring its id is loaded. A second object for an id already
registered is refused, so two implementations can never silently disagree about one corpus.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ValidationError

from trustbench.errors import InputError
from trustbench.rtb.policy._default import DEFAULT_POLICY_ID
from trustbench.rtb.policy._protocol import CorpusPolicy
from trustbench.rtb.policy.narrow_v1._policy import NARROW_V1
from trustbench.rtb.policy.narrow_v2._policy import NARROW_V2
from trustbench.rtb.policy.narrow_v3._policy import NARROW_V3

_POLICIES: dict[str, CorpusPolicy] = {}


def register_policy(policy: CorpusPolicy) -> CorpusPolicy:
    """Register `policy` under its `policy_id`.

    Returns:
        The policy (so a module can write `POLICY = register_policy(MyPolicy())`).

    Raises:
        ValueError: Another object is registered under the same id, or owns the same case or
            candidate-input model (the model type is how a case finds its policy).
    """
    existing = _POLICIES.get(policy.policy_id)
    if existing is not None and existing is not policy:
        raise ValueError(f"policy {policy.policy_id!r} is already registered")
    for other in _POLICIES.values():
        if other is not policy and (
            other.case_model is policy.case_model or other.candidate_model is policy.candidate_model
        ):
            raise ValueError(
                f"policy {policy.policy_id!r} reuses the models of {other.policy_id!r}"
            )
    _POLICIES[policy.policy_id] = policy
    return policy


def known_policy_ids() -> tuple[str, ...]:
    """Every registered policy id, in registration order."""
    return tuple(_POLICIES)


def registered_policies() -> tuple[CorpusPolicy, ...]:
    """Every registered policy object, in registration order."""
    return tuple(_POLICIES.values())


def policy_for(policy_id: str | None) -> CorpusPolicy:
    """The policy object for a declared id (None: the default policy of an undeclared corpus).

    Raises:
        InputError: No policy of that id is registered (the message lists the known ones).
    """
    chosen = DEFAULT_POLICY_ID if policy_id is None else policy_id
    try:
        return _POLICIES[chosen]
    except KeyError:
        raise InputError(
            f"policy id {chosen!r} is not implemented; known: {', '.join(known_policy_ids())}",
            location="MANIFEST.json/policy_id",
        ) from None


def policy_of(value: object) -> CorpusPolicy:
    """The policy whose case, candidate-input or response model `value` is an instance of.

    Raises:
        InputError: `value` belongs to no registered policy (names its type).
    """
    # A later policy's models may subclass an earlier one's: the exact model type wins.
    for policy in _POLICIES.values():
        if type(value) in (policy.case_model, policy.candidate_model, policy.response_model):
            return policy
    for policy in _POLICIES.values():
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
    for policy in reversed(_POLICIES.values()):
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


for _builtin in (NARROW_V1, NARROW_V2, NARROW_V3):
    register_policy(_builtin)
