"""A frozen, unchanged corpus is parsed without re-validation; anything else is validated."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from trustbench.errors import CheckFailed
from trustbench.rtb.corpus import _load as load_module
from trustbench.rtb.corpus._frozen import load_frozen_corpus
from trustbench.rtb.corpus._load import builtin_corpus_root, load_corpus
from trustbench.rtb.corpus._manifest import MANIFEST_NAME, sha256_file


def _frozen_files(root: Path) -> dict[str, str]:
    corpus = load_corpus(root)
    return {**corpus.files, MANIFEST_NAME: sha256_file(root / MANIFEST_NAME)}


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


def test_rechecking_a_frozen_review_experiment_skips_validation_only_for_the_same_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trustbench.core._manifest import check_inputs
    from trustbench.rtb.review.track import ReviewTrack

    manifest = _review_manifest(tmp_path)
    validated: list[object] = []
    validate = load_module.validate_corpus
    monkeypatch.setattr(
        load_module, "validate_corpus", lambda *a, **k: validated.append(a) or validate(*a, **k)
    )
    assert len(check_inputs(manifest, ReviewTrack())) == 60  # type: ignore[arg-type]
    assert validated == []
    environment = manifest.environment.model_copy(update={"trustbench_version": "0.0.0"})  # type: ignore[attr-defined]
    older = manifest.model_copy(update={"environment": environment})  # type: ignore[attr-defined]
    check_inputs(older, ReviewTrack())  # type: ignore[arg-type]
    assert len(validated) == 1
