"""Human reviewer comparison: real participants reviewing RTB cases in a local web app.

A human run is frozen from a spec whose candidates are all `kind = "human"` (each with a
`participant`: pseudonymous id, team, workflow, qualifications, tools, evidence access, time
limit and, optionally, a paired AI configuration from an earlier finished run, shown or not).
`trustbench rtb human serve RUN_DIR` serves it; every submission lands in the run's ledger in the
reviewer track's trial shape, so `trustbench report RUN_DIR` grades it like any reviewer, and
the human analysis adds timings and agreement with the AI split by visibility.

The server (`SessionRun`, `open_session_run` in `_app`) is reached through that command and
is not exported here: it imports aiohttp and jinja2, which `trustbench --help` (which lists
this package's commands) must not pay for.
"""

from __future__ import annotations

from trustbench.rtb.human._store import (
    ParticipantPlan,
    SessionStore,
    SourceRun,
    SubmitResult,
    case_order,
    load_source_run,
    participant_plans,
    participant_seed,
)

__all__ = [
    "ParticipantPlan",
    "SessionStore",
    "SourceRun",
    "SubmitResult",
    "case_order",
    "load_source_run",
    "participant_plans",
    "participant_seed",
]
