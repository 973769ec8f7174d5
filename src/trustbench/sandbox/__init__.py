"""One sandbox for every candidate's code: a confined worker process per candidate.

Candidate code (TRB adapters, RTB in-process reviewers, workflow agents and boundaries given by
`entry` / `boundary_entry`) never runs in the harness process. Each candidate gets a worker that
confines itself (`_confine`: user, IPC and network namespaces, Landlock with a documented read
list less the harness's secrets) before importing the candidate, and is called through a small
JSON RPC (`_rpc`). docs/sandbox.md lists what a worker may read and how the isolation is reported.
"""

from __future__ import annotations

from trustbench.sandbox._confine import (
    SandboxUnavailable,
    abi_version,
    platform_problem,
    reachable,
)
from trustbench.sandbox._rpc import (
    CandidateRaised,
    CandidateWorker,
    RemoteObject,
    SandboxPlan,
    WorkerFailed,
    endpoint_ports,
    plan_for,
    probe_paths,
)

__all__ = [
    "CandidateRaised",
    "CandidateWorker",
    "RemoteObject",
    "SandboxPlan",
    "SandboxUnavailable",
    "WorkerFailed",
    "abi_version",
    "endpoint_ports",
    "plan_for",
    "platform_problem",
    "probe_paths",
    "reachable",
]
