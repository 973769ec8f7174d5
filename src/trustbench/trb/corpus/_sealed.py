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

- the run folder's report is the split's *candidate's report* (`sealed_report_view`, with the
  RTB set's wording, `held_out_section`): figures and intervals per split, no per-trial row,
  trace id, context, r / r' value or continuation of the split; `trb sealed-report` writes
  *the owner's report* (`owner_split_report`) elsewhere, with the collector's key.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from trustbench._canonical import read_input_file, sha256_hex
from trustbench.errors import InputError
from trustbench.trb.corpus._format import CorpusManifest, SealedSplit, SplitInfo

if TYPE_CHECKING:
    from trustbench.core import LedgerContents, Manifest, TrackAnalysis
    from trustbench.core.report import TableBlock
    from trustbench.trb.corpus._format import AnyTrace

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
    from trustbench.rtb.heldout._crypto import KEY_ENV, read_private_key

    if not os.environ.get(KEY_ENV, "").strip():
        return None
    return _unseal_split(folder, info, read_private_key(None))


def _unseal_split(folder: Path, info: SplitInfo, private: str) -> bytes:
    """The split's clear bytes, opened with `private`; refused for a changed envelope or key."""
    from trustbench.rtb.heldout._crypto import unseal

    assert info.sealed is not None
    path = folder / info.sealed.file
    try:
        envelope = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read the sealed split: {exc}", location=str(path)) from None
    if sha256_hex(envelope) != info.sealed.sha256:
        raise InputError(
            "the sealed split's bytes differ from its manifest pin", location=str(path)
        )
    return unseal(envelope, private, _aad(info.sealed.set_id))


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


# ------------------------------------------------------------------------------------------------
# The candidate's report and the owner's report of a run over a sealed split (as for an RTB set).

WITHHELD_FROM_CANDIDATE = (
    "no per-trial row, trace id, context, r or r' value or continuation of the sealed split's "
    "traces"
)
"""What the run folder's report of a sealed split leaves out (`record.json` says it per split)."""
OWNER_COMMAND = "trustbench trb sealed-report --split SPLIT --key KEY --run RUN --out DIR"
"""How the collector writes the owner's report of a run, outside the run folder."""
SENT_TO_ADAPTERS = (
    "The adapters were sent the split's traces (contexts, r and the r' overrides), opened in the "
    "harness process with the collector's key; the run's ledger (ledger.sqlite) keeps every hook "
    "call sent, to verify and resume the run, so it stays with the operator, never with a "
    "candidate's side."
)
"""What a sealed split's candidate side received, and where that is kept."""
OWNER_ROWS = "trb_sealed_split"
"""The owner's report's part in `record.trials.jsonl`: one row per trial of the sealed split."""

_OWNER_SPLIT: ContextVar[str | None] = ContextVar("trb_owner_split_report", default=None)
"""Set only by `trb sealed-report` (`owner_split_report`): that split's detail is kept."""


@contextmanager
def owner_split_report(split: str) -> Iterator[None]:
    """Within: a TRB run's report is the owner's report of `split` (its trials in full)."""
    token = _OWNER_SPLIT.set(split)
    try:
        yield
    finally:
        _OWNER_SPLIT.reset(token)


def sealed_splits(corpus: CorpusManifest, splits: list[str]) -> list[str]:
    """The splits of a run that are sealed to their collector's key."""
    return [s for s in splits if (info := corpus.splits.get(s)) is not None and info.sealed]


def _attempt_texts(ledger: LedgerContents) -> dict[str, dict[str, Any]]:
    """Trial id -> the hook calls sent to the adapter and their outputs (the last attempt's)."""
    texts: dict[str, dict[str, Any]] = {}
    for attempt in ledger.attempts:
        request = attempt.get("request")
        raw = attempt.get("raw_response")
        outputs = json.loads(raw).get("outputs") if isinstance(raw, str) and raw else None
        hooks = request.get("hooks") if isinstance(request, dict) else None
        texts[str(attempt["trial_id"])] = {"hooks": hooks, "outputs": outputs}
    return texts


def sealed_trial_rows(
    ledger: LedgerContents, cases: Mapping[str, AnyTrace], split: str
) -> list[dict[str, Any]]:
    """The owner's rows: every trial of `split`, with its trace, what was sent and answered."""
    texts = _attempt_texts(ledger)
    rows = []
    for trial in ledger.trials:
        trace = cases.get(str(trial["case_id"]))
        if trace is None or trace.split != split:
            continue
        recorded = trial.get("outcome")
        outcome: dict[str, Any] = recorded if isinstance(recorded, dict) else {}
        rows.append({
            "trace_id": trace.trace_id, "split": split, "candidate": trial["candidate"],
            "trial_index": trial["trial_index"], "status": trial["status"],
            "error": trial.get("error"), "measures": outcome.get("measures"),
            **texts.get(str(trial["trial_id"]), {"hooks": None, "outputs": None}),
            "trace": trace.model_dump(mode="json"),
        })  # fmt: skip
    return rows


def _owner_table(split: str, rows: list[dict[str, Any]]) -> TableBlock:
    from trustbench.core.report import TableBlock  # the report package: only when reporting

    return TableBlock(
        title=f"Owner's detail: every trial of the sealed split {split}",
        columns=["trace", "candidate", "trial", "status", "hook calls", "measures"],
        rows=[
            [
                row["trace_id"],
                row["candidate"],
                str(row["trial_index"]),
                row["status"],
                str(len(row["hooks"] or [])),
                json.dumps(row["measures"], sort_keys=True),
            ]
            for row in rows
        ],
        filterable=True,
        scroll=True,
        note="Each trial's trace, hook calls and outputs are in record.trials.jsonl "
        f"(part {OWNER_ROWS}).",
    )


def sealed_report_view(
    analysis: TrackAnalysis,
    folder: Path,
    corpus: CorpusManifest,
    splits: list[str],
    *,
    ledger: LedgerContents,
    cases: Mapping[str, AnyTrace],
) -> TrackAnalysis:
    """A TRB run's report with its sealed splits redacted: the candidate's report of each.

    As for an RTB held-out set (`rtb/heldout/_pipeline.py`), the report a candidate's developer
    may receive holds the sealed split's figures and intervals only: a row naming a trace beside
    what the adapter answered lets whoever reads it rebuild the collector's contexts, the thing
    sealing keeps out of reach. Rows of clear splits stay. Within `owner_split_report(S)` the
    split S is reported in full instead (`trb sealed-report`).
    """
    from trustbench.rtb.heldout._pipeline import exposure_summary, held_out_section

    sealed = sealed_splits(corpus, splits)
    if not sealed:
        return analysis
    owner_split = _OWNER_SPLIT.get()
    trb = analysis.record["trb"]
    # The key opens the split in the harness process: an adapter run there had it in reach.
    beside_key = [
        name for name, adapter in trb["adapters"].items()
        if str(adapter.get("isolation", "")).startswith("in-process")
    ]  # fmt: skip
    contexts = dict(trb["corpus"]["transfer_contexts"])
    sections: list[Any] = []
    for split in sealed:
        info = corpus.splits[split]
        owner = split == owner_split
        contexts[split] = {
            **contexts.get(split, {}),
            "held_out_report": "owner" if owner else "candidate",
            "withheld": "nothing (the owner's report)" if owner else WITHHELD_FROM_CANDIDATE,
        }
        summary = {
            **exposure_summary(log_folder(folder, split), exposure_manifest(info)),
            "answer_key_available_to_candidate": bool(beside_key),
        }
        sections.append(
            held_out_section(
                summary, owner, withheld=WITHHELD_FROM_CANDIDATE,
                owner_command=OWNER_COMMAND.replace("SPLIT", split), sent=SENT_TO_ADAPTERS,
            )
        )  # fmt: skip
    redacted = set(sealed) - {owner_split}
    trial_rows = {
        part: [row for row in rows if row.get("split") not in redacted]
        for part, rows in analysis.trial_rows.items()
    }
    if owner_split in sealed:
        rows = sealed_trial_rows(ledger, cases, owner_split)
        trial_rows[OWNER_ROWS] = rows
        sections.append(_owner_table(owner_split, rows))
    corpus_record = {**trb["corpus"], "transfer_contexts": contexts}
    return dataclasses.replace(
        analysis,
        sections=[*sections, *analysis.sections],
        record={**analysis.record, "trb": {**trb, "corpus": corpus_record}},
        trial_rows=trial_rows,
    )


def verified_owner(
    folder: Path, split: str, key_file: Path | None, run_dir: Path
) -> tuple[str, dict[str, Any]]:
    """The collector's private key for `split`'s owner's report, and the split's checked count.

    The key must open the split (a wrong key or an altered envelope is refused) and
    authenticate its exposure log, which must still hold this run's entry.

    Raises:
        InputError: Not a sealed split of this run's corpus, no key given, or the wrong key.
        CheckFailed: The exposure log or this run's kept entry shows a change.
    """
    from trustbench.rtb.heldout._crypto import KEY_ENV
    from trustbench.rtb.heldout._pipeline import read_owner_key, verified_summary

    corpus = _manifest(folder)
    info = corpus.splits.get(split)
    if info is None or info.sealed is None:
        sealed = ", ".join(s for s, i in corpus.splits.items() if i.sealed) or "none"
        raise InputError(
            f"split {split!r} is not a sealed split of this run's corpus (sealed: {sealed})",
            location="--split",
        )
    if key_file is None and not os.environ.get(KEY_ENV, "").strip():
        raise InputError(
            f"split {split!r} is sealed to its collector's key: its owner's report needs that "
            f"private key (--key FILE or ${KEY_ENV}); refusing without it"
        )
    private, source = read_owner_key(key_file)
    _unseal_split(folder, info, private)  # refuses a key that is not the collector's
    summary = verified_summary(
        log_folder(folder, split), exposure_manifest(info), private, source, run_dir
    )
    return private, summary
