"""CLI start-up bench: wall time of `trustbench --help` and `trustbench version` in fresh processes.

Run: `python -m bench.cli_startup` from the repository root (options: `--help`).

Each command runs `--rounds` times as `python -m trustbench ...` in a new interpreter; the
baseline, measured in the same run, is a bare interpreter (`python -c pass`) and an interpreter
that only imports the CLI framework (`import typer`), so the ratios show what trustbench itself
adds. Reported: the median and range of wall seconds, and the ratio of the medians. Target
(layout v2): `--help` and `version` under 0.3 s on the 2-core development machine. Nothing asserts
a time; the script only checks every command exited 0.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from bench._common import REPO, env, machine, ratio

COMMANDS: dict[str, list[str]] = {
    "python -c pass (baseline)": ["-c", "pass"],
    "import typer (baseline)": ["-c", "import typer"],
    "trustbench --help": ["-m", "trustbench", "--help"],
    "trustbench version": ["-m", "trustbench", "version"],
    "trustbench rtb --help": ["-m", "trustbench", "rtb", "--help"],
    "trustbench trb --help": ["-m", "trustbench", "trb", "--help"],
}
TARGET_S = 0.3


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
    for name, arguments in COMMANDS.items():
        _wall(arguments)  # warm the page cache and bytecode cache once
        walls = [_wall(arguments) for _ in range(args.rounds)]
        medians[name] = statistics.median(walls)
        print(
            f"  {name:28s} median {medians[name]:.3f} s "
            f"(range {min(walls):.3f} to {max(walls):.3f})"
        )
    bare = medians["python -c pass (baseline)"]
    typer_only = medians["import typer (baseline)"]
    for name in ("trustbench --help", "trustbench version"):
        verdict = "met" if medians[name] < TARGET_S else "NOT met"
        print(
            f"{name}: {medians[name]:.3f} s = {ratio(medians[name], bare)} a bare interpreter, "
            f"{ratio(medians[name], typer_only)} `import typer`; target < {TARGET_S} s {verdict}"
        )


if __name__ == "__main__":
    main()
