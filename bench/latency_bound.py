"""Latency-bound bench: 2,000 reviewer trials at 50 ms latency, concurrency 64.

Run: `python -m bench.latency_bound` from the repository root (options: `--help`);
`--rounds 10 --load` is how the loaded target is measured.

Prints wall / ideal (ideal = trials x latency / concurrency), wall / floor (the floor is a bare
aiohttp client sending the same requests to the same server in the same round), the CPU per
trial, peak RSS and ledger bytes per trial (target <= 40% of 8,954 B). The ledger is fully on.
trustbench's providers send through aiohttp too (`providers/_pool.py`), so the floor is the same
client without the harness.

Start-up (what `trustbench run` does before its first trial: re-hash and re-validate the frozen
corpus, open the ledger) does not grow with the run, so it is printed apart, and the wall and
CPU figures are given both for the whole run and for the trials alone:

- harness CPU per trial = (run CPU - start-up CPU) / trials - the bare client's CPU per request,
  i.e. what the harness adds to sending the request (target <= 0.5 ms);
- wall / floor over the whole run and over the trials alone (targets <= 1.05x quiet,
  <= 1.10x beside a CPU load).

As a user runs it: each round also times the command, `trustbench run RUN --quiet`, as a
process from exec to exit (interpreter, imports, checks, trials, sign-off), against the bare
aiohttp client as a process of its own (`bench/_bare_client.py`: standard library and aiohttp,
the same request bodies prepared beforehand). Targets (issue 35): process wall within 1.15x of
the bare client's at 50 ms latency, within 1.02x at 1.5 s, both for the issue's workload of
2,000 trials at concurrency 64 (`--latency 1.5`: from 1 s up the shape defaults to a short run,
256 trials at concurrency 128, two waves of requests, whose ratio is printed as reported, not
against the target; `--cases 50 --trials-per-case 40 --concurrency 64` is the target's). Each
process wall is split, for both programs, into exec to the first request (for trustbench, to
its `run_started` event: imports, input checks, ledger, preflight) and the last response to
exit (sign-off, ledger close, interpreter exit), read from the ledger's and the client's own
wall-clock stamps.

Wall time on a shared 2-core machine moves by several percent between identical runs, so
`--rounds N` measures the floors and trustbench N times, trustbench last and first in turn, and
prints every round and the median and range of each ratio. `--load` runs the rounds beside a
CPU load (one `while True: pass` process, started and stopped by the bench).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from bench._common import (
    add_shape_options,
    cpu_load,
    machine,
    phase,
    ratio,
    server,
    shape_defaults,
    spec_text,
    spread,
)

ISSUE_BASELINE_BYTES = 8954
"""Ledger bytes per trial when issue 17 was filed (format 1, the earlier stand-in track)."""
TARGET_SHAPE = {"cases": 50, "trials_per_case": 40, "concurrency": 64}
"""The workload issue 35 states its process targets for: 2,000 trials at concurrency 64."""


def _process_round(
    args: argparse.Namespace, base_url: str, run_dir: Path, ours_first: bool
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The bare client and `trustbench run` as processes, exec to exit; trustbench first or last."""
    shape = {"cases": args.cases, "trials_per_case": args.trials_per_case}
    spec = spec_text(base_url=base_url, concurrency=args.concurrency, **shape)

    def bare() -> dict[str, Any]:
        return phase("floor_process", base_url=base_url, concurrency=args.concurrency, **shape)

    if ours_first:
        ours = phase("cli_run", run_dir=str(run_dir), spec=spec)
        return bare(), ours
    return bare(), phase("cli_run", run_dir=str(run_dir), spec=spec)


def _print_process_round(
    number: int, rounds: int, bare: dict[str, Any], command: dict[str, Any], ideal: float
) -> None:
    print(
        f"  round {number + 1} of {rounds}, as processes (exec to exit)\n"
        f"    bare client process {bare['wall_s']:7.2f} s wall, "
        f"{bare['cpu_s']:.2f} s CPU, peak RSS {bare['peak_rss_mib']:.0f} MiB; {_ends(bare)}\n"
        f"    trustbench run      {command['wall_s']:7.2f} s wall, "
        f"{command['cpu_s']:.2f} s CPU, peak RSS {command['peak_rss_mib']:.0f} MiB; "
        f"{_ends(command)}\n"
        f"    process wall / bare {ratio(command['wall_s'], bare['wall_s'])}; "
        f"/ ideal {ratio(command['wall_s'], ideal)} (bare / ideal {ratio(bare['wall_s'], ideal)})"
    )


def _ends(process: dict[str, Any]) -> str:
    return (
        f"exec to first request {process['before_first_trial_s']:.2f} s, "
        f"last response to exit {process['after_last_trial_s']:.2f} s"
    )


def _round(
    args: argparse.Namespace, base_url: str, run_dir: Path, ours_first: bool
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The bare client and one trustbench run on the same server; trustbench first or last."""
    shape = {
        "cases": args.cases,
        "trials_per_case": args.trials_per_case,
        "concurrency": args.concurrency,
    }
    spec = spec_text(base_url=base_url, **shape)

    if ours_first:
        ours = phase("trustbench_run", run_dir=str(run_dir), spec=spec)
        return phase("floor", base_url=base_url, **shape), ours
    return phase("floor", base_url=base_url, **shape), phase(
        "trustbench_run", run_dir=str(run_dir), spec=spec
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_shape_options(parser)
    parser.add_argument("--rounds", type=int, default=1, help="floor + trustbench pairs")
    parser.add_argument("--load", action="store_true", help="run beside a CPU load")
    args = shape_defaults(parser.parse_args())
    trials = args.cases * args.trials_per_case
    latency_s = args.latency_ms / 1000
    ideal = trials * latency_s / args.concurrency
    print(
        f"latency-bound: {trials} trials, latency {args.latency_ms} ms, "
        f"concurrency {args.concurrency}, {args.rounds} round(s), "
        f"{'beside a CPU load' if args.load else 'no added load'}; {machine()}"
    )
    print(f"  ideal                 {ideal:7.2f} s")
    whole, alone, harness, process = [], [], [], []
    target = 1.15 if args.latency_ms < 1000 else 1.02
    on_target_shape = all(getattr(args, name) == value for name, value in TARGET_SHAPE.items())
    with server(latency_s) as base_url, tempfile.TemporaryDirectory() as tmp, cpu_load(args.load):
        for number in range(args.rounds):
            bare, command = _process_round(
                args, base_url, Path(tmp) / f"cli{number}", number % 2 == 0
            )
            assert bare["ok"] == trials and command["completed"] == trials, (bare, command)
            process.append(command["wall_s"] / bare["wall_s"])
            _print_process_round(number, args.rounds, bare, command, ideal)
            floor, ours = _round(args, base_url, Path(tmp) / f"run{number}", number % 2 == 1)
            assert ours["completed"] == trials and floor["ok"] == trials, (ours, floor)
            trial_cpu = (ours["cpu_s"] - ours["startup_cpu_s"]) / trials
            trial_wall = ours["wall_s"] - ours["startup_wall_s"]
            whole.append(ours["wall_s"] / floor["wall_s"])
            alone.append(trial_wall / floor["wall_s"])
            harness.append(1000 * (trial_cpu - floor["cpu_s"] / trials))
            _print_round(number, args.rounds, floor, ours, ideal, trials)
    print(
        f"  process wall / bare   {spread(process)}  (`trustbench run` exec to exit over the "
        + (
            f"bare client process; target <= {target:.2f}x at this latency)"
            if on_target_shape
            else "bare client process; reported: the target, "
            f"<= {target:.2f}x at this latency, is stated for 2,000 trials at concurrency 64, "
            "`--cases 50 --trials-per-case 40 --concurrency 64`)"
        )
    )
    print(
        f"  wall / floor          {spread(whole)} whole run; {spread(alone)} trials alone  "
        "(target <= 1.05x quiet, <= 1.10x beside a CPU load)"
    )
    print(f"  harness CPU/trial     {spread(harness, ' ms', 3)}  (target <= 0.5 ms)")


def _print_round(
    number: int,
    rounds: int,
    floor: dict[str, Any],
    ours: dict[str, Any],
    ideal: float,
    trials: int,
) -> None:
    print(f"  round {number + 1} of {rounds}")
    print(
        f"    floor (aiohttp)     {floor['wall_s']:7.2f} s wall, "
        f"{1000 * floor['cpu_s'] / trials:.3f} ms CPU/request, "
        f"peak RSS {floor['peak_rss_mib']:.0f} MiB"
    )
    print(
        f"    trustbench run      {ours['wall_s']:7.2f} s wall, "
        f"{1000 * ours['cpu_s'] / trials:.3f} ms CPU/trial, "
        f"peak RSS {ours['peak_rss_mib']:.0f} MiB, "
        f"ledger {ours['ledger_bytes'] / trials:.0f} B/trial "
        f"({100 * ours['ledger_bytes'] / trials / ISSUE_BASELINE_BYTES:.1f}% of 8,954)"
    )
    print(
        f"      of which start-up {ours['startup_wall_s']:7.2f} s wall, "
        f"{ours['startup_cpu_s']:.3f} s CPU (before the first trial)"
    )
    print(
        f"    wall / ideal        {ratio(ours['wall_s'], ideal)}; wall / floor "
        f"{ratio(ours['wall_s'], floor['wall_s'])} whole run, "
        f"{ratio(ours['wall_s'] - ours['startup_wall_s'], floor['wall_s'])} trials alone; "
        f"CPU / floor CPU {ratio(ours['cpu_s'], floor['cpu_s'])}"
    )
    trial_cpu = (ours["cpu_s"] - ours["startup_cpu_s"]) / trials
    print(
        f"    harness CPU/trial   {1000 * (trial_cpu - floor['cpu_s'] / trials):.3f} ms over "
        f"aiohttp (trial CPU {1000 * trial_cpu:.3f} ms)"
    )


if __name__ == "__main__":
    main()
