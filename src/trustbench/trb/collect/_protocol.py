"""The collection protocol: a TOML spec frozen, like any experiment, before anyone answers.

A protocol names the source corpus, which of its traces, steps and r' kinds are served, who
takes part (pseudonymous ids, each assigned to one split: a session's answers all land in its
split, never item by item), the qualification every participant must hold, the time limit per
item, whether the reference agent's own continuation Phi(r') is shown, and how Track 3 outcome
items introduce an exogenous change. `freeze_protocol` writes `protocol.json`: the protocol,
the served traces themselves (so a served session does not depend on the source folder still
existing) and the SHA-256 that pins both; the ledger of the sessions is keyed to that hash.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from trustbench._canonical import read_input_file
from trustbench.errors import InputError
from trustbench.trb.corpus._format import HELD_OUT, SPLITS, Split, Trace, canonical_sha256

PROTOCOL_FILE = "protocol.json"
"""The frozen protocol inside a collection folder."""
FORMAT = "trb-collection/1"
"""Format tag of `protocol.json`."""
Slot = Literal["goal", "belief", "planned_next", "confidence"]


class _Strict(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True, extra="forbid", frozen=True)


class SourceCorpus(_Strict):
    """Where the served traces come from: a corpus folder written in the TRB corpus format."""

    path: str
    """Corpus folder, relative to the protocol file (e.g. one `trustbench trb corpus` wrote)."""


class ItemSelection(_Strict):
    """Which traces, steps and counterfactual kinds become items."""

    max_traces: int = Field(default=2, ge=1)
    """Traces served per split (the first N by trace id of the source split)."""
    steps: tuple[int, ...] = ()
    """Evaluated-step offsets served (0 = the cue step); empty = every evaluated step."""
    r_prime_slots: tuple[Slot, ...] = ("goal", "belief", "planned_next", "confidence")
    """Which stored r' kinds (the slot each edits) are served."""
    track3: bool = True
    """Items whose step is not the trace's last also ask for the outcome's cause (Track 3)."""
    exogenous_change_probability: float = Field(default=0.5, ge=0.0, le=1.0)
    """Per Track 3 item, the chance that the protocol replaces the participant's move by a
    gust (left or right, equally likely): the exogenous change."""
    seed: int = 0
    """Seed of the per-participant item order and of the exogenous draws."""


class Participant(_Strict):
    """One pseudonymous participant; their whole session belongs to one split."""

    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    """Pseudonym (never a name or an e-mail address)."""
    split: Split
    """The split every answer of this session is exported into (items come from it)."""
    qualifications: tuple[str, ...] = ()
    """Qualifications the study lead recorded for this participant."""


class SessionRules(_Strict):
    """Per-session rules of the protocol."""

    participants_per_item: int = Field(default=2, ge=1)
    """Answers wanted per item; export reports items below it."""
    time_limit_s: float = Field(default=120.0, gt=0)
    """Suggested time per item (not enforced; overruns are recorded and reported)."""
    show_model_continuation: bool = False
    """Show the reference agent's own continuation Phi(r') beside the question."""
    required_qualifications: tuple[str, ...] = ()
    """Every participant must hold all of these (checked at freeze)."""


class CollectionProtocol(_Strict):
    """A paired counterfactual collection protocol (the TOML file's top level)."""

    description: str = ""
    """What this collection is for (shown in the export report)."""
    corpus: SourceCorpus
    """The source corpus."""
    items: ItemSelection = ItemSelection()
    """Which items are served."""
    session: SessionRules = SessionRules()
    """Per-session rules."""
    participants: tuple[Participant, ...] = Field(min_length=1)
    """Everyone invited, each with their split."""

    @model_validator(mode="after")
    def _unique_and_qualified(self) -> CollectionProtocol:
        ids = [p.id for p in self.participants]
        if len(set(ids)) != len(ids):
            raise ValueError("participant ids must be unique")
        for p in self.participants:
            missing = set(self.session.required_qualifications) - set(p.qualifications)
            if missing:
                raise ValueError(f"participant {p.id} lacks qualification(s) {sorted(missing)}")
        return self


class Item(_Strict):
    """One served question: a trace step t and one stored counterfactual r' of it."""

    item_id: str
    """`<trace_id>/t<t>/k<k>`."""
    trace_id: str
    """The trace."""
    split: Split
    """Its split (the split of every session that answers it)."""
    t: int
    """The evaluated step."""
    k: int
    """Index of the counterfactual in the step's stored list."""
    track3: bool
    """Whether the outcome's cause is recorded after the answer."""


class FrozenProtocol(_Strict):
    """`protocol.json`: the protocol, the served traces, the items and the pinning hash."""

    format: Literal["trb-collection/1"]
    """Format tag."""
    protocol: CollectionProtocol
    """The protocol as validated."""
    source_corpus_sha256: str
    """`corpus_sha256` of the source corpus at freeze."""
    traces: tuple[Trace, ...]
    """The served traces, copied from the source corpus."""
    items: tuple[Item, ...]
    """Every item, in protocol order."""
    protocol_sha256: str
    """SHA-256 of the canonical JSON of everything above (the ledger is keyed to it)."""

    def trace(self, trace_id: str) -> Trace:
        """The served trace with this id."""
        return next(t for t in self.traces if t.trace_id == trace_id)

    def items_for(self, split: str) -> list[Item]:
        """The items a session of this split answers."""
        return [item for item in self.items if item.split == split]


def load_protocol(path: Path) -> CollectionProtocol:
    """Parse and validate a protocol TOML file.

    Raises:
        InputError: a missing or non-regular file, unreadable TOML or an invalid field (named
            by its pointer).
    """
    raw = read_input_file(path)  # a FIFO or a device is refused, never read
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise InputError("protocol file is not UTF-8 text", location=str(path)) from None
    except (tomllib.TOMLDecodeError, RecursionError) as error:
        raise InputError(f"invalid TOML: {error}", location=str(path)) from None
    try:
        return CollectionProtocol.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        pointer = "/".join(str(p) for p in first["loc"])
        raise InputError(first["msg"], location=f"{path}#/{pointer}") from None


def _items(protocol: CollectionProtocol, traces: list[Trace]) -> list[Item]:
    chosen = protocol.items
    out: list[Item] = []
    for trace in traces:
        first, last = trace.steps[0].t, trace.steps[-1].t
        offsets = chosen.steps or tuple(range(len(trace.steps)))
        for offset in offsets:
            if offset >= len(trace.steps):
                continue
            step = trace.steps[offset]
            for k, cf in enumerate(step.counterfactuals):
                if cf.slot not in chosen.r_prime_slots:
                    continue
                out.append(
                    Item(
                        item_id=f"{trace.trace_id}/t{step.t}/k{k}",
                        trace_id=trace.trace_id,
                        split=trace.split,
                        t=step.t,
                        k=k,
                        track3=chosen.track3 and step.t < last and step.t >= first,
                    )
                )
    return out


def build_frozen(protocol: CollectionProtocol, base_dir: Path) -> FrozenProtocol:
    """Resolve a protocol against its source corpus into the frozen form.

    Raises:
        InputError: a participant's split is absent from the source corpus, or it yields no
            item.
    """
    from trustbench.trb.corpus._store import read_corpus

    manifest, splits = read_corpus((base_dir / protocol.corpus.path).resolve())
    wanted = sorted({p.split for p in protocol.participants}, key=(*SPLITS, *HELD_OUT).index)
    traces: list[Trace] = []
    for split in wanted:
        found = sorted(splits.get(split, []), key=lambda t: t.trace_id)
        if not found:
            raise InputError(
                f"the source corpus has no {split!r} traces for the participants assigned to it",
                location="participants",
            )
        traces += found[: protocol.items.max_traces]
    items = _items(protocol, traces)
    for split in wanted:
        if not any(item.split == split for item in items):
            raise InputError(f"no item selected in split {split!r}", location="items")
    body = {
        "format": FORMAT,
        "protocol": protocol.model_dump(mode="json"),
        "source_corpus_sha256": manifest.corpus_sha256,
        "traces": [t.model_dump(mode="json") for t in traces],
        "items": [i.model_dump(mode="json") for i in items],
    }
    return FrozenProtocol.model_validate({**body, "protocol_sha256": canonical_sha256(body)})


def freeze_protocol(path: Path, out: Path) -> FrozenProtocol:
    """Freeze the protocol file `path` into the collection folder `out` (a new folder).

    Raises:
        InputError: `out` already holds a frozen protocol, or the protocol is invalid.
    """
    frozen = build_frozen(load_protocol(path), path.parent)
    if (out / PROTOCOL_FILE).exists():
        raise InputError("already frozen here; freeze into a new folder", location=str(out))
    out.mkdir(parents=True, exist_ok=True)
    (out / PROTOCOL_FILE).write_text(
        json.dumps(frozen.model_dump(mode="json"), indent=1, sort_keys=True), encoding="utf-8"
    )
    return frozen


def read_frozen(folder: Path) -> FrozenProtocol:
    """Read `protocol.json` and check its hash (a hand-edited protocol is refused).

    Raises:
        InputError: missing or invalid file.
        CheckFailed: the recorded hash does not match the content.
    """
    from trustbench.errors import CheckFailed

    path = folder / PROTOCOL_FILE
    if not path.exists():
        raise InputError(
            "not a collection folder (no protocol.json); run `trustbench trb collect freeze`",
            location=str(folder),
        )
    raw = read_input_file(path)  # a FIFO or a device in its place is refused, never read
    try:
        frozen = FrozenProtocol.model_validate_json(raw)
    except ValidationError as error:
        first = error.errors()[0]
        pointer = "/".join(map(str, first["loc"]))
        raise InputError(first["msg"], location=f"{path}#/{pointer}") from None
    body = frozen.model_dump(mode="json", exclude={"protocol_sha256"})
    if canonical_sha256(body) != frozen.protocol_sha256:
        raise CheckFailed("protocol.json differs from its recorded hash", location=str(path))
    return frozen
