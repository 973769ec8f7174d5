"""Analysis bench: grade 100,000 reviewer trials with clustered intervals, gates and reports.

Run: `python -m bench.analysis` from the repository root (options: `--help`).

Times, in a fresh process, the reviewer report step on 100,000 synthetic trial rows (see
`bench/_analysis_workload.py`): review counts overall / per group / per variant, a clustered
figure with cluster-robust t and a seeded 10,000-resample cluster bootstrap per headline rate,
exact binomial figures, gates, `record.json` with every trial row, and `report.html` with plots.
Target <= 5 s. Then reruns it with 1,000 and 100,000 resamples to show that peak memory does not
grow with the number of resamples (the bootstrap works in fixed-size chunks).

First, what a user runs: `trustbench report RUN` itself, as a process from exec to exit (imports,
verification of the ledger chain, the re-check of the frozen corpus, grading every reply, figures,
gates, `record.json`, `record.trials.jsonl`, `report.html`, the statement) on a generated ledger of
`--ledger-trials` reviewer trials (`bench/_ledger_fixture.py`; 0 skips it). `bench/memory.py`
times it at several sizes.
"""

from __future__ import annotations

import argparse
import tempfile

from bench._common import machine, phase


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=100_000)
    parser.add_argument("--resamples", type=int, default=10_000)
    parser.add_argument("--ledger-trials", type=int, default=20_000)
    args = parser.parse_args()
    print(f"analysis: {args.trials} trials, {args.resamples} resamples; {machine()}")
    if args.ledger_trials:
        _command(args.ledger_trials)
    runs = {}
    for resamples in (args.resamples, args.resamples // 10, args.resamples * 10):
        with tempfile.TemporaryDirectory() as tmp:
            runs[resamples] = phase(
                "analysis", trials=args.trials, resamples=resamples, out_dir=tmp
            )
    main_run = runs[args.resamples]
    print(
        f"  total                 {main_run['wall_s']:6.2f} s wall "
        f"{main_run['cpu_s']:6.2f} s CPU  (target <= 5 s)"
    )
    for step, seconds in main_run["steps"].items():
        if step != "gates_failed":
            print(f"    {step:<20}{seconds:6.2f} s wall")
    print("  peak RSS by resamples (rows alone, before analysis, in brackets)")
    for resamples, run in sorted(runs.items()):
        print(
            f"    {resamples:>7} resamples  {run['peak_rss_mib']:5.0f} MiB "
            f"({run['rss_before_mib']:.0f} MiB)  {run['wall_s']:6.2f} s wall"
        )


def _command(trials: int) -> None:
    """Time `trustbench report` on a generated ledger of `trials` trials (50 cases)."""
    with tempfile.TemporaryDirectory() as tmp:
        made = phase(
            "make_ledger", run_dir=tmp, cases=50, trials_per_case=trials // 50, unfinished=0
        )
        reported = phase("cli_report", run_dir=tmp)
    print(
        f"  trustbench report     {reported['wall_s']:6.2f} s wall {reported['cpu_s']:6.2f} s CPU "
        f"({1000 * reported['cpu_s'] / made['finished']:.3f} ms CPU/trial), peak RSS "
        f"{reported['peak_rss_mib']:.0f} MiB; {made['finished']} trials of a generated ledger, "
        "the command as a process"
    )


if __name__ == "__main__":
    main()
