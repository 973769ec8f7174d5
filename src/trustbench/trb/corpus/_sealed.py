"""Sealed transfer contexts: a held-out TRB split sealed to the key of the party that collected it.

Spec §5: "Transfer contexts (Track 6) must be collected by a party that did not train the
model." A split whose file sits in the clear in the corpus folder can be read, and trained on,
by whoever holds the folder. So a transfer split can be sealed like an RTB held-out set
(docs/held-out-sets.md), with the same code, not a copy of it:

- the split's JSONL bytes are encrypted with `rtb/heldout/_crypto.py`'s `trustbench-seal-v1`
  envelope to the collector's X25519 key (`trustbench rtb keygen-seal`), the clear file is
  removed, and the manifest's `SplitInfo.sealed` records the set id, the recipient, the budget
  and the envelope's hash; `sha256` stays the clear bytes' hash, so the corpus hash does not
  change and the opened bytes are checked against it;
- the split is opened in memory only where the collector's private key is given
  (`$TRUSTBENCH_HELDOUT_KEY`); without it the split is left out of what `read_corpus`
  returns, and a run that asks for it is refused, naming the split and its collector;
- every freeze and every run of a `trb/profile` experiment over a sealed split is counted in
  the split's exposure log (`sealed/<split>/exposure.jsonl`) through
  `rtb/heldout/_pipeline.py`'s `freeze_against` / `record_run` (hash-chained, authenticated
  with the exposure key derived from the collector's key, refused past the budget without a
  `freeze --reason`);
- the record and the report name, per transfer context, who collected it and whether it was
  sealed (`transfer_contexts`).

Not done: the RTB set's report redaction (a candidate's report without per-case rows). TRB
trace ids are already opaque per run, and a TRB record holds aggregate figures per split.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from trustbench._canonical import read_input_file, sha256_hex
from trustbench.errors import InputError
from trustbench.trb.corpus._format import CorpusManifest, SealedSplit, SplitInfo

if TYPE_CHECKING:
    from trustbench.core import Manifest

SEALED_SPLIT_FORMAT = "trustbench-trb-sealed-split-v1"
"""Names a sealed split's envelope (its associated data) and its exposure log's genesis."""
UNSEALABLE = ("train", "dev", "eval")
"""Splits that are not transfer contexts: the project's own, never sealed to a third party."""


def _aad(set_id: str) -> str:
    return f"{SEALED_SPLIT_FORMAT}:{set_id}"


def log_folder(folder: Path, split: str) -> Path:
    """The folder holding a sealed split's envelope and exposure log."""
    return folder / "sealed" / split


def split_file(info: SplitInfo) -> str:
    """The file that holds a split's bytes in the corpus folder: the envelope once sealed."""
    return info.sealed.file if info.sealed is not None else info.file


def exposure_manifest(info: SplitInfo) -> dict[str, Any]:
    """What the exposure log functions read of a set, for one sealed split."""
    assert info.sealed is not None
    return {
        "set_id": info.sealed.set_id,
        "recipient": info.sealed.recipient,
        "budget": info.sealed.budget,
        "case_count": info.n_traces,
        "withheld": "the split's traces (observations, r snapshots, r' and Phi(r'), labels), "
        "encrypted to its collector's key",
    }


def _manifest(folder: Path) -> CorpusManifest:
    path = folder / "manifest.json"
    raw = read_input_file(path, missing="corpus manifest not found")
    try:
        return CorpusManifest.model_validate_json(raw)
    except ValidationError as error:
        raise InputError(
            f"invalid manifest: {error.errors()[0]['msg']}", location=str(path)
        ) from None


def seal_split(folder: Path, split: str, recipient: str, *, budget: int) -> SealedSplit:
    """Seal one transfer split of a corpus folder to its collector's key, in place.

    Raises:
        InputError: Not a transfer split, unknown, already sealed, or a bad recipient key.
    """
    from trustbench.rtb.heldout._crypto import parse_public, seal

    parse_public(recipient)
    if budget < 1:
        raise InputError("--budget must be at least 1 run")
    manifest = _manifest(folder)
    info = manifest.splits.get(split)
    if info is None or split in UNSEALABLE:
        transfer = [s for s in manifest.splits if s not in UNSEALABLE]
        raise InputError(
            f"{split!r} is not a transfer split of this corpus (its transfer splits: "
            f"{', '.join(transfer) or 'none'})",
            location=str(folder),
        )
    if info.sealed is not None:
        raise InputError(f"split {split!r} is already sealed", location=str(folder))
    clear = read_input_file(folder / info.file)
    if sha256_hex(clear) != info.sha256:
        raise InputError(
            "split file hash differs from the manifest", location=str(folder / info.file)
        )
    set_id = f"trb-{split}-{secrets.randbits(64):016x}"
    envelope = seal(clear, recipient, _aad(set_id))
    target = log_folder(folder, split) / f"{split}.jsonl.seal"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(envelope)
    sealed = SealedSplit(
        set_id=set_id,
        recipient=recipient.strip(),
        budget=budget,
        file=target.relative_to(folder).as_posix(),
        sha256=sha256_hex(envelope),
    )
    splits = {**manifest.splits, split: info.model_copy(update={"sealed": sealed})}
    updated = manifest.model_copy(update={"splits": splits})
    temp = folder / "manifest.json.tmp"
    temp.write_text(updated.model_dump_json(indent=2), encoding="utf-8")
    os.replace(temp, folder / "manifest.json")
    (folder / info.file).unlink()  # last: until here the clear split is still the truth
    return sealed


def open_split(folder: Path, info: SplitInfo) -> bytes | None:
    """A sealed split's clear bytes, or None without the collector's key in the environment.

    Raises:
        InputError: The envelope changed since sealing, or the key is not the collector's.
    """
    from trustbench.rtb.heldout._crypto import KEY_ENV, read_private_key, unseal

    assert info.sealed is not None
    if not os.environ.get(KEY_ENV, "").strip():
        return None
    path = folder / info.sealed.file
    try:
        envelope = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read the sealed split: {exc}", location=str(path)) from None
    if sha256_hex(envelope) != info.sealed.sha256:
        raise InputError(
            "the sealed split's bytes differ from its manifest pin", location=str(path)
        )
    return unseal(envelope, read_private_key(None), _aad(info.sealed.set_id))


def withheld_message(split: str, info: SplitInfo) -> str:
    """Why a run cannot use a sealed split whose key was not given."""
    from trustbench.rtb.heldout._crypto import KEY_ENV

    by = ", ".join(info.collected_by) or "its collector"
    return (
        f"split {split!r} is sealed to the key of the party that collected it ({by}); "
        f"set ${KEY_ENV} to that private key to run it, or drop it from track_options.splits"
    )


def count_exposure(
    folder: Path,
    corpus: CorpusManifest,
    splits: list[str],
    manifest: Manifest,
    *,
    run_dir: Path | None = None,
    reason: str = "",
) -> list[str]:
    """Record a freeze (no `run_dir`) or a run of the experiment in each sealed split's log.

    Refused (InputError) for a tampered log, without the split's exposure key, and past the
    budget without a reason, exactly as for an RTB held-out set.

    Returns:
        One note line per sealed split (its runs so far against its budget).
    """
    from trustbench.rtb.heldout._pipeline import (
        candidate_code_hashes,
        exposure_summary,
        freeze_against,
        keep_run_record,
        now_utc,
        operator_exposure_key,
        record_run,
        who,
    )

    notes = []
    candidates = [c.name for c in manifest.spec.candidates]
    trials = manifest.spec.trials_per_case
    for split in splits:
        info = corpus.splits.get(split)
        if info is None or info.sealed is None:
            continue
        logs, view = log_folder(folder, split), exposure_manifest(info)
        key = operator_exposure_key(view)
        if run_dir is None:
            freeze_against(
                logs, view, key=key, candidates=candidates, trials=trials, at=now_utc(),
                by=who(), reason=reason.strip(), experiment=manifest.manifest_sha256,
            )  # fmt: skip
        else:
            entry = record_run(
                logs, view, key=key, experiment=manifest.manifest_sha256, candidates=candidates,
                candidate_code=candidate_code_hashes(manifest), trials=trials, at=now_utc(),
                by=who(),
            )  # fmt: skip
            keep_run_record(run_dir, entry)
        summary = exposure_summary(logs, view, key)
        notes.append(
            f"sealed transfer split {split} ({info.sealed.set_id}): run {summary['runs']} "
            f"times (budget {summary['budget']})"
        )
    return notes


def transfer_contexts(folder: Path, corpus: CorpusManifest, splits: list[str]) -> dict[str, Any]:
    """Per transfer context of a run: who collected it and whether it was sealed.

    A sealed one adds its set id and its exposure count (read without a key: the chain is
    checked, not its authentication).
    """
    from trustbench.rtb.heldout._pipeline import exposure_summary

    out: dict[str, Any] = {}
    for split in splits:
        info = corpus.splits.get(split)
        if info is None or split in UNSEALABLE:
            continue
        entry: dict[str, Any] = {"collected_by": list(info.collected_by), "sealed": False}
        if info.sealed is not None:
            summary = exposure_summary(log_folder(folder, split), exposure_manifest(info))
            entry |= {
                "sealed": True,
                "set_id": info.sealed.set_id,
                "runs": summary["runs"],
                "budget": summary["budget"],
                "log_problems": summary["log_problems"],
            }
        out[split] = entry
    return out


def transfer_context_lines(contexts: dict[str, Any]) -> list[str]:
    """The report's sentence per transfer context."""
    lines = []
    for split, entry in contexts.items():
        by = ", ".join(entry["collected_by"]) or "the benchmark authors (generated, not collected)"
        sealed = (
            f"sealed to its collector's key ({entry['set_id']}; run {entry['runs']} times, "
            f"budget {entry['budget']})"
            if entry["sealed"]
            else "not sealed (its traces are in the clear in the corpus folder)"
        )
        lines.append(f"{split}: collected by {by}; {sealed}.")
    return lines
