"""The seeded case order of one participant, interleaving comparable variants.

A person learns while reviewing: the third variant of a template is easier once the first two
were seen. The order therefore spreads each domain group's variants across the session (round r
holds one variant of every group, groups shuffled per round) so that position effects can be
analysed and no group is reviewed as a block. The order is a pure function of the frozen
`order_seed` and the participant id, so it is reproducible from the manifest alone.
"""

from __future__ import annotations

import hashlib
import random
from collections import defaultdict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trustbench.rtb.policy._protocol import AuthoredCase


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
