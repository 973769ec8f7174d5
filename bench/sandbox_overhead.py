"""Sandbox overhead bench: an in-process reviewer run sandboxed against the same run unconfined.

Run: `python -m bench.sandbox_overhead [--rounds N] [--trials-per-case N]` from the repository
root.

The workload is the worst case for the sandbox: a user's in-process reviewer that answers at once
(trustbench's `always-hold` sentinel behind a module outside trustbench), on the built-in v0.3
corpus (240 cases), so nothing but the harness and the sandbox's round trips takes time. Each
round freezes and runs the same spec twice as `trustbench run` processes, once with
`isolation = "none"` (the baseline: the reviewer in the harness process) and once sandboxed (one
worker for the candidate, every trial's factory call and reply through its pipe), interleaved.
Reported: median wall seconds of `run`, the CPU of the run and its children, and the sandboxed
per-trial cost over the baseline. Nothing asserts a time; every run must finish all its trials.
An API candidate is never sandboxed (only the providers reach it), so a realistic reviewer
workload (1.5 s a call) does not change.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._common import env, machine

REVIEWER = """from trustbench.rtb.review.reviewers import chat_responder


def make(settings):
    return chat_responder({"reviewer": "always-hold"})
"""

SPEC = """suite = "rtb"
track = "review"
trials_per_case = {trials}
concurrency = 8
isolation = "{isolation}"

[corpus]
builtin = "v0.3"

[[candidates]]
name = "hold"
kind = "inprocess"
entry = "bench_hold_reviewer:make"
"""


def _run_once(folder: Path, isolation: str, trials: int, environment: dict[str, str]) -> tuple:
    """(wall s, CPU s of the run and its children) of one `trustbench run`."""
    spec = folder / f"{isolation}.toml"
    spec.write_text(SPEC.format(trials=trials, isolation=isolation), encoding="utf-8")
    out = folder / f"run-{isolation}-{time.monotonic_ns()}"
    python = [sys.executable, "-m", "trustbench"]
    subprocess.run([*python, "freeze", str(spec), "--out", str(out)], check=True,
                   capture_output=True, env=environment, cwd=folder)  # fmt: skip
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([*python, "run", str(out), "--quiet"], check=True, capture_output=True,
                          text=True, env=environment, cwd=folder)  # fmt: skip
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert " 0 failed" in done.stdout, done.stdout
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return wall, cpu


def main() -> None:
    """Measure and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--trials-per-case", type=int, default=2)
    args = parser.parse_args()
    trials = 240 * args.trials_per_case
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        (folder / "bench_hold_reviewer.py").write_text(REVIEWER, encoding="utf-8")
        environment = env()
        environment["PYTHONPATH"] += f":{folder}"
        figures: dict[str, list[tuple[float, float]]] = {"none": [], "sandbox": []}
        for _ in range(args.rounds):
            for isolation in figures:
                figures[isolation].append(_run_once(folder, isolation, args.trials_per_case,
                                                    environment))  # fmt: skip
    print(f"machine: {machine()}; {trials} trials a run, {args.rounds} rounds, medians")
    medians = {}
    for isolation, rows in figures.items():
        wall = statistics.median(w for w, _ in rows)
        cpu = statistics.median(c for _, c in rows)
        medians[isolation] = wall
        line = f"  isolation = {isolation!r:10} run wall {wall:6.2f} s"
        print(f"{line}   CPU (run + worker) {cpu:6.2f} s")
    extra = (medians["sandbox"] - medians["none"]) / trials * 1000
    print(
        f"  sandboxed / unconfined wall: {medians['sandbox'] / medians['none']:.2f}x; "
        f"{extra:.2f} ms more per trial"
    )


if __name__ == "__main__":
    main()
