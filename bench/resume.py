"""Resume bench: how long a resumed run takes to find what remains in a 100,000-trial ledger.

Run: `python -m bench.resume` from the repository root (options: `--help`).

Writes a synthetic ledger of the reviewer workload (100,000 planned trials, 1,000 not finished,
10 of those interrupted mid-trial; see `bench/_ledger_fixture.py`), then, in a fresh process,
times `trustbench run` from its start up to the moment it would start the first remaining trial:
manifest and input checks, the ledger chain verification done before every resume, finding the
finished trials and the interrupted executions (marked abandoned), and ordering the rest. The
chain verification alone is timed beside it (the baseline: reading and re-hashing every row),
so the remainder is the cost of finding what remains. Warm page cache for both.
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
    startup, verify = result["startup"], result["verify"]
    assert verify["problems"] == 0 and result["finished_before"] == made["finished"], result
    finding = startup["wall_s"] - verify["wall_s"]
    print(
        f"  resume up to 1st trial {startup['wall_s']:6.2f} s wall "
        f"(peak RSS {startup['peak_rss_mib']:.0f} MiB)"
    )
    print(f"  chain verification     {verify['wall_s']:6.2f} s wall (part of the above)")
    print(f"  finding what remains   {finding:6.2f} s (the difference; target <= 1 s)")
    print(f"  verification share     {ratio(verify['wall_s'], startup['wall_s'])} of startup")


if __name__ == "__main__":
    main()
