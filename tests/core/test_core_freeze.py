from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.support.cli import ALPHA_KEY, invoke

from trustbench._canonical import json_sha256
from trustbench.core import build_manifest, read_manifest, write_manifest
from trustbench.core.spec._manifest import package_source_sha256, python_source_sha256
from trustbench.errors import CheckFailed, InputError


def test_manifest_hash_is_stable_across_two_freezes_of_the_same_inputs(
    experiment: Path, tmp_path: Path
) -> None:
    first = write_manifest(build_manifest(experiment), tmp_path / "run-a")
    second = write_manifest(build_manifest(experiment), tmp_path / "run-b")
    assert first.read_bytes() == second.read_bytes()
    assert (
        read_manifest(tmp_path / "run-a").manifest_sha256
        == read_manifest(tmp_path / "run-b").manifest_sha256
    )


def test_manifest_hash_is_sha256_of_canonical_manifest_without_its_hash(
    experiment: Path, tmp_path: Path
) -> None:
    write_manifest(build_manifest(experiment), tmp_path / "run")
    data = json.loads((tmp_path / "run" / "manifest.json").read_text())
    stored = data.pop("manifest_sha256")
    assert stored == json_sha256(data)


def test_every_corpus_file_and_prompt_is_hashed_into_the_manifest(experiment: Path) -> None:
    manifest = build_manifest(experiment)
    names = {(f.role, f.name) for f in manifest.files}
    assert {("corpus", f"cases/case-{i:03d}.json") for i in range(4)} <= names
    assert ("prompt", "system") in names
    before = manifest.manifest_sha256
    (experiment.parent / "corpus" / "cases" / "case-002.json").write_text('{"id": "case-002"}')
    assert build_manifest(experiment).manifest_sha256 != before


def test_manifest_records_plan_models_endpoints_and_environment(experiment: Path) -> None:
    manifest = build_manifest(experiment)
    assert manifest.plan.trials == 4 * 2 * 3 and manifest.plan.cases == 4
    alpha = next(c for c in manifest.candidates if c.name == "alpha")
    assert alpha.requested_model == "alpha-model" and alpha.api_key_env == "TB_TEST_ALPHA_KEY"
    assert alpha.endpoint is not None and alpha.endpoint.startswith("http://127.0.0.1:")
    env = manifest.environment
    assert env.python and env.trustbench_version
    assert env.dependencies["pydantic"] is not None


def test_manifest_never_holds_the_api_key_value_given_through_the_environment(
    experiment: Path, tmp_path: Path
) -> None:
    path = write_manifest(build_manifest(experiment), tmp_path / "run")
    assert ALPHA_KEY.encode() not in path.read_bytes()
    assert b"TB_TEST_ALPHA_KEY" in path.read_bytes()


def test_freeze_refuses_a_spec_that_carries_the_key_value(
    experiment: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A key with no key's shape passes every shape check (a shaped one is refused earlier):
    # the scan of the manifest for the variables' values still catches it.
    unshaped = "correct-horse-battery-staple"
    monkeypatch.setenv("TB_TEST_ALPHA_KEY", unshaped)
    text = experiment.read_text().replace(
        "order_seed = 11", f'order_seed = 11\ntrack_options = {{ note = "{unshaped}" }}'
    )
    experiment.write_text(text)
    with pytest.raises(InputError, match=r"\$TB_TEST_ALPHA_KEY appears in the manifest"):
        build_manifest(experiment)


def test_freeze_refuses_to_overwrite_a_different_manifest(experiment: Path, tmp_path: Path) -> None:
    write_manifest(build_manifest(experiment), tmp_path / "run")
    experiment.write_text(experiment.read_text().replace("order_seed = 11", "order_seed = 12"))
    with pytest.raises(InputError, match="different frozen manifest"):
        write_manifest(build_manifest(experiment), tmp_path / "run")


def test_edited_manifest_fails_its_hash_check(experiment: Path, tmp_path: Path) -> None:
    path = write_manifest(build_manifest(experiment), tmp_path / "run")
    path.write_text(path.read_text().replace('"trials_per_case": 3', '"trials_per_case": 1'))
    with pytest.raises(CheckFailed, match=r"manifest\.json changed after freeze"):
        read_manifest(tmp_path / "run")


def test_freeze_of_an_unknown_track_is_an_input_error(experiment: Path) -> None:
    experiment.write_text(experiment.read_text().replace('track = "echo"', 'track = "nothere"'))
    with pytest.raises(InputError, match="unknown track 'test/nothere'"):
        build_manifest(experiment)


def test_freeze_command_writes_the_manifest_and_prints_its_hash(
    experiment: Path, tmp_path: Path
) -> None:
    code, output = invoke("freeze", str(experiment), "--out", str(tmp_path / "run"))
    assert code == 0
    manifest = read_manifest(tmp_path / "run")
    assert manifest.manifest_sha256 in output


def test_manifest_records_the_digest_of_the_running_trustbench_source(experiment: Path) -> None:
    environment = build_manifest(experiment).environment
    assert environment.trustbench_source_sha256 == package_source_sha256()
    assert environment.froze_with_running_code()


def _source_tree(root: Path) -> Path:
    (root / "sub" / "__pycache__").mkdir(parents=True)
    (root / "__init__.py").write_text("VERSION = 1\n")
    (root / "sub" / "check.py").write_text("def check(): return True\n")
    return root


def test_the_source_digest_changes_with_a_python_file_s_bytes_or_path(tmp_path: Path) -> None:
    root = _source_tree(tmp_path / "pkg")
    before = python_source_sha256(root)
    (root / "sub" / "check.py").write_text("def check(): return False\n")
    edited = python_source_sha256(root)
    (root / "sub" / "check.py").rename(root / "sub" / "checks.py")
    assert len({before, edited, python_source_sha256(root)}) == 3


def test_the_source_digest_ignores_data_files_and_pycache(tmp_path: Path) -> None:
    root = _source_tree(tmp_path / "pkg")
    before = python_source_sha256(root)
    (root / "sub" / "cases.json").write_text("{}")
    (root / "sub" / "__pycache__" / "stale.py").write_text("x = 1\n")
    assert python_source_sha256(root) == before


def test_only_the_same_source_digest_counts_as_the_running_code(experiment: Path) -> None:
    environment = build_manifest(experiment).environment
    other = environment.model_copy(update={"trustbench_source_sha256": "0" * 64})
    unrecorded = environment.model_copy(update={"trustbench_source_sha256": None})
    other_version = environment.model_copy(update={"trustbench_version": "0.0.0"})
    assert not other.froze_with_running_code()
    assert not unrecorded.froze_with_running_code()
    assert other_version.froze_with_running_code()  # keyed on the code, not the version


def test_a_manifest_frozen_before_the_source_digest_loads_and_never_counts_as_this_code(
    experiment: Path, tmp_path: Path
) -> None:
    path = write_manifest(build_manifest(experiment), tmp_path / "run")
    data = json.loads(path.read_text())
    del data["environment"]["trustbench_source_sha256"], data["manifest_sha256"]
    data["manifest_sha256"] = json_sha256(data)
    path.write_text(json.dumps(data))
    environment = read_manifest(tmp_path / "run").environment
    assert environment.trustbench_source_sha256 is None
    assert not environment.froze_with_running_code()
