"""The usual plan, every case x candidate x trial index, made on demand rather than held.

A million-trial reviewer plan held as `TrialKey` objects, and the trial ids its digest is
computed over, took about 270 MB of `report` (issue 30: `verify` and `report` re-plan every run
to check it against the frozen digest). `CrossProduct` is a read-only sequence of the same keys,
in the same order, made one at a time; and for the digest it gives the trial ids already in
sorted order (`sorted_trial_ids`), so `plan_record` need not hold or sort them.
"""

from __future__ import annotations

import hashlib
import itertools
import random
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from json.encoder import encode_basestring
from typing import TYPE_CHECKING, overload

from trustbench.core._track import TrialKey

if TYPE_CHECKING:
    from trustbench.core._manifest import Manifest


class _KeysOnDemand(Sequence[TrialKey]):
    """A read-only sequence of keys made one at a time by `_key(position)` (indexes, slices)."""

    __slots__ = ()

    def _key(self, position: int) -> TrialKey:
        raise NotImplementedError

    @overload
    def __getitem__(self, index: int) -> TrialKey: ...

    @overload
    def __getitem__(self, index: slice) -> list[TrialKey]: ...

    def __getitem__(self, index: int | slice) -> TrialKey | list[TrialKey]:
        if isinstance(index, slice):
            return [self._key(i) for i in range(*index.indices(len(self)))]
        size = len(self)
        position = index + size if index < 0 else index
        if not 0 <= position < size:
            raise IndexError("plan index out of range")
        return self._key(position)


class CrossProduct(_KeysOnDemand):
    """Keys `(case, candidate, index)` for every case, then candidate, then index (in order)."""

    __slots__ = ("_cases", "_names", "_trials")

    def __init__(self, case_ids: Sequence[str], candidates: Sequence[str], trials: int) -> None:
        self._cases = tuple(case_ids)
        self._names = tuple(candidates)
        self._trials = max(trials, 0)

    def __len__(self) -> int:
        return len(self._cases) * len(self._names) * self._trials

    def _key(self, position: int) -> TrialKey:
        case, rest = divmod(position, len(self._names) * self._trials)
        name, trial = divmod(rest, self._trials)
        return TrialKey(self._cases[case], self._names[name], trial)

    def __iter__(self) -> Iterator[TrialKey]:
        indexes = range(self._trials)
        for case_id in self._cases:
            for name in self._names:
                for index in indexes:
                    yield TrialKey(case_id, name, index)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))  # pyright: ignore[reportUnknownArgumentType, reportUnknownVariableType]

    __hash__ = None  # type: ignore[assignment]  # equal to a list of the same keys, like a list

    def __repr__(self) -> str:
        return f"CrossProduct({len(self._cases)} cases x {self._names!r} x {self._trials})"

    @property
    def case_ids(self) -> tuple[str, ...]:
        """The cases, in plan order."""
        return self._cases

    @property
    def candidates(self) -> tuple[str, ...]:
        """The candidates' names, in plan order."""
        return self._names

    @property
    def trials(self) -> int:
        """Trial indexes per case and candidate (`0 .. trials - 1`)."""
        return self._trials

    def sorted(self) -> CrossProduct:
        """The same keys in `sorted()` order, still made on demand.

        `TrialKey` orders by case, then candidate, then index, so the sorted plan is the plan of
        the sorted cases and sorted candidates (each listed once in a plan).
        """
        return CrossProduct(sorted(self._cases), sorted(self._names), self._trials)

    def sorted_trial_ids(self) -> Iterator[str] | None:
        """Every trial id (`case/candidate/index`) in `sorted()` order, or None when unsafe.

        The ids of one (case, candidate) share the prefix `case/candidate/` and differ in their
        digits. When no prefix equals or begins another (names may hold "/"), two ids of
        different prefixes compare as their prefixes do, so the sorted ids are the sorted
        prefixes, each followed by the sorted index texts, and none repeats. Otherwise None:
        the caller sorts the ids themselves (and finds any duplicate).
        """
        prefixes = sorted(f"{case}/{name}/" for case in self._cases for name in self._names)
        if any(b.startswith(a) for a, b in itertools.pairwise(prefixes)):
            return None
        suffixes = sorted(str(index) for index in range(self._trials))
        return (prefix + suffix for prefix in prefixes for suffix in suffixes)

    def ids_sha256(self) -> str | None:
        """`json_sha256(sorted(ids))`, streamed over `sorted_trial_ids`; None where not exact."""
        ordered = self.sorted_trial_ids()
        return None if ordered is None else sorted_ids_sha256(ordered)


def sorted_ids_sha256(ordered: Iterable[str]) -> str | None:
    """`json_sha256(list(ordered))` for trial ids already sorted, streamed (none is held).

    The canonical JSON of a list of strings is `[`, the strings encoded as `canonical_json`
    encodes them (the C string encoder) joined by `,`, then `]`. None for a string that
    encoder refuses (a lone surrogate): the caller takes the general path.
    """
    digest = hashlib.sha256(b"[")
    ids = iter(ordered)
    separator = ""
    try:
        # Joined a few thousand at a time: one update per id was half of the cost.
        while encoded := [encode_basestring(trial_id) for trial_id in itertools.islice(ids, 4096)]:
            digest.update((separator + ",".join(encoded)).encode("utf-8"))
            separator = ","
    except UnicodeEncodeError:
        return None
    digest.update(b"]")
    return digest.hexdigest()


class SeededOrder(_KeysOnDemand):
    """A plan in its seeded interleaved order, held as 4 bytes a trial (issue 30).

    `trial_order` sorts the keys and shuffles them with `Random(seed)`. A shuffle's swaps depend
    only on the length and the generator, so shuffling the positions `0 .. n-1` instead gives
    the same permutation: key `p` of the order is `sorted_plan[permutation[p]]`. A
    `CrossProduct` plan stays made on demand (its sorted form is one too), so a run of a million
    trials holds a 4 MB array, not a million keys.
    """

    __slots__ = ("_permutation", "_sorted")

    def __init__(self, keys: Sequence[TrialKey], seed: int) -> None:
        self._sorted: Sequence[TrialKey] = (
            keys.sorted() if isinstance(keys, CrossProduct) else sorted(keys)
        )
        permutation = array("I", range(len(self._sorted)))
        random.Random(seed).shuffle(permutation)  # pyright: ignore[reportArgumentType]
        self._permutation = permutation

    def __len__(self) -> int:
        return len(self._permutation)

    def _key(self, position: int) -> TrialKey:
        return self._sorted[self._permutation[position]]

    def __iter__(self) -> Iterator[TrialKey]:
        return (self._sorted[i] for i in self._permutation)


def trial_order(keys: Sequence[TrialKey], seed: int) -> list[TrialKey]:
    """The seeded interleaved order: sort for a stable start, then shuffle with `seed`."""
    ordered = sorted(keys)
    random.Random(seed).shuffle(ordered)
    return ordered


def cross_product(case_ids: list[str], manifest: Manifest) -> CrossProduct:
    """Plan every case for every candidate, `trials_per_case` times (the usual plan).

    Args:
        case_ids: The cases of the corpus.
        manifest: The frozen manifest (its spec gives candidates and trial count).

    Returns:
        One key per (case, candidate, trial index), made as it is read (`CrossProduct`).
    """
    spec = manifest.spec
    return CrossProduct(case_ids, [c.name for c in spec.candidates], spec.trials_per_case)


def handed_out(
    order: Sequence[TrialKey], positions: Iterable[int], stopped: Mapping[str, str]
) -> Iterator[tuple[int, TrialKey]]:
    """The remaining trials in order, each key made as its trial is handed out.

    A stopped candidate's trials are skipped as they come up and stay unrun ("not run"); no
    key is held past its trial (the run keeps the order's 4 bytes a trial and the trials in
    flight).
    """
    for position in positions:
        key = order[position]
        if key.candidate not in stopped:
            yield position, key
