"""The decision rules of a policy text, as data a policy object declares (`CorpusPolicy.rules`).

Each rule is one condition of the policy wording that a reviewer must apply to decide a case. A
policy object names every such rule here, with the reader that omits it: the reference reviewer
with that one rule removed (`CorpusPolicy.ablated_reviewer`). `trustbench rtb audit` runs every
ablated reader over the corpus and checks it fails a release gate of the built-in review spec
that the full reader passes (`trustbench.rtb.review._ablation`): a rule no case turns on is not
tested by the corpus, and a candidate could score as if it had read it without doing so. The
cases whose decision an ablation flips are the cases that rule decides; the reviewer report
attributes a candidate's wrong decisions to them.

A new policy object declares its own tuple of `PolicyRule`s and an `ablated_reviewer`; the audit
and the report ask the object and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PolicyRule:
    """One rule of the policy text, and what a reader without it does instead."""

    rule_id: str
    """Stable id (kebab case), unique within the policy; named in the audit and the report."""
    clause: str
    """Where the policy text states it (e.g. `rule 3`, `precedence`)."""
    statement: str
    """The rule, in a few words of the policy text."""
    ablation: str
    """How the ablated reader reads instead (e.g. "ignores expires_at")."""


def rule_ids(rules: tuple[PolicyRule, ...]) -> tuple[str, ...]:
    """The ids of `rules`, in declaration order.

    Raises:
        ValueError: An id is declared twice (the audit and the report key on it).
    """
    ids = tuple(rule.rule_id for rule in rules)
    duplicated = sorted({rule_id for rule_id in ids if ids.count(rule_id) > 1})
    if duplicated:
        raise ValueError(f"policy rule id(s) declared twice: {', '.join(duplicated)}")
    return ids


def unknown_rule(rule_id: str, rules: tuple[PolicyRule, ...]) -> KeyError:
    """The error an `ablated_reviewer` raises for an id its policy does not declare."""
    known = ", ".join(rule.rule_id for rule in rules)
    return KeyError(f"rule {rule_id!r} is not a rule of this policy (declared: {known})")
