"""Measured phases, each run in a fresh process by `bench._common.phase`.

`python -m bench._phases NAME JSON_ARGUMENTS` prints one JSON line: `wall_s`, `cpu_s` (this
process's user + system CPU over the measured section only) and `peak_rss_mib` (whole process).
"""

from __future__ import annotations

import asyncio
import json
import resource
import sys
import time
from collections.abc import Awaitable, Callable
from importlib import import_module
from pathlib import Path
from typing import Any


def _measure(section: Callable[[], Any]) -> dict[str, Any]:
    cpu0, wall0 = time.process_time(), time.perf_counter()
    extra = section()
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"wall_s": wall, "cpu_s": cpu, "peak_rss_mib": rss_mib, **(extra or {})}


def _bodies(cases: int, trials_per_case: int) -> list[bytes]:
    """The request bodies trustbench sends, in the same seeded order, as canonical JSON."""
    from bench._workload import corpus, review_messages
    from trustbench._canonical import canonical_json
    from trustbench.core import TrialKey, trial_order

    keys = [
        TrialKey(case.case_id, "reviewer", index)
        for case in corpus().cases[:cases]
        for index in range(trials_per_case)
    ]
    position = {case.case_id: i for i, case in enumerate(corpus().cases)}
    bodies = []
    for key in trial_order(keys, 7):
        messages, _ = review_messages(position[key.case_id])  # a fresh id, as the track issues
        body = {"model": "bench-reviewer", "messages": messages, "temperature": 0.0}
        bodies.append(canonical_json(body))
    return bodies


def _bare_client(
    bodies: list[bytes],
    concurrency: int,
    client: Callable[[], Any],
    send: Callable[[Any, bytes], Awaitable[int]],
) -> dict[str, Any]:
    """`concurrency` workers sending `bodies` through `client()` (an async context manager)."""

    async def main() -> int:
        pending = iter(bodies)
        ok = 0
        async with client() as session:

            async def worker() -> None:
                nonlocal ok
                for body in pending:
                    status = await send(session, body)  # not `ok += await ...`: that reads `ok`
                    ok += status == 200  # before the await, losing the other workers' counts

            await asyncio.gather(*(worker() for _ in range(concurrency)))
        return ok

    result: dict[str, Any] = {}
    measured = _measure(lambda: result.update(ok=asyncio.run(main())))
    return {**measured, **result, "trials": len(bodies)}


def floor(base_url: str, cases: int, trials_per_case: int, concurrency: int) -> dict[str, Any]:
    """A bare aiohttp client: the same requests, same concurrency, no harness at all."""
    import aiohttp

    url = f"{base_url}/chat/completions"
    headers = {"Content-Type": "application/json"}

    def client() -> aiohttp.ClientSession:
        return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency))

    async def send(session: aiohttp.ClientSession, body: bytes) -> int:
        async with session.post(url, data=body, headers=headers) as response:
            await response.read()
            return response.status

    return _bare_client(_bodies(cases, trials_per_case), concurrency, client, send)


class _StartClock:
    """A progress reporter that notes the CPU and wall clocks when the first trial starts."""

    def __init__(self) -> None:
        self.at: tuple[float, float] | None = None

    def start(self, total: int, done: int) -> None:
        self.at = (time.process_time(), time.perf_counter())

    def update(self, done: int, failed: int, retries: int) -> None:
        pass

    def close(self) -> None:
        pass


def trustbench_run(run_dir: str, spec: str) -> dict[str, Any]:
    """Freeze (unmeasured) and run (measured) the workload through `trustbench run`.

    Besides the whole run, `startup_cpu_s` / `startup_wall_s` are what the run spent before its
    first trial: re-checking the frozen inputs (re-hashing and re-validating the corpus),
    opening the ledger and building the providers. They do not grow with the number of trials,
    so the benches report them apart from the per-trial figures.
    """
    from trustbench.core import build_manifest, run_experiment, write_manifest

    # Like the floor, which imports aiohttp before its clock starts: trustbench's HTTP
    # providers import it when they are made (inside `run_experiment`), so it is loaded here,
    # unmeasured. The process phases (`cli_run`) time every import of both programs.
    import_module("trustbench.providers._connector")
    folder = Path(run_dir)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "spec.toml").write_text(spec)
    manifest = build_manifest(folder / "spec.toml")
    write_manifest(manifest, folder)
    summary: dict[str, Any] = {}
    clock = _StartClock()

    def section() -> None:
        cpu0, wall0 = time.process_time(), time.perf_counter()
        result = run_experiment(folder, clock)
        summary.update(completed=result.completed, failed=result.failed)
        if clock.at is not None:
            summary.update(startup_cpu_s=clock.at[0] - cpu0, startup_wall_s=clock.at[1] - wall0)

    measured = _measure(section)
    return {
        **measured,
        **summary,
        "trials": manifest.plan.trials,
        "ledger_bytes": (folder / "ledger.sqlite").stat().st_size,
    }


def direct_inprocess(cases: int, trials_per_case: int) -> dict[str, Any]:
    """Baseline for in-process candidates: build, answer and validate each trial in a loop."""
    from bench._workload import corpus, reference_reply, review_messages
    from trustbench.rtb.review._validation import validate_response

    count = len(corpus().cases[:cases])

    def section() -> dict[str, Any]:
        outcomes: dict[str, int] = {}
        for case_index in range(count):
            for _ in range(trials_per_case):
                messages, candidate_input = review_messages(case_index)
                reply = reference_reply({"messages": messages})
                validated = validate_response(reply, candidate_input)
                outcomes[validated.outcome.value] = outcomes.get(validated.outcome.value, 0) + 1
        return {"outcomes": outcomes}

    return {**_measure(section), "trials": count * trials_per_case}


class _Started(Exception):
    """Raised by the probe when the runner is about to start trials."""


class _StartProbe:
    """A progress reporter that stops the run at the moment trials would start."""

    def start(self, total: int, done: int) -> None:
        raise _Started(total, done)

    def update(self, done: int, failed: int, retries: int) -> None:
        pass

    def close(self) -> None:
        pass


def resume_startup(run_dir: str) -> dict[str, Any]:
    """Time a resume up to its first trial; and, apart, its two parts (warm page cache).

    `verify`: the chain verification, part of the check `Ledger.open` does before any resume
    (since issue 56 that check is `verify`'s whole one: `bench.resume_finished` times it).
    `remaining`: what the runner does after it to find the work left (finished trials,
    interrupted executions, the seeded order minus the finished), read through the same
    `Ledger` queries.
    """
    import sqlite3

    from trustbench.core import read_manifest, run_experiment, trial_order
    from trustbench.core.ledger._chain import verify_chain
    from trustbench.core.ledger._store import LEDGER_FILE, Ledger
    from trustbench.rtb.review.track import ReviewTrack

    folder = Path(run_dir)
    with (folder / LEDGER_FILE).open("rb") as handle:  # warm the page cache for all timings
        while handle.read(1 << 24):
            pass
    manifest = read_manifest(folder)
    # A resume re-checks its inputs before it opens the ledger, which loads the track's corpus
    # (timed in `startup` below, not here); `remaining` then reads the plan from a warm track.
    track = ReviewTrack()
    track.resolve_frozen(manifest)
    connection = sqlite3.connect(folder / LEDGER_FILE)
    verify = _measure(lambda: {"problems": len(verify_chain(connection, manifest.manifest_sha256))})

    def remaining_section() -> dict[str, Any]:
        ledger = Ledger(connection, manifest.manifest_sha256, 0, {})
        finished = ledger.finished_trial_ids()
        interrupted = ledger.unfinished_executions()
        ledger.abandoned_marked()
        keys = track.plan(manifest)
        order = trial_order(keys, manifest.spec.order_seed)
        left = [key for key in order if key.trial_id not in finished]
        return {"remaining": len(left), "interrupted": len(interrupted)}

    remaining = _measure(remaining_section)
    connection.close()
    seen: dict[str, Any] = {}

    def section() -> None:
        try:
            run_experiment(folder, _StartProbe())
        except _Started as started:
            seen["planned"], seen["finished_before"] = started.args

    startup = _measure(section)
    return {"startup": startup, "verify": verify, "remaining": remaining, **seen}


def make_ledger(
    run_dir: str,
    cases: int,
    trials_per_case: int,
    unfinished: int,
    candidates: int = 1,
    distinct_replies: bool = False,
) -> dict[str, Any]:
    """Write the synthetic ledger (timed only for information)."""
    from bench._ledger_fixture import write_ledger

    counts: dict[str, Any] = {}
    measured = _measure(
        lambda: counts.update(
            write_ledger(
                Path(run_dir),
                cases=cases,
                trials_per_case=trials_per_case,
                unfinished=unfinished,
                candidates=candidates,
                distinct_replies=distinct_replies,
            )
        )
    )
    return {**measured, **counts}


def analysis(trials: int, resamples: int, out_dir: str) -> dict[str, Any]:
    """Grade synthetic reviewer rows into figures, gates, record.json and report.html."""
    from bench._analysis_workload import analyze, synthetic_rows

    rows = synthetic_rows(trials)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    steps: dict[str, Any] = {}
    measured = _measure(lambda: steps.update(analyze(rows, Path(out_dir), resamples)))
    return {**measured, "steps": steps, "rss_before_mib": rss_before}


def inspect_eval(
    base_url: str, cases: int, trials_per_case: int, concurrency: int, log_dir: str
) -> dict[str, Any]:
    """Run the workload through Inspect AI's OpenAI provider (a child process: its CPU counted)."""
    import os
    import subprocess

    command = [
        str(Path(sys.executable).parent / "inspect"), "eval", "bench/inspect_task.py",
        "--model", "openai/bench-reviewer", "-M", "responses_api=false", "--display", "none",
        "--max-connections", str(concurrency), "--max-samples", str(concurrency),
        "--temperature", "0", "--log-dir", log_dir,
        "-T", f"cases={cases}", "-T", f"trials_per_case={trials_per_case}",
    ]  # fmt: skip
    environment = {**os.environ, "OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": "bench-unused"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    completed = subprocess.run(command, env=environment, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if completed.returncode != 0:
        raise RuntimeError(completed.stdout[-3000:] + completed.stderr[-3000:])
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    from inspect_ai.log import list_eval_logs, read_eval_log

    (log_info,) = list_eval_logs(log_dir)
    log = read_eval_log(log_info, header_only=True)
    assert log.results is not None, log.status
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "peak_rss_mib": after.ru_maxrss / 1024,
        "status": log.status,
        "samples": log.results.completed_samples,
        "valid_share": log.results.scores[0].metrics["accuracy"].value,
    }


def _process_phases() -> dict[str, Callable[..., dict[str, Any]]]:
    from bench._process import cli_report, cli_run, floor_process

    return {"cli_run": cli_run, "cli_report": cli_report, "floor_process": floor_process}


PHASES: dict[str, Callable[..., dict[str, Any]]] = {
    **_process_phases(),
    "inspect_eval": inspect_eval,
    "analysis": analysis,
    "resume_startup": resume_startup,
    "make_ledger": make_ledger,
    "floor": floor,
    "trustbench_run": trustbench_run,
    "direct_inprocess": direct_inprocess,
}


if __name__ == "__main__":
    print(json.dumps(PHASES[sys.argv[1]](**json.loads(sys.argv[2]))))
