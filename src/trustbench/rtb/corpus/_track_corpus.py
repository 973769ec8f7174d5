"""Where an RTB track's corpus is, and what of it (and of the harness) a manifest must pin.

The reviewer, control-path and workflow tracks all resolve their corpus the same way: the
built-in starter by version label, or a user folder relative to the spec. The manifest names the
built-in one `builtin:v<version>` so a frozen run never depends on where the package is installed.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from trustbench.core import ExperimentSpec, ResolvedItem
from trustbench.errors import InputError
from trustbench.rtb.corpus._load import (
    BUILTIN_VERSION,
    BUILTIN_VERSIONS,
    Corpus,
    builtin_corpus_root,
)

BUILTIN_LABEL = f"builtin:v{BUILTIN_VERSION}"
"""How a manifest names the default built-in corpus (`builtin:v<version>` names another)."""


def corpus_location(
    spec: ExperimentSpec, base_dir: Path, *, sealed_ok: bool = False
) -> tuple[Path, str]:
    """The corpus folder a spec names and the label the manifest records for it.

    Args:
        spec: The experiment spec.
        base_dir: The spec file's folder.
        sealed_ok: Whether the track can run a sealed held-out set (`HELDOUT.json`): only the
            reviewer track can, since its trials need only the set's clear inputs.

    Raises:
        InputError: an unknown built-in version (names the spec field), or a sealed held-out
            set given to a track that needs the answer key to run its trials.
    """
    if spec.corpus.builtin is not None:
        version = spec.corpus.builtin.removeprefix("v")
        if version not in BUILTIN_VERSIONS:
            known = ", ".join(f"v{v}" for v in BUILTIN_VERSIONS)
            raise InputError(
                f"unknown built-in corpus {spec.corpus.builtin!r} (known: {known})",
                location="corpus/builtin",
            )
        return builtin_corpus_root(version), f"builtin:v{version}"
    assert spec.corpus.path is not None  # the spec model requires builtin or path
    root = (base_dir / spec.corpus.path).resolve()
    if not sealed_ok and (root / "HELDOUT.json").is_file():
        raise InputError(
            f"track {spec.track_id} cannot run a sealed held-out set: its trials read grader-only "
            "case data (only rtb/review runs a sealed set without the key)",
            location="corpus/path",
        )
    return root, str(root)


def corpus_folder(label: str) -> Path:
    """The folder behind a manifest's `corpus.root` (`builtin:<version>` or a path)."""
    if label.startswith("builtin:"):
        return builtin_corpus_root(label.removeprefix("builtin:"))
    return Path(label)


def corpus_items(root: Path, corpus: Corpus) -> list[ResolvedItem]:
    """Every corpus file, `MANIFEST.json` included, as manifest inputs to hash.

    Each carries the bytes the corpus was validated from (`Corpus.file_data`), so the manifest
    pins what was checked.
    """
    return [
        ResolvedItem("corpus", name, path=root / name, data=corpus.file_data(name))
        for name in sorted({*corpus.files, "MANIFEST.json"})
    ]


def harness_code_items(patterns: tuple[str, ...]) -> list[ResolvedItem]:
    """The package's own grading and platform code matching `patterns`, as manifest inputs.

    Pinning this code means a report re-graded later is refused if the grader changed.
    """
    package = Path(str(files("trustbench")))
    return [
        ResolvedItem("harness_code", path.relative_to(package).as_posix(), path=path)
        for pattern in patterns
        for path in sorted(package.glob(pattern))
    ]
