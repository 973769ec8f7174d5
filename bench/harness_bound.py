"""Harness-bound bench: the latency-bound workload with zero latency, then in-process.

Run: `python -m bench.harness_bound` from the repository root (options: `--help`).

Two workloads, each against a baseline measured in the same run:
- HTTP at zero server latency: trials/s of `trustbench run` vs requests/s of a bare aiohttp client
  sending the same requests (the server's speed bounds both);
- in-process candidate (the reference-policy reviewer called directly, no HTTP): trials/s of
  `trustbench run` vs a plain loop doing the same trial work (build messages, answer, validate)
  with no harness, so the difference is the harness (ledger, hashing, scheduling) alone.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from bench._common import machine, phase, ratio, server, spec_text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=50)
    parser.add_argument("--trials-per-case", type=int, default=40)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()
    trials = args.cases * args.trials_per_case
    shape = {"cases": args.cases, "trials_per_case": args.trials_per_case}
    print(f"harness-bound: {trials} trials, concurrency {args.concurrency}; {machine()}")
    with tempfile.TemporaryDirectory() as tmp:
        with server(0.0) as base_url:
            floor = phase("floor", base_url=base_url, concurrency=args.concurrency, **shape)
            spec = spec_text(base_url=base_url, concurrency=args.concurrency, **shape)
            http = phase("trustbench_run", run_dir=str(Path(tmp) / "http"), spec=spec)
        direct = phase("direct_inprocess", **shape)
        spec = spec_text(base_url=None, concurrency=args.concurrency, **shape)
        inproc = phase("trustbench_run", run_dir=str(Path(tmp) / "inproc"), spec=spec)
    assert http["completed"] == trials and inproc["completed"] == trials, (http, inproc)

    def rate(figures: dict[str, float]) -> float:
        return trials / figures["wall_s"]

    def cpu_ms(figures: dict[str, float]) -> float:
        return 1000 * figures["cpu_s"] / trials

    print("  HTTP, zero latency")
    print(f"    bare aiohttp client {rate(floor):8.0f} requests/s  {cpu_ms(floor):.3f} ms CPU")
    print(f"    trustbench run      {rate(http):8.0f} trials/s    {cpu_ms(http):.3f} ms CPU")
    print(f"    throughput ratio    {ratio(rate(http), rate(floor))} of the aiohttp client")
    print("  in-process candidate")
    print(f"    plain loop          {rate(direct):8.0f} trials/s    {cpu_ms(direct):.3f} ms CPU")
    print(f"    trustbench run      {rate(inproc):8.0f} trials/s    {cpu_ms(inproc):.3f} ms CPU")
    print(f"    throughput ratio    {ratio(rate(inproc), rate(direct))} of the plain loop")
    print(f"    harness overhead    {cpu_ms(inproc) - cpu_ms(direct):.3f} ms CPU per trial")


if __name__ == "__main__":
    main()
