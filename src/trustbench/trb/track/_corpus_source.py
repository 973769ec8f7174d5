"""Where a `trb/profile` run's corpus comes from: a stored folder or the generated built-in.

`corpus.path` names a folder written by `trustbench trb corpus` (or any corpus in that format).
`corpus.builtin = "reference-world"` generates the reference-world corpus from
`track_options.corpus_sizes` / `corpus_seed` (one held-out split per transfer family) and
stores it once under
`$TRUSTBENCH_CACHE/trb/corpora/<key>` (generation is deterministic, so a deleted cache is
rebuilt byte for byte). Either way the run reads the stored files, and the manifest pins their
SHA-256: core refuses to run or report if one changes after freeze.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from trustbench import __version__
from trustbench.core import ExperimentSpec, ResolvedItem
from trustbench.errors import InputError
from trustbench.trb.adapter._schema import TRB_VERSION
from trustbench.trb.corpus._format import (
    TRANSFER_FAMILY_SPLITS,
    CorpusManifest,
    Trace,
    canonical_sha256,
)
from trustbench.trb.corpus._generate import (
    TRANSFER_FAMILIES,
    generate_reference_corpus,
    split_encodings,
)
from trustbench.trb.corpus._store import read_corpus, write_corpus
from trustbench.trb.proxy._slots import SLOT_ENCODINGS, STANDARD, SlotEncoding
from trustbench.trb.reference import cache_dir
from trustbench.trb.track._options import BUILTIN_CORPUS, TrbTrackOptions


@dataclass(frozen=True)
class LoadedCorpus:
    """A verified corpus folder and its traces."""

    folder: Path
    """The folder read."""
    manifest: CorpusManifest
    """Its manifest (split hashes, provenance, corpus SHA-256)."""
    splits: dict[str, list[Trace]]
    """Traces per split."""

    def encoding(self, split: str) -> SlotEncoding:
        """The slot encoding proxy adapters are asked in on a split (its manifest entry)."""
        info = self.manifest.splits.get(split)
        return SLOT_ENCODINGS[info.report_encoding] if info is not None else STANDARD

    def held_out(self, options: TrbTrackOptions) -> dict[str, Trace]:
        """The traces that are cases: each requested held-out split, capped by `max_traces`."""
        cases: dict[str, Trace] = {}
        for split in options.splits:
            traces = sorted(self.splits.get(split, []), key=lambda t: t.trace_id)
            for trace in traces[: options.max_traces]:
                if trace.trace_id in cases:
                    raise InputError(
                        f"trace id {trace.trace_id} appears in two splits",
                        location=str(self.folder),
                    )
                cases[trace.trace_id] = trace
        return cases


def _builtin_folder(options: TrbTrackOptions) -> Path:
    key = canonical_sha256(
        {
            "trb": TRB_VERSION,
            "trustbench": __version__,
            "sizes": dict(sorted(options.corpus_sizes.items())),
            "seed": options.corpus_seed,
            # one split per transfer family (since issue 16): its world and report encoding,
            # so a changed or added family never reuses a stored corpus
            "transfer": {
                "families": {k: v.model_dump(mode="json") for k, v in TRANSFER_FAMILIES.items()},
                "encodings": split_encodings(TRANSFER_FAMILY_SPLITS),
            },
        }
    )[:16]
    return cache_dir().parent / "corpora" / f"{BUILTIN_CORPUS}-{key}"


def corpus_folder(spec: ExperimentSpec, options: TrbTrackOptions, base_dir: Path) -> Path:
    """The corpus folder of a spec, generating the built-in corpus on first use.

    Raises:
        InputError: an unknown built-in label or a missing folder.
    """
    if spec.corpus.path is not None:
        folder = (base_dir / spec.corpus.path).resolve()
        if not (folder / "manifest.json").is_file():
            raise InputError(
                "not a TRB corpus folder (no manifest.json); write one with `trustbench trb "
                "corpus`",
                location=str(folder),
            )
        return folder
    if spec.corpus.builtin != BUILTIN_CORPUS:
        raise InputError(
            f"unknown built-in TRB corpus {spec.corpus.builtin!r} (known: {BUILTIN_CORPUS})",
            location="corpus/builtin",
        )
    folder = _builtin_folder(options)
    if not (folder / "manifest.json").is_file():
        sizes = {"train": 0, "dev": 0, "eval": 0, "transfer": 0, **options.corpus_sizes}
        splits = generate_reference_corpus(sizes, seed=options.corpus_seed, transfer_families=True)
        staging = folder.with_name(f"{folder.name}.tmp-{os.getpid()}")
        write_corpus(staging, {k: v for k, v in splits.items() if v})
        try:
            staging.rename(folder)
        except OSError:  # another process stored the same corpus first: keep theirs
            shutil.rmtree(staging, ignore_errors=True)
    return folder


_LOADED: dict[tuple[Path, str], LoadedCorpus] = {}


def load_corpus(folder: Path) -> LoadedCorpus:
    """Read and verify a corpus folder (memoised by folder and manifest bytes)."""
    digest = hashlib.sha256((folder / "manifest.json").read_bytes()).hexdigest()
    key = (folder, digest)
    if key not in _LOADED:
        manifest, splits = read_corpus(folder)
        _LOADED.clear()
        _LOADED[key] = LoadedCorpus(folder, manifest, splits)
    return _LOADED[key]


def corpus_items(corpus: LoadedCorpus) -> list[ResolvedItem]:
    """The corpus files to hash into the experiment manifest."""
    items = [ResolvedItem("corpus", "manifest.json", path=corpus.folder / "manifest.json")]
    for info in corpus.manifest.splits.values():
        items.append(ResolvedItem("corpus", info.file, path=corpus.folder / info.file))
    return items
