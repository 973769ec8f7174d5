"""The package builds into a wheel holding every package data file, and that wheel, installed
into a fresh virtual environment (no network), runs: `--version`, the packaged corpus's
validation and the reviewer demo spec through freeze, run and report.

The checkout is copied into `tmp_path` first (setuptools writes `build/` and `*.egg-info`
beside the sources), so the test writes nothing into the checkout. The fresh environment gets
the dependencies by a `.pth` line naming this environment's site-packages (a plain path: the
editable install of the checkout is not loaded), so nothing is downloaded.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "trustbench"
STEP_TIMEOUT_S = 240


def _run(*argv: str | Path, cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(a) for a in argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=STEP_TIMEOUT_S,
        env={"PATH": "/usr/bin:/bin", "HOME": str(cwd), "TRUSTBENCH_CACHE": str(cwd / "cache")},
    )
    if check:
        assert result.returncode == 0, f"{argv}: {result.stdout}\n{result.stderr}"
    return result


def _data_files() -> set[str]:
    """Every non-Python file of the package, as a wheel names it (`trustbench/...`)."""
    return {
        str(path.relative_to(PACKAGE.parent))
        for path in PACKAGE.rglob("*")
        if path.is_file() and path.suffix not in (".py", ".pyc") and "__pycache__" not in path.parts
    }


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from a copy of the checkout (no build isolation, no index)."""
    work = tmp_path_factory.mktemp("build")
    source = work / "source"
    source.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    shutil.copytree(ROOT / "src", source / "src", ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    dist = work / "dist"
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "--quiet", "--wheel-dir", dist, source, cwd=work)  # fmt: skip
    (built,) = dist.glob("trustbench-*.whl")
    return built


@pytest.mark.slow
def test_the_wheel_holds_every_package_data_file(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    data = _data_files()
    assert any(name.endswith(".j2") for name in data) and len(data) > 200
    assert data - names == set()
    assert not any(name.endswith(".pyc") for name in names)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_wheel_installs_into_a_fresh_environment_and_runs(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp_path)
    python = venv / "bin" / "python"
    site = Path(_run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])",
                     cwd=tmp_path).stdout.strip())  # fmt: skip
    (site / "_trustbench_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index",
         "--quiet", wheel, cwd=tmp_path)  # fmt: skip
    where = _run(python, "-c", "import trustbench; print(trustbench.__file__)", cwd=tmp_path)
    assert Path(where.stdout.strip()).is_relative_to(venv), "the checkout was imported"
    cli = venv / "bin" / "trustbench"
    installed = _run(python, "-c", "import trustbench; print(trustbench.__version__)", cwd=tmp_path)
    version = _run(cli, "--version", cwd=tmp_path).stdout.strip()
    assert version == f"trustbench {installed.stdout.strip()}"
    validated = _run(cli, "rtb", "validate", cwd=tmp_path).stdout
    assert "valid: " in validated and str(venv) in validated
    spec = _run(python, "-c", "from importlib.resources import files; "
                "print(files('trustbench.rtb') / 'experiments' / 'demo_review.toml')",
                cwd=tmp_path).stdout.strip()  # fmt: skip
    _run(cli, "freeze", spec, "--out", tmp_path / "run", cwd=tmp_path)
    _run(cli, "run", tmp_path / "run", "--quiet", cwd=tmp_path)
    # The sentinels fail their gates by design, which blocks nothing: exit 0.
    summary = json.loads(_run(cli, "report", tmp_path / "run", "--json", cwd=tmp_path).stdout)
    assert summary["blocked"] is False
    assert summary["verdicts"]["reference-policy"]["status"] == "passed"
    assert summary["verdicts"]["always-permit"]["status"] == "as_expected"
    assert (tmp_path / "run" / "report.html").read_text().startswith("<!DOCTYPE html>")
