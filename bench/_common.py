"""Shared bench plumbing: the server process, specs, measured phases in fresh processes.

Every measured phase runs in its own Python process (`python -m bench._phases ...`), so its CPU
time, peak RSS and wall time are its own and not inflated by what an earlier phase allocated.
The server runs in a further process; CPU figures are the measured process's user+system time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def env() -> dict[str, str]:
    """Environment for child processes: `src` and the repo root importable.

    A `PYTHONPATH` set by the caller comes first, so `PYTHONPATH=/elsewhere/src python -m
    bench...` measures another checkout's trustbench (how the before/after figures were taken).
    Bytecode is cached (as an installed package's is), but under a folder in the temporary
    directory (`PYTHONPYCACHEPREFIX`, unless the caller set one), never in the checkout: with
    `PYTHONDONTWRITEBYTECODE` set, every process would recompile trustbench's sources and the
    start-up figures would time the compiler, not the program.
    """
    paths = [str(REPO / "src"), str(REPO)]
    if os.environ.get("PYTHONPATH"):
        paths.insert(0, os.environ["PYTHONPATH"])
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    environment.pop("PYTHONDONTWRITEBYTECODE", None)
    environment.setdefault(
        "PYTHONPYCACHEPREFIX", str(Path(tempfile.gettempdir()) / "trustbench-bench-pycache")
    )
    return environment


@contextmanager
def server(latency_s: float, *, loop: bool = False, timeline: Path | None = None) -> Iterator[str]:
    """Start the bench server in its own process; yield its OpenAI base URL.

    `loop` serves a reviewer-gated workflow's agent and reviewer instead of reviews alone; with
    it, `timeline` names the file the server writes its requests' times to when it stops.
    """
    mode = ["loop", *([str(timeline)] if timeline else [])] if loop else []
    process = subprocess.Popen(
        [sys.executable, "-m", "bench._server", str(latency_s), *mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env(),
        cwd=REPO,
        text=True,
    )
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline())
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        assert process.stdin is not None
        process.stdin.close()
        process.wait(10)


@contextmanager
def cpu_load(enabled: bool) -> Iterator[None]:
    """While inside, keep one core busy with a pure-Python spin loop (`--load`), then stop it.

    The load the targets "beside a CPU load" are stated for: one process running
    `while True: pass`, started here so every round of a loaded bench meets the same load.
    """
    if not enabled:
        yield
        return
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        burner.kill()
        burner.wait(10)


def phase(name: str, **arguments: Any) -> dict[str, Any]:
    """Run one measured phase in a fresh process and return its JSON figures."""
    completed = subprocess.run(
        [sys.executable, "-m", "bench._phases", name, json.dumps(arguments)],
        capture_output=True,
        text=True,
        env=env(),
        cwd=REPO,
        check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"phase {name} failed:\n{completed.stderr[-4000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def spec_text(
    *,
    base_url: str | None,
    cases: int,
    trials_per_case: int,
    concurrency: int,
    candidates: int = 1,
) -> str:
    """A `rtb/review` spec for the workload: HTTP candidates, or the in-process reviewer.

    `candidates` > 1 adds identical candidates `reviewer-2`, ... (the spec caps trials per
    case at 10,000, so a 1,000,000-trial ledger of 50 cases needs two).
    """
    from bench._workload import INPROCESS_ENTRY, case_ids

    if base_url is None:
        candidate = (
            f'kind = "inprocess"\nentry = "{INPROCESS_ENTRY}"\n'
            'settings = { reviewer = "reference-policy" }'
        )
    else:
        candidate = f'kind = "openai_chat"\nmodel = "bench-reviewer"\nbase_url = "{base_url}"'
    return f"""
suite = "rtb"
track = "review"
trials_per_case = {trials_per_case}
concurrency = {concurrency}
timeout_s = 30.0
order_seed = 7
track_options = {{ cases = {json.dumps(case_ids(cases))} }}

[corpus]
builtin = "v0.1"

[retry]
transport_max_retries = 0
""" + "".join(
        f'\n[[candidates]]\nname = "{name}"\n{candidate}\n' for name in candidate_names(candidates)
    )


LONG_LATENCY_S = 1.0
"""From this latency up, the latency-bound shape defaults to a short run (`shape_defaults`)."""


def add_shape_options(parser: argparse.ArgumentParser) -> None:
    """`--latency` (or `--latency-ms`), `--cases`, `--trials-per-case`, `--concurrency`."""
    latency = parser.add_mutually_exclusive_group()
    latency.add_argument(
        "--latency", type=float, help="server latency per request in seconds (default 0.05)"
    )
    latency.add_argument("--latency-ms", type=float, help="the same in milliseconds")
    parser.add_argument(
        "--cases", type=int, help="default 50 (8 from 1 s latency up: 256 trials in all)"
    )
    parser.add_argument("--trials-per-case", type=int, help="default 40 (32 from 1 s up)")
    parser.add_argument("--concurrency", type=int, help="default 64 (128 from 1 s up)")


def shape_defaults(args: argparse.Namespace) -> argparse.Namespace:
    """Fill the shape options left out: 2,000 trials at concurrency 64 at a short latency; at a
    realistic one (1 s and up) 256 trials at concurrency 128, so the run stays a few seconds.

    `args.latency_ms` is set either way (the benches read it).
    """
    if args.latency_ms is None:
        args.latency_ms = 1000 * (0.05 if args.latency is None else args.latency)
    long = args.latency_ms >= 1000 * LONG_LATENCY_S
    for name, short, realistic in (
        ("cases", 50, 8),
        ("trials_per_case", 40, 32),
        ("concurrency", 64, 128),
    ):
        if getattr(args, name) is None:
            setattr(args, name, realistic if long else short)
    return args


def candidate_names(count: int) -> list[str]:
    """The workload's candidate names: `reviewer`, then `reviewer-2`, `reviewer-3`, ..."""
    return ["reviewer"] + [f"reviewer-{index}" for index in range(2, count + 1)]


def spread(values: list[float], unit: str = "x", digits: int = 2) -> str:
    """`median (min to max)` of per-round figures, e.g. `1.08x (median of 5; 1.03x to 1.15x)`."""
    median = f"{statistics.median(values):.{digits}f}{unit}"
    if len(values) == 1:
        return median
    low, high = min(values), max(values)
    return f"{median} (median of {len(values)}; {low:.{digits}f}{unit} to {high:.{digits}f}{unit})"


def ratio(numerator: float | None, denominator: float | None) -> str:
    """`a/b` formatted, or `n/a` when either is missing or the denominator is zero."""
    if numerator is None or not denominator:
        return "n/a"
    return f"{numerator / denominator:.2f}x"


def machine() -> str:
    """One line describing the machine and its load now (for the results table)."""
    load = os.getloadavg()
    return (
        f"nproc={os.cpu_count()} python={sys.version.split()[0]} "
        f"load(1/5/15 min)={load[0]:.2f}/{load[1]:.2f}/{load[2]:.2f}"
    )
