"""Corpus storage: one JSONL file per split, a manifest of hashes, and the training guard."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import ValidationError

from trustbench._canonical import read_input_file
from trustbench.errors import CheckFailed, InputError
from trustbench.trb.adapter._protocol import TRB_VERSION
from trustbench.trb.corpus._format import (
    HELD_OUT,
    SYNTHETIC_TO_HUMAN_CAP,
    TRB_SCORE_MIN_HUMAN_LABELS,
    TRB_SCORE_MIN_HUMAN_PHI,
    AnyTrace,
    CorpusManifest,
    ProvenanceShare,
    SlotTrace,
    SplitInfo,
    Trace,
    canonical_sha256,
    trace_sha256,
)
from trustbench.trb.corpus._generate import split_encodings
from trustbench.trb.world import (
    DEFAULT_WORLD_ID,
    SlotWorld,
    TextParseError,
    text_world_for_task,
    world_for,
    world_sha256,
)

# ------------------------------------------------------------------------------------------------
# Counterfactual provenance: the synthetic share and the spec's 3:1 cap (§5, whitepaper §4.4).


def provenance_share(traces: Sequence[AnyTrace]) -> ProvenanceShare:
    """Count counterfactual provenance and decide the cap status (refusal is `check_cap`)."""
    synthetic = human = 0
    for trace in traces:
        for step in trace.steps:
            for cf in step.counterfactuals:
                if cf.provenance == "synthetic":
                    synthetic += 1
                else:
                    human += 1
    total = synthetic + human
    if human == 0:
        status = "no_human_data"
    elif synthetic / human <= SYNTHETIC_TO_HUMAN_CAP:
        status = "met"
    else:
        status = "violated"
    return ProvenanceShare(
        synthetic=synthetic,
        human=human,
        synthetic_share=synthetic / total if total else None,
        cap_status=status,  # type: ignore[arg-type]
    )


def check_cap(share: ProvenanceShare, kind: str, where: str) -> None:
    """Refuse a corpus whose provenance contradicts its declared kind.

    A `reference_world` corpus is allowed with no human data because it claims none: its
    results are labelled reference-agent results, not a TRB score. A corpus claiming human
    paired data must have some. A human corpus *over* the spec's 3:1 synthetic:human cap is
    loaded, not refused, so that what was collected can still be looked at: its manifest says
    `cap_status = "violated"` and every report labels it over the cap and not a TRB score
    (`trb/track/_profile.py`).
    """
    if share.human and kind == "reference_world":
        raise CheckFailed(
            f"corpus declares kind 'reference_world' but holds {share.human} human counterfactuals",
            location=where,
        )
    if kind == "human_paired" and share.cap_status == "no_human_data":
        raise CheckFailed(
            "corpus declares kind 'human_paired' but holds 0 human counterfactuals "
            f"({share.synthetic} synthetic)",
            location=where,
        )


def over_cap_label(share: ProvenanceShare) -> str | None:
    """The label every report of an over-cap corpus carries (None when the cap holds)."""
    if share.cap_status != "violated":
        return None
    ratio = share.synthetic / share.human
    return (
        f"OVER the spec cap: synthetic:human counterfactual ratio {ratio:.2f}:1 exceeds "
        f"{SYNTHETIC_TO_HUMAN_CAP:.0f}:1 ({share.synthetic} synthetic, {share.human} human); "
        "these results are not a TRB score"
    )


def trb_score_evidence(eval_traces: Sequence[AnyTrace]) -> dict[str, object]:
    """Whether a run's eval split holds the real paired data a TRB score needs, and its line.

    Spec §6 allows a "TRB score" only once Tracks 1 and 3 have real paired data. The corpus
    kind alone cannot say so (one collected answer makes a corpus `human_paired`), so the run's
    own eval traces are counted: at least `TRB_SCORE_MIN_HUMAN_PHI` (N1) counterfactuals whose
    Phi(r') is a human continuation, within the 3:1 synthetic cap on that split, and at least
    `TRB_SCORE_MIN_HUMAN_LABELS` (N3) Track 3 labels on human-session outcome traces. Anything
    less is "not a TRB score", and the line says how far short it is.

    Returns:
        `human_phi` (h), `human_labels` (k), the split's `cap_status`, the declared `n1` and
        `n3`, `is_score`, and `line` (None for a score).
    """
    human_phi = sum(
        cf.continuation_source == "human"
        for trace in eval_traces
        for step in trace.steps
        for cf in step.counterfactuals
    )
    human_labels = sum(
        step.attribution is not None
        for trace in eval_traces
        if trace.session
        for step in trace.steps
    )
    cap = provenance_share(eval_traces).cap_status
    is_score = (
        human_phi >= TRB_SCORE_MIN_HUMAN_PHI
        and human_labels >= TRB_SCORE_MIN_HUMAN_LABELS
        and cap == "met"
    )
    line = None
    if not is_score:
        line = (
            f"not a TRB score: Track 1 has {human_phi} human items, Track 3 has {human_labels} "
            f"(the eval split needs {TRB_SCORE_MIN_HUMAN_PHI} human-Phi r' within the 3:1 "
            f"synthetic cap, now {cap}, and {TRB_SCORE_MIN_HUMAN_LABELS} labelled human-session "
            "outcomes)"
        )
    return {
        "human_phi": human_phi,
        "human_labels": human_labels,
        "cap_status": cap,
        "n1": TRB_SCORE_MIN_HUMAN_PHI,
        "n3": TRB_SCORE_MIN_HUMAN_LABELS,
        "is_score": is_score,
        "line": line,
    }


def split_bytes(traces: Sequence[AnyTrace]) -> bytes:
    """The exact JSONL bytes of a split file (one sorted-key JSON object per line)."""
    return "".join(
        json.dumps(t.model_dump(mode="json"), sort_keys=True) + "\n" for t in traces
    ).encode()


def world_of(splits: Mapping[str, Sequence[AnyTrace]]) -> str:
    """The world a corpus's traces are recorded in: the text world their task kinds name.

    The corridor when no trace states a task; else the registered text world (built in or a
    plug-in's) that states the traces' task kinds.

    Raises:
        InputError: some traces state a text task and others do not, or their task kinds
            belong to two worlds (one corpus holds one world), or to none registered.
    """
    worlds = set()
    for traces in splits.values():
        for trace in traces:
            if isinstance(trace, SlotTrace):
                worlds.add(trace.world_id)
                continue
            if trace.task is None:
                worlds.add(DEFAULT_WORLD_ID)
                continue
            try:
                worlds.add(text_world_for_task(trace.task).declaration.world_id)
            except TextParseError as error:
                raise InputError(str(error), location=f"{trace.trace_id}/task/kind") from None
    if len(worlds) > 1:
        raise InputError(
            f"the traces are recorded in worlds {sorted(worlds)}: one corpus holds one world",
            location="corpus",
        )
    return worlds.pop() if worlds else DEFAULT_WORLD_ID


def manifest_for(
    splits: Mapping[str, Sequence[AnyTrace]],
    kind: str = "reference_world",
    encodings: dict[str, str] | None = None,
    collected_by: dict[str, tuple[str, ...]] | None = None,
    *,
    world_id: str | None = None,
) -> CorpusManifest:
    """The manifest of a corpus (the same hashes `write_corpus` writes); checks the cap.

    Args:
        splits: Traces per split.
        kind: `reference_world` or `human_paired`.
        encodings: Split -> report encoding where not `standard`; by default the generator's
            declaration (`transfer_encoding` is `renamed`, see `TRANSFER_ENCODINGS`).
        collected_by: Split -> who collected its traces (`trb import`); none by default.
        world_id: The registered world the traces are recorded in (default: `world_of`);
            the manifest records it with the digest of its declaration.

    Raises:
        InputError: A trace is stored under a split other than its own, or an unknown
            report encoding is named.
        CheckFailed: The synthetic-to-human cap is broken or the declared kind is false.
    """
    from trustbench.trb.proxy._local import STANDARD  # trb.proxy imports torch

    encodings = split_encodings(splits) if encodings is None else encodings
    for split, name in encodings.items():
        _check_encoding(name, f"encodings/{split}")
    infos: dict[str, SplitInfo] = {}
    for split, traces in splits.items():
        for trace in traces:
            if trace.split != split:
                raise InputError(
                    f"trace {trace.trace_id} has split {trace.split!r}", location=split
                )
        infos[split] = SplitInfo(
            file=f"{split}.jsonl",
            sha256=hashlib.sha256(split_bytes(traces)).hexdigest(),
            n_traces=len(traces),
            trace_sha256=tuple(trace_sha256(t) for t in traces),
            report_encoding=encodings.get(split, STANDARD.name),
            collected_by=(collected_by or {}).get(split, ()),
        )
    share = provenance_share([t for traces in splits.values() for t in traces])
    check_cap(share, kind, "corpus")
    return CorpusManifest(
        trb_version=TRB_VERSION,
        kind=kind,  # type: ignore[arg-type]
        splits=infos,
        provenance=share,
        corpus_sha256=corpus_hash(infos),
        world_id=world_id or world_of(splits),
        world_sha256=world_sha256(world_id or world_of(splits)),
    )


def corpus_hash(infos: dict[str, SplitInfo]) -> str:
    """SHA-256 of the canonical JSON of the split hashes, plus each non-standard encoding.

    A split asked in another encoding is another context with the same files, so its
    encoding is part of the hash; standard splits add nothing, so older corpora keep theirs.
    """
    from trustbench.trb.proxy._local import STANDARD  # trb.proxy imports torch

    pinned: dict[str, str] = {k: v.sha256 for k, v in infos.items()}
    pinned |= {
        f"{k}#report_encoding": v.report_encoding
        for k, v in infos.items()
        if v.report_encoding != STANDARD.name
    }
    return canonical_sha256(dict(sorted(pinned.items())))


def manifest_world(manifest: CorpusManifest) -> dict[str, str]:
    """The world id and declaration digest every result row carries.

    Keys `world_id` and `world_sha256`; a manifest written before worlds names the registered
    corridor's digest.
    """
    return {
        "world_id": manifest.world_id,
        "world_sha256": manifest.world_sha256 or world_sha256(manifest.world_id),
    }


def _check_world(manifest: CorpusManifest, path: Path) -> None:
    """The manifest's world is registered and its declaration is the one the corpus names.

    Raises:
        InputError: the world is not registered (naming the registered ones).
        CheckFailed: the registered declaration's digest differs from the recorded one.
    """
    try:
        registered = world_sha256(manifest.world_id)
    except InputError as error:
        raise InputError(error.message, location=f"{path}#/world_id") from None
    if manifest.world_sha256 is not None and manifest.world_sha256 != registered:
        raise CheckFailed(
            f"the corpus was written for world {manifest.world_id!r} declared as "
            f"{manifest.world_sha256}; the registered declaration is {registered}",
            location=f"{path}#/world_sha256",
        )


def _check_encoding(name: str, where: str) -> None:
    from trustbench.trb.proxy._local import SLOT_ENCODINGS  # trb.proxy imports torch

    if name not in SLOT_ENCODINGS:
        raise InputError(
            f"unknown report encoding {name!r} (known: {', '.join(SLOT_ENCODINGS)})",
            location=where,
        )


def write_corpus(
    folder: Path,
    splits: Mapping[str, Sequence[AnyTrace]],
    kind: str = "reference_world",
    encodings: dict[str, str] | None = None,
    collected_by: dict[str, tuple[str, ...]] | None = None,
    *,
    world_id: str | None = None,
) -> CorpusManifest:
    """Write one JSONL file per split and `manifest.json`; return the manifest.

    `encodings`, `collected_by` and `world_id` as in `manifest_for` (by default the generator's
    declaration, no collector and the traces' world).
    """
    manifest = manifest_for(splits, kind, encodings, collected_by, world_id=world_id)
    folder.mkdir(parents=True, exist_ok=True)
    for split, traces in splits.items():
        (folder / f"{split}.jsonl").write_bytes(split_bytes(traces))
    (folder / "manifest.json").write_text(manifest.model_dump_json(indent=2), encoding="utf-8")
    return manifest


def read_corpus(folder: Path) -> tuple[CorpusManifest, dict[str, list[Trace]]]:
    """Read and verify a corpus of the corridor or a text world (`read_corpus_of_any_world`).

    Raises:
        InputError: as `read_corpus_of_any_world`, or the corpus is of a world with its own
            slots (`SlotWorld`), whose `SlotTrace` lines only Tracks 1 and 3 read.
    """
    manifest, splits = read_corpus_of_any_world(folder)
    traces = {split: [t for t in ts if isinstance(t, Trace)] for split, ts in splits.items()}
    if any(len(traces[split]) != len(ts) for split, ts in splits.items()):
        raise InputError(
            f"world {manifest.world_id} declares its own slots: its traces are read by the "
            "trb/profile track's Tracks 1 and 3 only, not here",
            location=f"{folder / 'manifest.json'}#/world_id",
        )
    return manifest, traces


def read_corpus_of_any_world(folder: Path) -> tuple[CorpusManifest, dict[str, list[AnyTrace]]]:
    """Read and verify a corpus folder: every split file must match its manifest hash.

    A corpus of a world with its own slots (`SlotWorld`) holds `SlotTrace` lines, every other
    one `Trace` lines.

    A split sealed to its collector's key (`_sealed`) is opened with the key in
    `$TRUSTBENCH_HELDOUT_KEY`, and left out of the returned splits without it.
    """
    path = folder / "manifest.json"
    raw_manifest = read_input_file(path, missing="corpus manifest not found")  # never a FIFO
    try:
        manifest = CorpusManifest.model_validate_json(raw_manifest)
    except ValidationError as error:
        raise InputError(
            f"invalid manifest: {error.errors()[0]['msg']}", location=str(path)
        ) from None
    for split, info in manifest.splits.items():
        _check_encoding(info.report_encoding, f"{path}#/splits/{split}/report_encoding")
    _check_world(manifest, path)
    if corpus_hash(manifest.splits) != manifest.corpus_sha256:
        raise CheckFailed(
            "corpus_sha256 differs from the hash of the split hashes and report encodings",
            location=str(path),
        )
    splits: dict[str, list[AnyTrace]] = {}
    line_model = SlotTrace if isinstance(world_for(manifest.world_id), SlotWorld) else Trace
    withheld = False
    for split, info in manifest.splits.items():
        file = folder / info.file
        if info.sealed is None:
            raw = read_input_file(file)
        else:
            from trustbench.trb.corpus._sealed import open_split  # cryptography: when sealed

            opened = open_split(folder, info)
            if opened is None:  # no collector's key given: the split stays sealed, left out
                withheld = True
                continue
            raw = opened
        if hashlib.sha256(raw).hexdigest() != info.sha256:
            raise CheckFailed("split file hash differs from the manifest", location=str(file))
        traces: list[AnyTrace] = []
        for lineno, line in enumerate(raw.decode().splitlines(), start=1):
            try:
                traces.append(line_model.model_validate_json(line))
            except ValidationError as error:
                first = error.errors()[0]
                pointer = "/" + "/".join(str(p) for p in first["loc"])
                raise InputError(first["msg"], location=f"{file}:{lineno}#{pointer}") from None
        splits[split] = traces
    # With a split left sealed, the written manifest's counts (checked when it was written)
    # stand for the whole corpus.
    share = (
        manifest.provenance
        if withheld
        else provenance_share([t for ts in splits.values() for t in ts])
    )
    check_cap(share, manifest.kind, str(folder))
    return manifest, splits


def assert_trainable(traces: list[Trace], manifest: CorpusManifest) -> None:
    """Refuse to train on any trace whose content hash belongs to a held-out split.

    Checked by hash, so a renamed or re-labelled eval trace is still caught.
    """
    held_out = {
        h
        for split in HELD_OUT
        if split in manifest.splits
        for h in manifest.splits[split].trace_sha256
    }
    for trace in traces:
        if trace.split in HELD_OUT or trace_sha256(trace) in held_out:
            raise CheckFailed(
                f"training refused: trace {trace.trace_id} belongs to a held-out split "
                f"({'/'.join(HELD_OUT)}) by its content hash",
                location=f"corpus {manifest.corpus_sha256[:12]}",
            )
