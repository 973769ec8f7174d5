"""CLI start-up bench: wall time of `trustbench --help`, `version` and `run` on a finished folder.

Run: `python -m bench.cli_startup` from the repository root (options: `--help`).

Each command runs `--rounds` times as `python -m trustbench ...` in a new interpreter; the
baseline, measured in the same run, is a bare interpreter (`python -c pass`) and an interpreter
that only imports the CLI framework (`import typer`), so the ratios show what trustbench itself
adds. Reported: the median and range of wall seconds, and the ratio of the medians. Target
(layout v2): `--help` and `version` under 0.3 s on the 2-core development machine. Nothing asserts
a time; the script only checks every command exited 0.

`trustbench run RUN` on a finished folder (a small run, finished before the rounds) is start-up
alone: imports, re-checking the frozen inputs and the ledger, the sign-off. Two folders: an
OpenAI-compatible reviewer (`http`, run once against the bench server, which is stopped before
the rounds: nothing is left to send) and the in-process reference reviewer (`in-process`, whose
pinned code is the whole trustbench package: about 920 files re-hashed at every start). Their
baseline is an interpreter that imports aiohttp, what a hand-written client starts with; target
(issue 35) within 1.5x of it.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._common import REPO, env, machine, phase, ratio, server, spec_text

COMMANDS: dict[str, list[str]] = {
    "python -c pass (baseline)": ["-c", "pass"],
    "import typer (baseline)": ["-c", "import typer"],
    "trustbench --help": ["-m", "trustbench", "--help"],
    "trustbench version": ["-m", "trustbench", "version"],
    "trustbench rtb --help": ["-m", "trustbench", "rtb", "--help"],
    "trustbench trb --help": ["-m", "trustbench", "trb", "--help"],
    "import aiohttp (baseline)": ["-c", "import aiohttp"],
}
TARGET_S = 0.3
RUN_TARGET = 1.5
"""`trustbench run` on a finished folder over `import aiohttp`."""
FINISHED = ("http", "in-process")


def _wall(arguments: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, *arguments], env=env(), cwd=REPO, check=True, capture_output=True
    )
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    print(f"cli_startup: {args.rounds} rounds per command; {machine()}")
    medians: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        commands = dict(COMMANDS)
        for kind in FINISHED:
            finished = Path(tmp) / kind
            with server(0.0) as base_url:  # freeze and run, untimed; the server stops after
                url = base_url if kind == "http" else None
                spec = spec_text(base_url=url, cases=5, trials_per_case=2, concurrency=4)
                phase("trustbench_run", run_dir=str(finished), spec=spec)
            commands[f"run (finished, {kind})"] = [
                "-m", "trustbench", "run", str(finished), "--quiet"
            ]  # fmt: skip
        _rounds(commands, args.rounds, medians)
    _report(medians)


def _rounds(commands: dict[str, list[str]], rounds: int, medians: dict[str, float]) -> None:
    """Each command once to warm the page and bytecode caches, then `rounds` timed runs."""
    for name, arguments in commands.items():
        _wall(arguments)
        walls = [_wall(arguments) for _ in range(rounds)]
        medians[name] = statistics.median(walls)
        print(
            f"  {name:28s} median {medians[name]:.3f} s "
            f"(range {min(walls):.3f} to {max(walls):.3f})"
        )


def _report(medians: dict[str, float]) -> None:
    bare = medians["python -c pass (baseline)"]
    typer_only = medians["import typer (baseline)"]
    for name in ("trustbench --help", "trustbench version"):
        verdict = "met" if medians[name] < TARGET_S else "NOT met"
        print(
            f"{name}: {medians[name]:.3f} s = {ratio(medians[name], bare)} a bare interpreter, "
            f"{ratio(medians[name], typer_only)} `import typer`; target < {TARGET_S} s {verdict}"
        )
    aiohttp = medians["import aiohttp (baseline)"]
    for kind in FINISHED:
        run = medians[f"run (finished, {kind})"]
        verdict = "met" if run <= RUN_TARGET * aiohttp else "NOT met"
        print(
            f"trustbench run (finished folder, {kind} reviewer): {run:.3f} s = "
            f"{ratio(run, aiohttp)} `import aiohttp` ({aiohttp:.3f} s); target <= {RUN_TARGET}x "
            f"{verdict}"
        )


if __name__ == "__main__":
    main()
