"""Resume bench: how long a resumed run takes to find what remains in a 100,000-trial ledger.

Run: `python -m bench.resume` from the repository root (options: `--help`).

Writes a synthetic ledger of the reviewer workload (100,000 planned trials, 1,000 not finished,
10 of those interrupted mid-trial; see `bench/_ledger_fixture.py`), then, in a fresh process,
times `trustbench run` from its start up to the moment it would start the first remaining trial:
manifest and input checks, the ledger chain verification done before every resume, finding the
finished trials and the interrupted executions (marked abandoned), and ordering the rest. The
chain verification alone is timed beside it (the baseline: reading and re-hashing every row),
and so is finding what remains after it (the same queries the runner makes). Warm page cache;
CPU seconds are the steadier figure on a shared machine.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from bench._common import machine, phase, ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=50)
    parser.add_argument("--trials-per-case", type=int, default=2000)
    parser.add_argument("--unfinished", type=int, default=1000)
    args = parser.parse_args()
    planned = args.cases * args.trials_per_case
    print(f"resume: {planned} planned trials, {args.unfinished} unfinished; {machine()}")
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = str(Path(tmp) / "run")
        made = phase(
            "make_ledger",
            run_dir=run_dir,
            cases=args.cases,
            trials_per_case=args.trials_per_case,
            unfinished=args.unfinished,
        )
        print(
            f"  synthetic ledger      {made['finished']} trials finished, "
            f"{made['bytes'] / 1e6:.0f} MB, written in {made['wall_s']:.1f} s (not timed)"
        )
        result = phase("resume_startup", run_dir=run_dir)
    startup, verify, remaining = result["startup"], result["verify"], result["remaining"]
    assert verify["problems"] == 0 and result["finished_before"] == made["finished"], result
    assert remaining["remaining"] == args.unfinished, remaining

    def line(label: str, figures: dict[str, float], note: str = "") -> None:
        print(
            f"  {label:<24}{figures['wall_s']:6.2f} s wall {figures['cpu_s']:6.2f} s CPU "
            f"peak RSS {figures['peak_rss_mib']:4.0f} MiB{note}"
        )

    line("resume up to 1st trial", startup, "  (everything below, and the input checks)")
    line("  chain verification", verify, "  (re-hash every row: the baseline)")
    line("  finding what remains", remaining, "  (target <= 1 s)")
    print(f"  remaining / verification CPU  {ratio(remaining['cpu_s'], verify['cpu_s'])}")


if __name__ == "__main__":
    main()
