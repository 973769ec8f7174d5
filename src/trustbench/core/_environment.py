"""What the software environment was: package, Python, dependency versions and git state."""

from __future__ import annotations

import platform
import subprocess
from pathlib import Path

from pydantic import BaseModel, ConfigDict

import trustbench

KEY_DEPENDENCIES: tuple[str, ...] = (
    "aiohttp",
    "cedarpy",
    "jinja2",
    "jsonschema",
    "matplotlib",
    "numpy",
    "pydantic",
    "rfc8785",
    "rich",
    "scipy",
    "statsmodels",
    "torch",
    "typer",
)
"""Distributions whose versions can change results or records; recorded when installed."""


class GitState(BaseModel):
    """The trustbench source checkout a run used, when it is a git checkout."""

    model_config = ConfigDict(use_attribute_docstrings=True, extra="forbid", frozen=True)

    commit: str
    """HEAD commit id."""
    dirty: bool
    """True when tracked files differ from HEAD: the commit alone does not reproduce the code."""


class EnvironmentRecord(BaseModel):
    """Software environment of the freeze."""

    model_config = ConfigDict(use_attribute_docstrings=True, extra="forbid", frozen=True)

    trustbench_version: str
    """Version of the trustbench package."""
    python: str
    """Python version, e.g. `3.11.7`."""
    python_implementation: str
    """e.g. `CPython`."""
    platform: str
    """Operating system and machine architecture (no host name)."""
    dependencies: dict[str, str | None]
    """Version of each key dependency; null when not installed."""
    git: GitState | None
    """Git state of the trustbench source; null outside a git checkout or without git."""


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def git_state(source: Path) -> GitState | None:
    """Return the commit and dirty flag of the checkout holding `source`, or None."""
    commit = _git(["rev-parse", "HEAD"], source)
    if commit is None:
        return None
    status = _git(["status", "--porcelain", "--untracked-files=no"], source)
    return GitState(commit=commit.strip(), dirty=bool(status and status.strip()))


def _version(distribution: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version  # at freeze only, not at run

    try:
        return version(distribution)
    except PackageNotFoundError:
        return None


def capture_environment() -> EnvironmentRecord:
    """Record the environment this process runs in."""
    return EnvironmentRecord(
        trustbench_version=trustbench.__version__,
        python=platform.python_version(),
        python_implementation=platform.python_implementation(),
        platform=f"{platform.system()}-{platform.machine()}",
        dependencies={name: _version(name) for name in KEY_DEPENDENCIES},
        git=git_state(Path(trustbench.__file__).resolve().parent),
    )
