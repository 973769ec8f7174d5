"""Finished-folder resume bench: `trustbench run` on a finished 200,000-trial folder, as a process.

Run: `python -m bench.resume_finished` from the repository root (options: `--help`).

Since issue 56, `run` gives an existing ledger `verify`'s whole check (file, chain, stored
bodies, head, sign-offs) before it appends anything. A whole check that finds the ledger intact
is remembered under the user's cache (an HMAC of the file's SHA-256, `core/ledger/_store`),
and a later resume of the unchanged file hashes it instead of checking it row by row; a
finished run's resume writes nothing, so the file stays unchanged. Both run here as processes
on the same synthetic finished ledger of the reviewer workload (`bench/_ledger_fixture.py`;
written once, not timed, or reused with `--folder`), with a cache of the bench's own (empty at
the start): the first `run` (the whole check, then remembered) is timed once and reported
apart; then `--rounds` times each, interleaved, `run` (the remembered check) and the baseline,
`trustbench verify` on the same folder (always the whole check). Reported: median wall and
CPU seconds (the process's user + system, the steadier figure on a shared machine) and the
ratio of the medians. Target (issue 56): `run` on the finished folder within 2 s. Nothing
asserts a time; the script checks that every command exited 0.

To compare with another checkout (the figures before a change), prefix the command with
`PYTHONPATH=/elsewhere/src` (see `bench._common.env`).
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

from bench._common import REPO, env, machine, phase, ratio

TARGET_S = 2.0
"""Issue 56: resuming a finished 200,000-trial folder, wall seconds."""


def _timed(arguments: list[str], cache: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one `python -m trustbench ...` process (`cache`: its cache)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "trustbench", *arguments],
        env={**env(), "TRUSTBENCH_CACHE": str(cache)},
        cwd=REPO,
        check=True,
        capture_output=True,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=50)
    parser.add_argument("--trials-per-case", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--folder", type=Path, help="a finished folder to reuse (else made)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.folder
        if folder is None:
            folder = Path(tmp) / "run"
            made = phase(
                "make_ledger",
                run_dir=str(folder),
                cases=args.cases,
                trials_per_case=args.trials_per_case,
                unfinished=0,
            )
            print(f"  synthetic finished ledger: {made['finished']} trials (not timed)")
        size = (folder / "ledger.sqlite").stat().st_size
        print(f"resume_finished: {folder} ({size / 1e6:.0f} MB ledger); {machine()}")
        commands = {
            "trustbench verify (baseline)": ["verify", str(folder)],
            "trustbench run (finished)": ["run", str(folder), "--quiet"],
        }
        cache = Path(tmp) / "cache"
        _timed(commands["trustbench verify (baseline)"], cache)  # page and bytecode caches
        wall, cpu = _timed(commands["trustbench run (finished)"], cache)
        print(f"  {'trustbench run (first: whole check)':36s} {wall:6.2f} s wall {cpu:6.2f} s CPU")
        figures: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        for _ in range(args.rounds):
            for name, arguments in commands.items():
                figures[name].append(_timed(arguments, cache))
    medians = {}
    for name, rounds in figures.items():
        wall = statistics.median(w for w, _ in rounds)
        cpu = statistics.median(c for _, c in rounds)
        medians[name] = (wall, cpu)
        print(
            f"  {name:36s} median {wall:6.2f} s wall {cpu:6.2f} s CPU "
            f"(wall range {min(w for w, _ in rounds):.2f} to {max(w for w, _ in rounds):.2f})"
        )
    run_wall, run_cpu = medians["trustbench run (finished)"]
    verify_wall, verify_cpu = medians["trustbench verify (baseline)"]
    verdict = "met" if run_wall <= TARGET_S else "NOT met"
    print(
        f"run / verify: wall {ratio(run_wall, verify_wall)}, CPU {ratio(run_cpu, verify_cpu)}; "
        f"run {run_wall:.2f} s wall, target <= {TARGET_S} s {verdict}"
    )


if __name__ == "__main__":
    main()
