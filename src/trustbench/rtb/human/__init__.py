"""Human reviewer comparison: real participants reviewing RTB cases in a local web app.

A human run is frozen from a spec whose candidates are all `kind = "human"` (each with a
`participant`: pseudonymous id, team, workflow, qualifications, tools, evidence access, time
limit and, optionally, a paired AI configuration from an earlier finished run, shown or not).
`trustbench rtb human serve RUN_DIR` serves it; every submission lands in the run's ledger in the
reviewer track's trial shape, so `trustbench report RUN_DIR` grades it like any reviewer, and
the human analysis adds timings and agreement with the AI split by visibility.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trustbench._lazy import lazy_exports

if TYPE_CHECKING:
    from trustbench.rtb.human._order import case_order, participant_seed
    from trustbench.rtb.human._protocol import ParticipantPlan, participant_plans
    from trustbench.rtb.human._recommendations import SourceRun, load_source_run
    from trustbench.rtb.human._serve import SessionRun, open_session_run
    from trustbench.rtb.human._store import SessionStore, SubmitResult

__all__ = [
    "ParticipantPlan",
    "SessionRun",
    "SessionStore",
    "SourceRun",
    "SubmitResult",
    "case_order",
    "load_source_run",
    "open_session_run",
    "participant_plans",
    "participant_seed",
]

__getattr__, __dir__ = lazy_exports(__name__, __file__)
