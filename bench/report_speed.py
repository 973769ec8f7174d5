"""`trustbench report` of a 2,000-trial reviewer run against that run's own wall, as processes.

Issue 55 asks `report` to take at most 0.25x the wall of the run it reports (measured before at
about 2.0 s against 2.2 s). The run is the latency-bound bench's workload: 50 cases x 40 trials
of the HTTP reviewer at 50 ms latency, concurrency 64, on the bench server in its own process.
Each phase is a fresh process (`bench/_phases.py`): `trustbench run RUN --quiet` (frozen
untimed), then `trustbench report RUN`, exec to exit. Nothing asserts a time.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from bench._common import machine, phase, ratio, server, spec_text, spread

TARGET = 0.25
"""Report wall / run wall (issue 55, deliverable 5)."""


def main() -> None:
    """Run and report `--rounds` times; print each phase's wall and the ratio per round."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="run + report pairs (default 2)")
    parser.add_argument("--latency", type=float, default=0.05, help="server latency, s")
    args = parser.parse_args()
    print(f"report speed: {machine()}")
    ratios: list[float] = []
    with server(args.latency) as base_url, tempfile.TemporaryDirectory() as tmp:
        spec = spec_text(base_url=base_url, cases=50, trials_per_case=40, concurrency=64)
        for round_ in range(args.rounds):
            folder = Path(tmp) / f"run{round_}"
            ran = phase("cli_run", run_dir=str(folder), spec=spec)
            assert ran["completed"] == 2000, ran
            reported = phase("cli_report", run_dir=str(folder))
            ratios.append(reported["wall_s"] / ran["wall_s"])
            print(
                f"  round {round_ + 1}: run {ran['wall_s']:.2f} s wall ({ran['cpu_s']:.2f} s "
                f"CPU), report {reported['wall_s']:.2f} s wall ({reported['cpu_s']:.2f} s CPU): "
                f"report / run {ratio(reported['wall_s'], ran['wall_s'])}"
            )
    print(f"  report / run wall: {spread(ratios)} (target <= {TARGET:.2f}x)")


if __name__ == "__main__":
    main()
