"""Phases that time a whole command as a user runs it: a child process, from exec to exit.

In-process figures (`bench._phases.trustbench_run`) leave out what a user waits for: the
interpreter, the imports, the checks before the first trial and the writes after the last. These
phases start the command as a child of the (fresh) phase process and report its wall time, its
CPU (user + system, from `RUSAGE_CHILDREN`) and its peak RSS; the phase process has no other
child, so the figures are the command's own. What is prepared beforehand (a frozen run folder,
the request bodies of the bare client) is not timed.
"""

from __future__ import annotations

import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench._common import REPO, env


def child(arguments: list[str], accept: tuple[int, ...] = (0,)) -> dict[str, Any]:
    """Run `python ARGUMENTS` as a child; its wall, CPU and peak RSS (fails on another code)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    completed = subprocess.run(
        [sys.executable, *arguments], env=env(), cwd=REPO, capture_output=True, text=True
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if completed.returncode not in accept:
        raise RuntimeError(
            f"{arguments} exited {completed.returncode}:\n{completed.stderr[-3000:]}"
        )
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "peak_rss_mib": after.ru_maxrss / 1024,
        "exit_code": completed.returncode,
        "stdout": completed.stdout[-2000:],
    }


def _frozen(run_dir: str, spec: str) -> Path:
    from trustbench.core import build_manifest, write_manifest

    folder = Path(run_dir)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "spec.toml").write_text(spec)
    write_manifest(build_manifest(folder / "spec.toml"), folder)
    return folder


def _finished(folder: Path) -> int:
    connection = sqlite3.connect(folder / "ledger.sqlite")
    try:
        return int(connection.execute("SELECT COUNT(*) FROM trials").fetchone()[0])
    finally:
        connection.close()


def cli_run(run_dir: str, spec: str) -> dict[str, Any]:
    """Freeze (untimed), then time `trustbench run RUN --quiet` as a process."""
    folder = _frozen(run_dir, spec)
    measured = child(["-m", "trustbench", "run", str(folder), "--quiet"])
    return {
        **measured,
        "completed": _finished(folder),
        "ledger_bytes": (folder / "ledger.sqlite").stat().st_size,
    }


def cli_report(run_dir: str) -> dict[str, Any]:
    """Time `trustbench report RUN` as a process (exit 1, a failed gate, is a finished report)."""
    folder = Path(run_dir)
    measured = child(["-m", "trustbench", "report", str(folder)], accept=(0, 1))
    rows = folder / "record.trials.jsonl"
    return {
        **measured,
        "record_bytes": (folder / "record.json").stat().st_size,
        "trial_rows_bytes": rows.stat().st_size if rows.exists() else None,
        "html_bytes": (folder / "report.html").stat().st_size,
    }


def floor_process(
    base_url: str, cases: int, trials_per_case: int, concurrency: int
) -> dict[str, Any]:
    """Time the bare aiohttp client (`bench._bare_client`) as a process on the same requests."""
    from bench._phases import _bodies

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bodies.jsonl"
        path.write_bytes(b"".join(body + b"\n" for body in _bodies(cases, trials_per_case)))
        url = f"{base_url}/chat/completions"
        measured = child(["-m", "bench._bare_client", str(path), url, str(concurrency)])
    return {**measured, "ok": int(measured["stdout"].split()[-1])}
