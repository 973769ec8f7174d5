"""Phases that time a whole command as a user runs it: a child process, from exec to exit.

In-process figures (`bench._phases.trustbench_run`) leave out what a user waits for: the
interpreter, the imports, the checks before the first trial and the writes after the last. These
phases start the command as a child of the (fresh) phase process and report its wall time, its
CPU (user + system, from `RUSAGE_CHILDREN`) and its peak RSS; the phase process has no other
child, so the figures are the command's own. What is prepared beforehand (a frozen run folder,
the request bodies of the bare client) is not timed.
"""

from __future__ import annotations

import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from bench._common import REPO, env


def child(
    arguments: list[str], accept: tuple[int, ...] = (0,), *, sample_cpu: bool = False
) -> dict[str, Any]:
    """Run `python ARGUMENTS` as a child; its wall, CPU and peak RSS (fails on another code).

    `exec_at` / `exit_at` are the wall clock (`time.time()`) at exec and at exit, for placing
    the child's own timestamps (the ledger's) between them. `sample_cpu` adds `cpu_samples`:
    (`time.time()`, the child's CPU seconds so far) every 5 ms from `/proc` (clock-tick
    resolution, 10 ms), so the CPU it had spent by a moment seen elsewhere (its first request on
    the bench server) can be read without instrumenting the program.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    exec_at = time.time()
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, *arguments],
        env=env(),
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    samples: list[tuple[float, float]] = []
    sampler = threading.Thread(target=_sample_cpu, args=(process, samples), daemon=True)
    if sample_cpu:
        sampler.start()
    stdout, stderr = process.communicate()
    wall = time.perf_counter() - started
    exit_at = time.time()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if sample_cpu:
        sampler.join()
    if process.returncode not in accept:
        raise RuntimeError(f"{arguments} exited {process.returncode}:\n{stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "peak_rss_mib": after.ru_maxrss / 1024,
        "exit_code": process.returncode,
        "stdout": stdout[-2000:],
        "exec_at": exec_at,
        "exit_at": exit_at,
        **({"cpu_samples": samples} if sample_cpu else {}),
    }


def _sample_cpu(process: subprocess.Popen[str], samples: list[tuple[float, float]]) -> None:
    """Append (wall clock, CPU seconds of `process` and its reaped children) until it exits."""
    tick = os.sysconf("SC_CLK_TCK")
    path = f"/proc/{process.pid}/stat"
    while process.poll() is None:
        try:
            with open(path, encoding="ascii") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:  # exited between the poll and the read
            return
        # utime, stime, cutime, cstime: fields 14-17 of proc(5), 11-14 after the name
        samples.append((time.time(), sum(int(f) for f in fields[11:15]) / tick))
        time.sleep(0.005)


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


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


def _split(folder: Path, exec_at: float, exit_at: float) -> dict[str, float]:
    """Where a run's process wall went, from the ledger's own clock.

    `before_first_trial_s`: exec to the `run_started` event (interpreter, imports, the input
    checks, opening the ledger, the preflight); `after_last_trial_s`: the last trial's end to
    exit (the sign-off, closing the ledger, the CLI's after-run check, the interpreter's exit).
    """
    connection = sqlite3.connect(folder / "ledger.sqlite")
    try:
        (started,) = connection.execute(
            "SELECT at FROM events WHERE kind = 'run_started' ORDER BY seq DESC LIMIT 1"
        ).fetchone()
        (last,) = connection.execute("SELECT MAX(finished_at) FROM trials").fetchone()
    finally:
        connection.close()
    return {
        "before_first_trial_s": _seconds(started) - exec_at,
        "after_last_trial_s": exit_at - _seconds(last),
    }


def cli_run(run_dir: str, spec: str, *, sample_cpu: bool = False) -> dict[str, Any]:
    """Freeze (untimed), then time `trustbench run RUN --quiet` as a process (`child`)."""
    folder = _frozen(run_dir, spec)
    measured = child(["-m", "trustbench", "run", str(folder), "--quiet"], sample_cpu=sample_cpu)
    return {
        **measured,
        **_split(folder, measured["exec_at"], measured["exit_at"]),
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
    first, last, ok = measured["stdout"].split()[-3:]
    return {
        **measured,
        "ok": int(ok),
        "before_first_trial_s": float(first) - measured["exec_at"],
        "after_last_trial_s": measured["exit_at"] - float(last),
    }
