"""Graded member trials kept on disk, not in memory: what `report` holds is 12 bytes a trial.

`report` grades every finished trial as the ledger streams (in chain order, shuffled) but
assembles configurations case by case (a chain joins its members' trials of one case and trial
index). Holding each graded trial as an object until then cost about 0.5 kB a trial (issue 30).
Here each graded `MemberTrial` is written, as a `marshal`led tuple of its own values, to an
anonymous temporary file, and only its offset and length are kept, in flat arrays indexed by (case,
candidate, trial index). Reading one back (seek and load) gives an equal `MemberTrial`:
`marshal` round-trips every string, int, float and None exactly. Records are appended through a
buffer and read back with `os.pread` (a seek of a buffered file flushed and refilled its buffer:
a tenth of a report's CPU went there). The file is gone when the store is closed or the
process ends.

A trial whose candidate or trial index is outside the frozen plan (only a hand-made ledger has
one: `verify` passed) is kept as an object beside the array, so nothing is dropped.
"""

from __future__ import annotations

import marshal
import os
import tempfile
from array import array
from collections.abc import Iterator, Mapping
from typing import Any

from trustbench.rtb.corpus._load import Corpus
from trustbench.rtb.review._member_trial import MemberTrial, slim_of
from trustbench.rtb.review._validation import Outcome

Key = tuple[str, str, int]
"""`(case_id, candidate, trial index)`."""

_ABSENT = -1


class MemberStore(Mapping[Key, MemberTrial]):
    """`(case_id, candidate, k)` -> graded `MemberTrial`, kept in a temporary file."""

    def __init__(self, corpus: Corpus, candidates: list[str], trials_per_case: int) -> None:
        self._cases = {case.case_id: (i, case) for i, case in enumerate(corpus.cases)}
        self._candidates = {name: i for i, name in enumerate(candidates)}
        self._names = list(candidates)
        self._by_position = list(corpus.cases)
        self._k = trials_per_case
        slots = len(self._cases) * len(candidates) * self._k
        self._offsets = array("q", [_ABSENT]) * slots
        self._lengths = array("I", [0]) * slots
        self._extra: dict[Key, MemberTrial] = {}
        self._file = tempfile.TemporaryFile()  # noqa: SIM115 (closed by `close`)
        self._fd = self._file.fileno()
        self._unflushed = False
        self._end = 0
        self._count = 0

    def _slot(self, key: Key) -> int | None:
        case_id, candidate, k = key
        case = self._cases.get(case_id)
        index = self._candidates.get(candidate)
        if case is None or index is None or not 0 <= k < self._k:
            return None
        return (case[0] * len(self._candidates) + index) * self._k + k

    def put(self, trial: MemberTrial) -> None:
        """Store one graded trial (a later one for the same key replaces it, as a dict would)."""
        key = (trial.case.case_id, trial.candidate, trial.trial)
        slot = self._slot(key)
        if slot is None:
            self._count += key not in self._extra
            self._extra[key] = trial
            return
        data = marshal.dumps(_values(trial))
        self._count += self._offsets[slot] == _ABSENT
        self._offsets[slot] = self._end
        self._lengths[slot] = len(data)
        self._file.write(data)
        self._unflushed = True
        self._end += len(data)

    def __getitem__(self, key: Key) -> MemberTrial:
        slot = self._slot(key)
        if slot is None or self._offsets[slot] == _ABSENT:
            return self._extra[key]
        return _member(self._cases[key[0]][1], key[1], key[2], self._values(slot))

    def _values(self, slot: int) -> tuple[Any, ...]:
        """The stored values of a filled slot."""
        if self._unflushed:
            self._file.flush()
            self._unflushed = False
        return marshal.loads(os.pread(self._fd, self._lengths[slot], self._offsets[slot]))

    def candidate_index(self, candidate: str) -> int | None:
        """`candidate`'s place in the plan (None outside it), for `at`."""
        return self._candidates.get(candidate)

    def at(self, case_position: int, candidate_index: int, k: int) -> MemberTrial | None:
        """The graded trial of the plan's (case at `case_position`, candidate, k), or None.

        `self[key]` without making and parsing the key: a configuration's trials are read
        in plan order (`ConfigurationTrials`), a million times in a large report.
        """
        slot = (case_position * len(self._candidates) + candidate_index) * self._k + k
        if self._offsets[slot] == _ABSENT:
            return None
        case = self._by_position[case_position]
        return _member(case, self._names[candidate_index], k, self._values(slot))

    def __contains__(self, key: object) -> bool:
        if not (isinstance(key, tuple) and len(key) == 3):  # pyright: ignore[reportUnknownArgumentType]
            return False
        slot = self._slot(key)  # pyright: ignore[reportArgumentType]
        return (slot is not None and self._offsets[slot] != _ABSENT) or key in self._extra

    def __iter__(self) -> Iterator[Key]:
        names = list(self._candidates)
        for case_id in self._cases:
            for name in names:
                for k in range(self._k):
                    key = (case_id, name, k)
                    slot = self._slot(key)
                    if slot is not None and self._offsets[slot] != _ABSENT:
                        yield key
        yield from self._extra

    def __len__(self) -> int:
        return self._count

    def close(self) -> None:
        """Delete the temporary file."""
        self._file.close()


def _values(trial: MemberTrial) -> tuple[Any, ...]:
    validated = trial.validated
    return (
        trial.status, trial.evaluation_id, trial.raw_reply, trial.reported_model,
        validated.outcome.value, validated.invalid_reason, trial.supported,
        trial.latency_s, trial.tokens, trial.cost_usd, trial.attempts, trial.error_class,
        trial.explanation, trial.support_gaps,
    )  # fmt: skip


def _member(case: Any, candidate: str, k: int, values: tuple[Any, ...]) -> MemberTrial:
    (status, evaluation_id, raw_reply, reported_model, outcome, invalid_reason,
     supported, latency_s, tokens, cost_usd, attempts, error_class, explanation,
     gaps) = values  # fmt: skip
    validated = slim_of(Outcome(outcome), invalid_reason)
    return MemberTrial(
        case=case, candidate=candidate, trial=k, status=status, evaluation_id=evaluation_id,
        raw_reply=raw_reply, reported_model=reported_model, validated=validated,
        supported=supported, latency_s=latency_s, tokens=tokens, cost_usd=cost_usd,
        attempts=attempts, error_class=error_class, explanation=explanation, support_gaps=gaps,
    )  # fmt: skip
