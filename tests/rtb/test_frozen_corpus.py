"""A frozen, unchanged corpus is parsed without re-validation; anything else is validated."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from trustbench import _canonical as canonical
from trustbench._canonical import file_sha256
from trustbench.errors import CheckFailed
from trustbench.rtb.corpus import _load as load_module
from trustbench.rtb.corpus import _load as snapshot_module
from trustbench.rtb.corpus._load import (
    MANIFEST_NAME,
    builtin_corpus_root,
    load_corpus,
    load_frozen_corpus,
)


def _frozen_files(root: Path) -> dict[str, str]:
    corpus = load_corpus(root)
    return {**corpus.files, MANIFEST_NAME: corpus.manifest_sha256}


def _no_validation(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("the corpus was validated again")

    monkeypatch.setattr(load_module, "validate_corpus", refuse)


@pytest.mark.parametrize("version", ["v0.1", "v0.2"])
def test_an_unchanged_frozen_corpus_loads_equal_without_validating_again(
    version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = builtin_corpus_root(version)
    expected = load_corpus(root)
    frozen = _frozen_files(root)
    _no_validation(monkeypatch)
    assert load_frozen_corpus(root, frozen) == expected


def test_a_changed_case_file_is_validated_in_full_and_refused(tmp_path: Path) -> None:
    root = tmp_path / "corpus"
    shutil.copytree(builtin_corpus_root("v0.1"), root)
    frozen = _frozen_files(root)
    case = sorted((root / "cases").glob("*.json"))[0]
    case.write_text(case.read_text().replace('"task"', '"tusk"', 1))
    with pytest.raises(CheckFailed, match=case.name):
        load_frozen_corpus(root, frozen)


def test_frozen_hashes_that_do_not_match_the_files_mean_full_validation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = builtin_corpus_root("v0.1")
    frozen = {**_frozen_files(root), "cases/extra.json": "0" * 64}
    validated: list[Path | None] = []
    validate = load_module.validate_corpus

    def recording(path: Path | None = None, **options: object) -> object:
        validated.append(path)
        return validate(path, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(load_module, "validate_corpus", recording)
    load_frozen_corpus(root, frozen)
    assert validated == [root]


def _review_manifest(tmp_path: Path) -> object:
    from trustbench.core import build_manifest

    spec = tmp_path / "exp.toml"
    spec.write_text(
        'suite = "rtb"\ntrack = "review"\ntrials_per_case = 1\n[corpus]\nbuiltin = "v0.1"\n'
        '[[candidates]]\nname = "ref"\nkind = "inprocess"\n'
        'entry = "trustbench.rtb.review.reviewers:chat_responder"\n'
        'settings = { reviewer = "reference-policy" }\n'
    )
    return build_manifest(spec)


def test_rechecking_a_frozen_review_experiment_skips_validation_only_for_the_same_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trustbench.core import check_inputs
    from trustbench.rtb.review.track import ReviewTrack

    manifest = _review_manifest(tmp_path)
    validated: list[object] = []
    validate = load_module.validate_corpus
    monkeypatch.setattr(
        load_module, "validate_corpus", lambda *a, **k: validated.append(a) or validate(*a, **k)
    )

    def frozen_with(**environment: object) -> object:
        changed = manifest.environment.model_copy(update=environment)  # type: ignore[attr-defined]
        return manifest.model_copy(update={"environment": changed})  # type: ignore[attr-defined]

    assert len(check_inputs(manifest, ReviewTrack())) == 60  # type: ignore[arg-type]
    check_inputs(frozen_with(trustbench_version="0.0.0"), ReviewTrack())  # type: ignore[arg-type]
    assert validated == []  # the same code under another version string: skipped
    check_inputs(frozen_with(trustbench_source_sha256="0" * 64), ReviewTrack())  # type: ignore[arg-type]
    check_inputs(frozen_with(trustbench_source_sha256=None), ReviewTrack())  # type: ignore[arg-type]
    assert len(validated) == 2  # other code, and a manifest with no digest: in full


def _copy_spec(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    shutil.copytree(builtin_corpus_root("v0.1"), root)
    spec = tmp_path / "exp.toml"
    spec.write_text(
        'suite = "rtb"\ntrack = "review"\ntrials_per_case = 1\n[corpus]\npath = "corpus"\n'
        '[[candidates]]\nname = "ref"\nkind = "inprocess"\n'
        'entry = "trustbench.rtb.review.reviewers:chat_responder"\n'
        'settings = { reviewer = "reference-policy" }\n'
    )
    return spec


def _swap_a_case_once_read(root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Make the next corpus read swap a case file for an invalid one right after reading it."""
    from trustbench.rtb.corpus import _load as _snapshot

    case = sorted((root / "cases").glob("*.json"))[0]
    take = _snapshot.CorpusSnapshot.take.__func__  # type: ignore[attr-defined]

    def take_then_swap(cls: type, folder: Path) -> object:
        snapshot = take(cls, folder)
        if not case.read_text().count('"tusk"'):
            case.write_text(case.read_text().replace('"task"', '"tusk"', 1))
        return snapshot

    monkeypatch.setattr(_snapshot.CorpusSnapshot, "take", classmethod(take_then_swap))
    return case


def test_rewriting_the_manifest_certifies_the_bytes_it_validated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trustbench.rtb.corpus._load import validate_corpus, write_manifest

    root = tmp_path / "corpus"
    shutil.copytree(builtin_corpus_root("v0.1"), root)
    case = _swap_a_case_once_read(root, monkeypatch)
    manifest = write_manifest(root)
    monkeypatch.undo()
    assert manifest.files[f"cases/{case.name}"] != file_sha256(case)
    problems = [str(p) for p in validate_corpus(root).problems]
    assert any(f"cases/{case.name}: sha256" in p and "differs from MANIFEST" in p for p in problems)


def test_a_file_changed_after_validation_is_pinned_as_validated_so_the_run_refuses_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The manifest hashes the bytes the validator read, not the file a moment later.

    Were the file read again to hash it, the swapped bytes would be pinned, and every later run
    would parse them without validation (they would hash to what the freeze recorded).
    """
    from trustbench.core import build_manifest, check_inputs
    from trustbench.rtb.review.track import ReviewTrack

    spec = _copy_spec(tmp_path)
    case = _swap_a_case_once_read(tmp_path / "corpus", monkeypatch)
    manifest = build_manifest(spec)
    monkeypatch.undo()
    pinned = {f.name: f.sha256 for f in manifest.files if f.role == "corpus"}
    assert pinned[f"cases/{case.name}"] != file_sha256(case)
    with pytest.raises(CheckFailed, match=f"cases/{case.name}: schema"):
        check_inputs(manifest, ReviewTrack())  # the hash differs: validated in full, refused


def test_a_run_start_reads_each_corpus_file_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trustbench.core import build_manifest, check_inputs
    from trustbench.rtb.review.track import ReviewTrack

    manifest = build_manifest(_copy_spec(tmp_path))
    corpus = (tmp_path / "corpus").resolve()
    reads: list[Path] = []
    read_input_file = snapshot_module.read_input_file

    def counting(path: Path) -> bytes:
        if path.is_relative_to(corpus):
            reads.append(path)
        return read_input_file(path)

    monkeypatch.setattr(snapshot_module, "read_input_file", counting)
    check_inputs(manifest, ReviewTrack())
    every_file = {path for path in corpus.rglob("*") if path.is_file()}
    assert sorted(reads) == sorted(every_file)


def test_an_unreadable_corpus_file_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trustbench.errors import InputError

    root = tmp_path / "corpus"
    shutil.copytree(builtin_corpus_root("v0.1"), root)
    case = sorted((root / "cases").glob("*.json"))[0]
    open_regular = canonical._open_regular

    def refusing(path: Path) -> int:
        if path == case:
            raise PermissionError(13, "Permission denied", str(path))
        return open_regular(path)

    monkeypatch.setattr(canonical, "_open_regular", refusing)
    with pytest.raises(InputError, match="cannot read: Permission denied") as caught:
        load_corpus(root)
    assert caught.value.location == str(case)
