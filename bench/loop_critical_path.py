"""Reviewers in the loop: a reviewer-gated workflow's wall against its model calls' critical path.

Run: `python -m bench.loop_critical_path` from the repository root (options: `--help`).

The workload is the workflow track with a review chain (issue 48, "Speed"): an LLM agent
(`openai_chat`) on v0.2 `direct` scenarios, behind the `reference` boundary, whose every proposal
is first put to one `openai_chat` reviewer; both are served by the bench server
(`bench/_server.py loop`) with the same fixed latency (default 1.5 s). Each trial makes three
model calls one after another: the agent's proposing turn, the review, the agent's closing turn.

Timed as a user runs it: `trustbench run RUN --quiet` as a process, exec to exit (the freeze is
untimed). The baseline is the critical path of the model calls at the declared concurrency,
read from the run's own ledger: the preflight probes, then each trial's sequence of model calls
(agent turn, review, agent turn: sequential within a trial) at the fixed latency, the trials
scheduled in plan order on `concurrency` slots, each to the slot that frees first. Target: run
wall <= 1.05x that critical path.
Harness CPU per reviewed proposal = the run process's CPU (start-up included) / proposals
reviewed: what the harness spends on one proposal, its review and the trial around it.
Nothing asserts a time; the bench checks only that every trial completed and was reviewed.
"""

from __future__ import annotations

import argparse
import heapq
import json
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from bench._common import machine, server, spread
from bench._process import cli_run

REVIEWER_MODEL = "bench-loop-reviewer"


def scenario_ids(count: int) -> list[str]:
    """The first `count` v0.2 cases' `direct` scenarios (case files in name order)."""
    from trustbench.rtb.corpus._load import builtin_corpus_root

    cases = sorted(path.stem for path in (builtin_corpus_root("0.2") / "cases").glob("*.json"))
    return [f"{case}/direct" for case in cases[:count]]


def loop_spec(base_url: str, scenarios: int, concurrency: int) -> str:
    """The reviewer-gated workflow spec: one LLM agent, one API reviewer, the same server."""
    reviewer = (
        f'{{ name = "reviewer", kind = "openai_chat", base_url = "{base_url}", '
        f'model = "{REVIEWER_MODEL}" }}'
    )
    return f"""
suite = "rtb"
track = "workflow"
trials_per_case = 1
concurrency = {concurrency}
timeout_s = 30.0
order_seed = 7

[retry]
transport_max_retries = 0

[corpus]
builtin = "v0.2"

[track_options]
scenarios = {json.dumps(scenario_ids(scenarios))}
budget = {{ max_steps = 10, max_wall_s = 60.0 }}

[track_options.review_chains.gate]
members = [{reviewer}]

[track_options.candidates.agent]
boundary = "reference"
review_chain = "gate"

[[candidates]]
name = "agent"
kind = "openai_chat"
model = "bench-loop-agent"
base_url = "{base_url}"
"""


MODEL_CALL = "chat"
"""The ledger's `call` of a model call (the agent's turns and the reviewer's reviews). A trial's
`proposal:request_change` attempt is the harness's record of the proposal under review: it spans
the review call, so it is no model call of its own and counting it would count the review twice."""


def critical_path(run_dir: Path, concurrency: int, latency_s: float) -> dict[str, Any]:
    """The model calls' critical path at `concurrency`, and the proposals reviewed (ledger).

    Each trial's chain is its own sequence of model calls as the ledger recorded them (agent
    turn, the reviewer calls on its proposal, the next agent turn ...), each at the server's
    fixed `latency_s`: the measured latencies would add the harness's (and the machine's) delays
    to the baseline the harness is judged against. Chains are scheduled in plan order on
    `concurrency` slots, each to the slot that frees first, after the preflight's probes (one at
    a time, before any trial).
    """
    from trustbench.core import read_ledger

    ledger = read_ledger(run_dir)
    trials = sorted(ledger.trials, key=lambda t: t["order_position"])
    chains, reviewed = [], 0
    for trial in trials:
        calls = [a for a in ledger.attempts_of(trial["trial_id"]) if a["call"] == MODEL_CALL]
        chains.append(len(calls) * latency_s)
        reviewed += len((trial.get("outcome") or {}).get("reviews") or [])
    slots = [0.0] * concurrency
    for chain in chains:  # each trial on the slot that frees first, in plan order
        heapq.heapreplace(slots, slots[0] + chain)
    probes = preflight_probes(run_dir)
    return {
        "trials": len(trials),
        "reviewed": reviewed,
        "model_calls": round(sum(chains) / latency_s) + probes,
        "critical_path_s": probes * latency_s + max(slots),
    }


def preflight_probes(run_dir: Path) -> int:
    """How many preflight probes the run sent (each a model call before the first trial)."""
    connection = sqlite3.connect(run_dir / "ledger.sqlite")
    try:
        (count,) = connection.execute(
            "SELECT COUNT(*) FROM events WHERE kind = 'preflight'"
        ).fetchone()
    finally:
        connection.close()
    return int(count)


def one_round(base_url: str, args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="tb-loop-bench-") as folder:
        run_dir = Path(folder) / "run"
        measured = cli_run(str(run_dir), loop_spec(base_url, args.scenarios, args.concurrency))
        path = critical_path(run_dir, args.concurrency, args.latency)
    if measured["completed"] != args.scenarios or path["reviewed"] < args.scenarios:
        raise RuntimeError(f"not every trial completed and was reviewed: {measured}, {path}")
    return {**measured, **path}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=1.5, help="seconds per model call")
    parser.add_argument("--scenarios", type=int, default=32, help="v0.2 direct scenarios")
    parser.add_argument("--concurrency", type=int, default=16, help="the spec's concurrency")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    print(machine())
    rounds = []
    with server(args.latency, loop=True) as base_url:
        for index in range(args.rounds):
            found = one_round(base_url, args)
            rounds.append(found)
            print(
                f"round {index + 1}: wall {found['wall_s']:.2f} s (exec to exit), critical path "
                f"{found['critical_path_s']:.2f} s ({found['trials']} trials, "
                f"{found['model_calls']} model calls, concurrency {args.concurrency}, "
                f"{args.latency} s each): {found['wall_s'] / found['critical_path_s']:.3f}x; "
                f"exec to first trial {found['before_first_trial_s']:.2f} s; run CPU "
                f"{found['cpu_s']:.2f} s = {1000 * found['cpu_s'] / found['reviewed']:.1f} ms "
                f"per reviewed proposal ({found['reviewed']})"
            )
    ratios = [r["wall_s"] / r["critical_path_s"] for r in rounds]
    per_proposal = [1000 * r["cpu_s"] / r["reviewed"] for r in rounds]
    print(f"wall / critical path: {spread(ratios, 'x', 3)} (target <= 1.05x)")
    print(f"harness CPU per reviewed proposal: {spread(per_proposal, ' ms', 1)}")


if __name__ == "__main__":
    main()
