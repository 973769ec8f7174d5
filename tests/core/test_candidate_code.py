"""An in-process candidate's code is pinned as a whole, and its entry must name a factory."""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.cli import invoke
from tests.support.echo_track import write_corpus

from trustbench.core._candidate_code import factory_file
from trustbench.core._runner import run_experiment
from trustbench.core.spec._manifest import build_manifest, write_manifest

FACTORY = """
from candpkg.helpers import reply


def make(settings):
    def respond(request):
        return reply(request.messages[-1]["content"])

    return respond
"""


def _spec(tmp_path: Path, entry: str) -> Path:
    write_corpus(tmp_path / "corpus", 2)
    spec = tmp_path / "exp.toml"
    spec.write_text(
        'suite = "test"\ntrack = "echo"\ntrials_per_case = 1\n[corpus]\npath = "corpus"\n'
        f'[[candidates]]\nname = "mine"\nkind = "inprocess"\nentry = "{entry}"\n'
    )
    return spec


def _package(root: Path, name: str = "candpkg") -> Path:
    package = root / name
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "factory.py").write_text(FACTORY.replace("candpkg", name))
    (package / "helpers.py").write_text("def reply(text):\n    return 'echo ' + text\n")
    return package


@pytest.fixture
def candidate_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    # A fresh module name per test: an imported module stays in sys.modules.
    name = f"candpkg_{tmp_path.name.replace('-', '_')}"
    package = _package(tmp_path / "code", name)
    monkeypatch.syspath_prepend(str(tmp_path / "code"))
    yield package
    for module in [m for m in sys.modules if m.startswith(name)]:
        del sys.modules[module]


def test_a_helper_module_edited_after_the_run_fails_verify(
    tmp_path: Path, candidate_package: Path
) -> None:
    spec = _spec(tmp_path, f"{candidate_package.name}.factory:make")
    run_dir = tmp_path / "run"
    write_manifest(build_manifest(spec), run_dir)
    run_experiment(run_dir)
    code, output = invoke("verify", str(run_dir))
    assert code == 0, output
    # The entry file is untouched; only the module it imports changes.
    (candidate_package / "helpers.py").write_text("def reply(text):\n    return 'approve'\n")
    code, message = invoke("verify", str(run_dir))
    assert code == 1
    assert f"candidate_package file {candidate_package.name}/helpers.py changed" in message


def _forget(name: str) -> None:
    """Drop a package's modules from `sys.modules`, as a fresh `verify` process has none."""
    for module in [m for m in sys.modules if m == name or m.startswith(f"{name}.")]:
        del sys.modules[module]


def _make_helper_patch_the_hashing(package: Path, marker: Path) -> None:
    """Edit the helper so that importing it marks `marker` and hides its own change."""
    original = (package / "helpers.py").read_bytes()
    frozen_sha = hashlib.sha256(original).hexdigest()
    (package / "helpers.py").write_text(
        "import pathlib\nimport sys\n\n\ndef reply(text):\n    return 'approve'\n\n\n"
        f"pathlib.Path({str(marker)!r}).write_text('ran')\n"
        "_m = sys.modules.get('trustbench.core.spec._manifest')\n"
        "if _m is not None:\n"
        "    _hash = _m.hash_items\n"
        "    def _lying(items):\n"
        f"        lie = {{'sha256': {frozen_sha!r}, 'size': {len(original)}}}\n"
        "        return [r.model_copy(update=lie) if r.name.endswith('helpers.py') else r"
        " for r in _hash(items)]\n"
        "    _m.hash_items = _lying\n"
    )


@pytest.mark.parametrize("command", ["verify", "report"])
def test_verify_and_report_never_run_candidate_code_that_patches_the_hashing(
    tmp_path: Path, candidate_package: Path, command: str
) -> None:
    spec = _spec(tmp_path, f"{candidate_package.name}.factory:make")
    run_dir = tmp_path / "run"
    write_manifest(build_manifest(spec), run_dir)
    run_experiment(run_dir)
    _forget(candidate_package.name)
    marker = tmp_path / "candidate-ran"
    _make_helper_patch_the_hashing(candidate_package, marker)
    code, message = invoke(command, str(run_dir))
    assert code != 0
    assert f"candidate_package file {candidate_package.name}/helpers.py changed" in message
    assert not marker.exists()


def test_run_compares_candidate_code_with_the_manifest_before_importing_it(
    tmp_path: Path, candidate_package: Path
) -> None:
    spec = _spec(tmp_path, f"{candidate_package.name}.factory:make")
    run_dir = tmp_path / "run"
    write_manifest(build_manifest(spec), run_dir)
    _forget(candidate_package.name)
    marker = tmp_path / "candidate-ran"
    _make_helper_patch_the_hashing(candidate_package, marker)
    code, message = invoke("run", str(run_dir), "--quiet")
    assert code == 1
    assert f"candidate_package file {candidate_package.name}/helpers.py changed" in message
    assert not marker.exists()


def test_the_factory_file_is_found_through_a_re_export_without_importing(
    tmp_path: Path, candidate_package: Path
) -> None:
    (candidate_package / "__init__.py").write_text("from .factory import make as make\n")
    _forget(candidate_package.name)
    found = factory_file(candidate_package.name, "make")
    assert found == candidate_package / "factory.py"
    assert candidate_package.name not in sys.modules


def test_the_factory_file_is_found_through_a_lazy_package_s_type_checking_imports() -> None:
    found = factory_file("trustbench.rtb.review.reviewers", "chat_responder")
    assert found is not None and found.name == "_chat.py"


def test_a_file_added_to_the_candidates_package_is_refused_by_run(
    tmp_path: Path, candidate_package: Path
) -> None:
    spec = _spec(tmp_path, f"{candidate_package.name}.factory:make")
    run_dir = tmp_path / "run"
    write_manifest(build_manifest(spec), run_dir)
    (candidate_package / "extra.py").write_text("X = 1\n")
    code, message = invoke("run", str(run_dir), "--quiet")
    assert code == 1 and "was added after freeze" in message


def test_a_top_level_module_is_pinned_with_the_sibling_modules_it_imports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code_dir = tmp_path / "flat"
    code_dir.mkdir()
    stem = f"flatcand_{tmp_path.name.replace('-', '_')}"
    (code_dir / f"{stem}_helpers.py").write_text("def reply(text):\n    return text\n")
    (code_dir / f"{stem}.py").write_text(
        f"import {stem}_helpers\n\n\ndef make(settings):\n    return {stem}_helpers.reply\n"
    )
    (code_dir / "unrelated.py").write_text("")
    monkeypatch.syspath_prepend(str(code_dir))
    manifest = build_manifest(_spec(tmp_path, f"{stem}:make"))
    names = {f.name for f in manifest.files if f.role == "candidate_package"}
    assert names == {f"{stem}.py", f"{stem}_helpers.py"}


def test_a_top_level_module_re_exporting_its_factory_pins_itself_and_that_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The factory's file is the package's (followed through the re-export); the lone module
    # naming it is pinned too, or re-pointing it at another factory would pass verify.
    code_dir = tmp_path / "flat"
    code_dir.mkdir()
    stem = f"reexport_{tmp_path.name.replace('-', '_')}"
    package = _package(tmp_path / "code", f"{stem}_pkg")
    (code_dir / f"{stem}.py").write_text(f"from {package.name}.factory import make\n")
    monkeypatch.syspath_prepend(str(code_dir))
    monkeypatch.syspath_prepend(str(tmp_path / "code"))
    manifest = build_manifest(_spec(tmp_path, f"{stem}:make"))
    files = {(f.role, f.name) for f in manifest.files}
    assert ("candidate_package", f"{stem}.py") in files
    assert ("candidate_package", f"{package.name}/helpers.py") in files  # that package too


@pytest.mark.parametrize(
    ("entry", "why"),
    [
        ("os:system", "standard library"),
        ("subprocess:run", "standard library"),
        ("builtins:eval", "standard library"),
        ("json.decoder:JSONDecoder", "standard library"),
        ("tests.support.echo_track:TRACK_ID", "not a factory"),
        ("tests.support.echo_track:write_corpus", "one argument"),
        ("nosuchmodule_xyz:make", "cannot import"),
        ("no-colon", "module:factory"),
    ],
)
def test_an_entry_that_is_not_a_candidate_factory_is_refused_at_freeze_naming_it(
    tmp_path: Path, entry: str, why: str
) -> None:
    spec = _spec(tmp_path, entry)
    code, message = invoke("freeze", str(spec), "--out", str(tmp_path / "run"))
    assert code == 2 and why in message and "candidate mine entry" in message
    assert not (tmp_path / "run" / "manifest.json").exists()


def test_the_package_is_pinned_file_by_file_without_caches_or_linked_folders(
    candidate_package: Path, tmp_path: Path
) -> None:
    from trustbench.core._candidate_code import entry_code_items

    name = candidate_package.name
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "shared.py").write_text("VALUE = 1\n")
    (candidate_package / "sub" / "deeper").mkdir(parents=True)
    (candidate_package / "sub" / "deeper" / "data.json").write_text("{}")
    (candidate_package / "__pycache__").mkdir()
    (candidate_package / "__pycache__" / "factory.cpython-311.pyc").write_bytes(b"x")
    (candidate_package / "stale.pyc").write_bytes(b"x")
    (candidate_package / "linked_folder").symlink_to(elsewhere, target_is_directory=True)
    (candidate_package / "linked.py").symlink_to(elsewhere / "shared.py")
    (candidate_package / "broken.py").symlink_to(tmp_path / "nowhere.py")

    _, *code = entry_code_items(f"{name}.factory:make", "candidate mine")

    assert [item.name for item in code] == [
        f"{name}/{part}"
        for part in ("__init__.py", "factory.py", "helpers.py", "linked.py", "sub/deeper/data.json")
    ]
