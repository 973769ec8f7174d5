"""`rtb export` and `rtb audit` on a sealed held-out set: export needs no key, audits do.

`rtb export --corpus SET` copies the set's clear parts, which are exactly an export without its
grader-only map (that stays sealed). The audits score rules and learners against the reference
decisions, so `rtb audit --corpus SET` opens the answer key into a temporary folder with the
owner's key for the length of the audit, and refuses without it.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from trustbench.rtb.corpus._load import Corpus, load_corpus
from trustbench.rtb.heldout._corpus import SealedSet, is_sealed_set
from trustbench.rtb.heldout._seal import CLEAR_FILES, open_set


@contextmanager
def corpus_with_labels(path: Path | None, key_file: Path | None, what: str) -> Iterator[Corpus]:
    """The corpus at `path`; a sealed set opened with the owner's key (refused without it)."""
    if path is None or not is_sealed_set(path):
        yield load_corpus(path)
        return
    from trustbench.rtb.heldout._pipeline import owner_key

    sealed = SealedSet(path)
    private = owner_key(sealed, what, key_file)
    with tempfile.TemporaryDirectory() as scratch:
        open_set(path, private, Path(scratch))
        yield load_corpus(Path(scratch) / "corpus")


def export_clear(path: Path, out: Path) -> int:
    """Copy a sealed set's candidate-visible parts into `out`; returns the number of inputs."""
    sealed = SealedSet(path)
    sealed.check_pins()
    shutil.copytree(path / "inputs", out / "inputs", dirs_exist_ok=True)
    for rel in CLEAR_FILES:
        shutil.copyfile(path / rel, out / rel)
    return len(sealed.evaluation_ids())
