"""Peer bench: the latency-bound workload through Inspect AI, and through trustbench, same run.

Run: `python -m bench.peer_inspect` from the repository root (needs the `bench` extra:
`pip install -e '.[bench]'`; options: `--help`).

The identical workload (same server and latency, same prompts and evaluation ids, same trials in
the same order, same concurrency, every reply validated) through Inspect AI's OpenAI provider
(`inspect eval bench/inspect_task.py --model openai/... -M responses_api=false --display none`)
and through `trustbench run` with its full ledger (median of three runs). Prints both walls and
CPU, Inspect's over ours, and its ceiling Inspect / floor (what zero overhead would get).
Inspect's wall and CPU are those of its whole `inspect eval` process (start-up and log writing
included, as a user meets them). Ours are given both ways: `run_experiment` in-process (freezing
and imports excluded, which flatters us by Inspect's start-up) and, as a user runs it,
`trustbench run RUN --quiet` as a process from exec to exit (median of three), beside the bare
aiohttp client as a process (`bench/_bare_client.py`). The process ratios are the fair ones.
`--latency 1.5` gives the realistic-latency figures (the shape then defaults to 256 trials at
concurrency 128, so the run stays short); each process wall is split into exec to the first
request and the last response to exit (see `bench.latency_bound`).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from bench._common import (
    add_shape_options,
    machine,
    phase,
    ratio,
    server,
    shape_defaults,
    spec_text,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_shape_options(parser)
    args = shape_defaults(parser.parse_args())
    trials = args.cases * args.trials_per_case
    shape = {"cases": args.cases, "trials_per_case": args.trials_per_case}
    print(
        f"peer: {trials} trials, latency {args.latency_ms} ms, concurrency "
        f"{args.concurrency}; {machine()}"
    )
    with server(args.latency_ms / 1000) as base_url, tempfile.TemporaryDirectory() as tmp:
        floor = phase("floor", base_url=base_url, concurrency=args.concurrency, **shape)
        spec = spec_text(base_url=base_url, concurrency=args.concurrency, **shape)
        # Ours is short and so at the mercy of a moment's load: take the median of three runs
        # (Inspect, at 70 s or more, averages the load over its own run).
        runs = sorted(
            (
                phase(
                    "trustbench_run",
                    run_dir=str(Path(tmp) / f"run{index}"),
                    spec=spec,
                )
                for index in range(3)
            ),
            key=lambda figures: figures["wall_s"],
        )
        ours = runs[1]
        commands = sorted(
            (
                phase("cli_run", run_dir=str(Path(tmp) / f"cli{index}"), spec=spec)
                for index in range(3)
            ),
            key=lambda figures: figures["wall_s"],
        )
        bare = phase("floor_process", base_url=base_url, concurrency=args.concurrency, **shape)
        peer = phase(
            "inspect_eval",
            base_url=base_url,
            concurrency=args.concurrency,
            log_dir=str(Path(tmp) / "inspect-logs"),
            **shape,
        )
    assert ours["completed"] == trials and peer["samples"] == trials, (ours, peer)
    assert bare["ok"] == trials and all(c["completed"] == trials for c in commands), commands
    command = commands[1]
    print(f"  bare client (floor)   {floor['wall_s']:7.2f} s wall")
    walls = ", ".join(f"{run['wall_s']:.2f}" for run in runs)
    print(
        f"  trustbench run        {ours['wall_s']:7.2f} s wall "
        f"{1000 * ours['cpu_s'] / trials:7.3f} ms CPU/trial  (median of {walls} s)"
    )
    print(
        f"  Inspect AI eval       {peer['wall_s']:7.2f} s wall "
        f"{1000 * peer['cpu_s'] / trials:7.3f} ms CPU/sample (process, start-up included); "
        f"status {peer['status']}, valid replies {peer['valid_share']:.0%}"
    )
    print(f"  wall: Inspect / ours  {ratio(peer['wall_s'], ours['wall_s'])}")
    # No harness can beat the bare client, so Inspect / floor bounds the wall ratio from above.
    print(f"  ceiling: Inspect / floor {ratio(peer['wall_s'], floor['wall_s'])}")
    print(f"  CPU:  Inspect / ours  {ratio(peer['cpu_s'], ours['cpu_s'])}")
    command_walls = ", ".join(f"{c['wall_s']:.2f}" for c in commands)
    ideal = trials * args.latency_ms / 1000 / args.concurrency
    print("  as processes, exec to exit (what a user waits for)")
    print(
        f"    bare client         {bare['wall_s']:7.2f} s wall {bare['cpu_s']:6.2f} s CPU; "
        f"{_ends(bare)}\n"
        f"    trustbench run      {command['wall_s']:7.2f} s wall {command['cpu_s']:6.2f} s CPU  "
        f"(median of {command_walls} s); {_ends(command)}\n"
        f"    inspect eval        {peer['wall_s']:7.2f} s wall {peer['cpu_s']:6.2f} s CPU"
    )
    print(
        f"    wall: ours / bare {ratio(command['wall_s'], bare['wall_s'])}, Inspect / bare "
        f"{ratio(peer['wall_s'], bare['wall_s'])}, Inspect / ours "
        f"{ratio(peer['wall_s'], command['wall_s'])}; ideal {ideal:.2f} s"
    )
    print(f"    CPU:  Inspect / ours {ratio(peer['cpu_s'], command['cpu_s'])}")


def _ends(process: dict[str, Any]) -> str:
    return (
        f"exec to first request {process['before_first_trial_s']:.2f} s, "
        f"last response to exit {process['after_last_trial_s']:.2f} s"
    )


if __name__ == "__main__":
    main()
