"""Memory bench: peak RSS and time of `run` and `report` as the run grows (issues 30 and 35).

Run: `python -m bench.memory` from the repository root (options: `--help`).

- `run`: the in-process reference-policy reviewer on the built-in corpus (50 cases, K = trials /
  50), `trustbench run RUN --quiet` as a process (exec to exit), at each of `--run-trials`
  (default 5,000, 50,000 and 200,000). Target: peak RSS at the largest size within 1.2x of the
  smallest (a run holds the plan and the trials in flight, nothing per finished trial).
  Then `trustbench report` on the same folder, as a process (for runs up to
  `--run-report-max` trials): target its wall at most the run's.
- `report` on generated ledgers (`bench/_ledger_fixture.py`: the reviewer workload's real rows,
  HTTP-shaped attempts, written in batches; two identical reviewers, so three configurations
  and one paired comparison) of `--report-trials` (default 50,000 and 1,000,000):
  `trustbench report` as a process, exec to exit. Targets: peak RSS at the largest within 1.2x
  of the smallest, the largest under 120 s, time per trial flat between sizes (linear).
  Generating a ledger is printed apart (it is not what is measured); `--keep DIR` keeps the
  generated ledgers in DIR and reuses one already there (a 1,000,000-trial ledger takes minutes
  to write and about 3 GB). The reference reviewer's replies to a case differ only in their
  evaluation id, and `report` grades each distinct reply of a case once; `--distinct-replies`
  makes every reply differ (as a sampling model's do), so every one is graded in full.

Every figure is printed with the sizes it compares; nothing asserts a time.
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from bench._common import machine, phase, ratio, spec_text

CASES = 50
"""Cases of the built-in corpus the workload uses (trials per case = trials / CASES)."""
REPORT_CANDIDATES = 2
"""Identical reviewers of the generated ledgers, at every size (the spec allows at most 10,000
trials per case: 1,000,000 trials of 50 cases need two candidates)."""


def _sizes(text: str) -> list[int]:
    return sorted(int(part.replace("_", "")) for part in text.split(",") if part.strip())


def _report_line(label: str, figures: dict[str, Any], trials: int) -> str:
    rows = figures["trial_rows_bytes"]
    return (
        f"    {label:22s} {figures['wall_s']:8.2f} s wall {figures['cpu_s']:8.2f} s CPU "
        f"({1000 * figures['cpu_s'] / trials:.3f} ms CPU/trial), peak RSS "
        f"{figures['peak_rss_mib']:6.0f} MiB; record.json {figures['record_bytes'] / 1e6:.2f} MB, "
        f"trial rows {'-' if rows is None else f'{rows / 1e6:.1f} MB'}, "
        f"report.html {figures['html_bytes'] / 1e6:.2f} MB"
    )


def _runs(sizes: list[int], tmp: Path, report_max: int) -> None:
    print("  `trustbench run` (in-process reviewer) then `trustbench report`, both as processes")
    runs: dict[int, dict[str, Any]] = {}
    for trials in sizes:
        folder = tmp / f"run{trials}"
        spec = spec_text(
            base_url=None, cases=CASES, trials_per_case=trials // CASES, concurrency=16
        )
        ran = phase("cli_run", run_dir=str(folder), spec=spec)
        assert ran["completed"] == trials, ran
        runs[trials] = {"run": ran}
        base = runs[sizes[0]]["run"]["peak_rss_mib"]
        print(
            f"    run {trials:>9,}          {ran['wall_s']:8.2f} s wall {ran['cpu_s']:8.2f} s CPU "
            f"({1000 * ran['cpu_s'] / trials:.3f} ms CPU/trial), peak RSS "
            f"{ran['peak_rss_mib']:6.0f} MiB ({ratio(ran['peak_rss_mib'], base)} of {sizes[0]:,})"
        )
        if trials > report_max:
            continue
        reported = phase("cli_report", run_dir=str(folder))
        print(_report_line(f"report {trials:,}", reported, trials))
        print(
            f"      report / run wall {ratio(reported['wall_s'], ran['wall_s'])}, CPU "
            f"{ratio(reported['cpu_s'], ran['cpu_s'])} (target: wall <= 1.00x)"
        )
    low, high = sizes[0], sizes[-1]
    print(
        f"  run peak RSS {high:,} / {low:,}: "
        f"{ratio(runs[high]['run']['peak_rss_mib'], runs[low]['run']['peak_rss_mib'])} "
        "(target <= 1.20x)"
    )


def _kept(folder: Path, trials: int) -> bool:
    """A ledger generated before (by `--keep`) with `trials` finished trials and its sign-off."""
    if not (folder / "ledger.sqlite").exists():
        return False
    connection = sqlite3.connect(folder / "ledger.sqlite")
    try:
        (count,) = connection.execute("SELECT COUNT(*) FROM trials").fetchone()
        (signed,) = connection.execute(
            "SELECT COUNT(*) FROM events WHERE kind = 'run_finished'"
        ).fetchone()
    finally:
        connection.close()
    return bool(count == trials and signed)


def _reports(sizes: list[int], tmp: Path, distinct: bool) -> None:
    replies = "every reply distinct" if distinct else "replies alike but for their ids"
    print(f"  report on generated ledgers (`trustbench report` as a process; {replies})")
    figures: dict[int, dict[str, Any]] = {}
    for trials in sizes:
        folder = tmp / f"ledger{trials}{'-distinct' if distinct else ''}"
        if _kept(folder, trials):
            print(f"    ledger {trials:>9,}       reused from {folder} (generated before)")
        else:
            shutil.rmtree(folder, ignore_errors=True)
            made = phase(
                "make_ledger",
                run_dir=str(folder),
                cases=CASES,
                trials_per_case=trials // (CASES * REPORT_CANDIDATES),
                unfinished=0,
                candidates=REPORT_CANDIDATES,
                distinct_replies=distinct,
            )
            print(
                f"    ledger {trials:>9,}       generated in {made['wall_s']:.1f} s "
                f"({made['bytes'] / 1e6:.0f} MB; not measured)"
            )
        figures[trials] = phase("cli_report", run_dir=str(folder))
        print(_report_line(f"report {trials:,}", figures[trials], trials))
        base = figures[sizes[0]]["peak_rss_mib"]
        print(f"      peak RSS {ratio(figures[trials]['peak_rss_mib'], base)} of {sizes[0]:,}")
    low, high = sizes[0], sizes[-1]
    per_trial = {n: figures[n]["cpu_s"] / n for n in sizes}
    print(
        f"  report peak RSS {high:,} / {low:,}: "
        f"{ratio(figures[high]['peak_rss_mib'], figures[low]['peak_rss_mib'])} (target <= 1.20x); "
        f"{high:,} in {figures[high]['wall_s']:.1f} s wall (target < 120 s); CPU per trial "
        f"{high:,} / {low:,}: {ratio(per_trial[high], per_trial[low])} (linear: 1.00x)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--run-trials", default="5000,50000,200000", help="comma-separated; '' skips"
    )
    parser.add_argument(
        "--run-report-max",
        type=int,
        default=50_000,
        help="report the run folders up to this many trials (0: none)",
    )
    parser.add_argument(
        "--report-trials", default="50000,1000000", help="comma-separated; '' skips"
    )
    parser.add_argument("--keep", type=Path, help="keep (and reuse) generated ledgers here")
    parser.add_argument(
        "--distinct-replies",
        action="store_true",
        help="generated ledgers whose replies all differ (none graded from another's result)",
    )
    args = parser.parse_args()
    print(f"memory: {machine()}")
    with tempfile.TemporaryDirectory() as tmp:
        if _sizes(args.run_trials):
            _runs(_sizes(args.run_trials), Path(tmp), args.run_report_max)
        if _sizes(args.report_trials):
            kept = args.keep or Path(tmp)
            kept.mkdir(parents=True, exist_ok=True)
            _reports(_sizes(args.report_trials), kept, args.distinct_replies)


if __name__ == "__main__":
    main()
