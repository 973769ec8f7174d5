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
from collections.abc import Callable
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
    from bench.review_track import corpus, review_messages
    from trustbench.core import TrialKey
    from trustbench.core._canonical import canonical_json
    from trustbench.core._runner import trial_order

    keys = [
        TrialKey(case.case_id, "reviewer", index)
        for case in corpus().cases[:cases]
        for index in range(trials_per_case)
    ]
    position = {case.case_id: i for i, case in enumerate(corpus().cases)}
    bodies = []
    for key in trial_order(keys, 7):
        messages, _ = review_messages(position[key.case_id], key.trial_id)
        body = {"model": "bench-reviewer", "messages": messages, "temperature": 0.0}
        bodies.append(canonical_json(body))
    return bodies


def floor(base_url: str, cases: int, trials_per_case: int, concurrency: int) -> dict[str, Any]:
    """A bare asyncio client: the same requests, same concurrency, no harness at all."""
    import aiohttp

    bodies = _bodies(cases, trials_per_case)

    async def main() -> int:
        pending = iter(bodies)
        ok = 0

        async with aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=concurrency)
        ) as session:

            async def worker() -> None:
                nonlocal ok
                for body in pending:
                    async with session.post(
                        f"{base_url}/chat/completions",
                        data=body,
                        headers={"Content-Type": "application/json"},
                    ) as response:
                        await response.read()
                        ok += response.status == 200

            await asyncio.gather(*(worker() for _ in range(concurrency)))
        return ok

    result: dict[str, Any] = {}
    measured = _measure(lambda: result.update(ok=asyncio.run(main())))
    return {**measured, **result, "trials": len(bodies)}


def trustbench_run(run_dir: str, spec: str, track: str) -> dict[str, Any]:
    """Freeze (unmeasured) and run (measured) the workload through `trustbench run`."""
    from trustbench.core import build_manifest, run_experiment, write_manifest

    if track == "bench/review":
        from bench.review_track import register

        register()
    folder = Path(run_dir)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "spec.toml").write_text(spec)
    manifest = build_manifest(folder / "spec.toml")
    write_manifest(manifest, folder)
    summary: dict[str, Any] = {}

    def section() -> None:
        result = run_experiment(folder)
        summary.update(completed=result.completed, failed=result.failed)

    measured = _measure(section)
    return {
        **measured,
        **summary,
        "trials": manifest.plan.trials,
        "ledger_bytes": (folder / "ledger.sqlite").stat().st_size,
    }


def direct_inprocess(cases: int, trials_per_case: int) -> dict[str, Any]:
    """Baseline for in-process candidates: build, answer and validate each trial in a loop."""
    from bench.review_track import corpus, reference_reply, review_messages
    from trustbench.rtb._validation import validate_response

    count = len(corpus().cases[:cases])

    def section() -> dict[str, Any]:
        outcomes: dict[str, int] = {}
        for case_index in range(count):
            for index in range(trials_per_case):
                trial_id = f"c{case_index}/r/{index}"
                messages, candidate_input = review_messages(case_index, trial_id)
                reply = reference_reply({"messages": messages})
                validated = validate_response(reply, candidate_input)
                outcomes[validated.outcome.value] = outcomes.get(validated.outcome.value, 0) + 1
        return {"outcomes": outcomes}

    return {**_measure(section), "trials": count * trials_per_case}


PHASES: dict[str, Callable[..., dict[str, Any]]] = {
    "floor": floor,
    "trustbench_run": trustbench_run,
    "direct_inprocess": direct_inprocess,
}


if __name__ == "__main__":
    print(json.dumps(PHASES[sys.argv[1]](**json.loads(sys.argv[2]))))
