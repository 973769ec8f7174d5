"""The analysis side of the track contract: what a track hands the shared report step.

A track that can be reported implements `analyze(manifest, ledger) -> TrackAnalysis`, reading
only the frozen manifest and the recorded ledger (raw responses included), so any run can be
re-graded offline. Core then evaluates the declared release gates against each subject's figures,
writes `record.json` and `report.html`, and exits 1 on a failed gate.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from trustbench._docstrings import documented

if TYPE_CHECKING:
    from trustbench.core._export import LedgerContents
    from trustbench.core.figures import Figure
    from trustbench.core.gates import GateResult
    from trustbench.core.report import Block
    from trustbench.core.spec._manifest import Manifest


VALID_RESPONSE_RATE = "valid_response_rate"
"""Name of the evaluability figure (the first figure of every subject) and of the implicit gate's
metric (see `core._evaluability`)."""


@dataclass(frozen=True)
class Evaluability:
    """Whether a subject's error rates can mean anything: how many trials gave a usable answer.

    A candidate that failed every call has no false approvals *because it never answered*; its
    error rates are not evidence of safety. Every track counts, per subject, the attempted trials
    and why the unusable ones were unusable, and the report shows the valid-response rate before
    any error rate; a subject below the declared minimum is "not evaluable" and blocks release.
    """

    __pydantic_config__ = documented(extra="forbid", frozen=True)
    """How the record models that nest it validate it, and its fields' schema descriptions."""

    attempted: int
    """Trials attempted (every planned trial that has a finished row)."""
    valid: int
    """Trials whose response was present and valid (the track's own validity rule)."""
    missing: int = 0
    """Trials where the candidate returned nothing usable (empty reply)."""
    invalid: int = 0
    """Trials whose reply failed validation (schema, evaluation id, unresolvable references)."""
    transport_failed: int = 0
    """Trials that never got a reply: connection errors, timeouts, refused requests."""

    @property
    def valid_rate(self) -> float | None:
        """Valid / attempted, or None when nothing was attempted (never 0 for "not run")."""
        return self.valid / self.attempted if self.attempted else None


@dataclass
class TrackAnalysis:
    """A track's graded results for one run."""

    title: str
    """Page title, e.g. "RTB reviewer track"."""
    subtitle: str
    """One line saying what was tested."""
    subjects: dict[str, list[Figure]]
    """Configuration (or candidate) name -> its headline figures; gates read these by
    `Figure.name`, once per subject the gate applies to."""
    sections: list[Block] = field(default_factory=list)
    """Report blocks in display order."""
    qualifications: list[str] = field(default_factory=list)
    """What these results do not establish (shown at the end of the page)."""
    record: dict[str, Any] = field(default_factory=dict)
    """Track-specific JSON content of `record.json` (breakdowns, counts, tests): what stays small
    however many trials ran. Per-trial rows go in `trial_rows`."""
    trial_rows: dict[str, Iterable[dict[str, Any]]] = field(default_factory=dict)
    """Part name (the track's record section, e.g. `review`) -> its per-trial rows, written to
    `record.trials.jsonl` beside `record.json` (see `core.report._record`), never into it: a
    record that grew with the run cost 85 MB and its full parse at 50,000 trials."""
    evaluability: dict[str, Evaluability] = field(default_factory=dict)
    """Subject -> its valid-response counts (see `Evaluability`); every track fills it."""
    instruments: frozenset[str] = frozenset()
    """Subjects that are measurement instruments with known signatures (sentinel reviewers,
    known-bad boundaries, scripted agents, oracles): shown apart from candidate results, never a
    candidate verdict, and never blocking release on their own."""
    response_figures: frozenset[str] = frozenset()
    """Names of figures that count the responses themselves (a missing or invalid rate; also
    matched after a `"<split>."` prefix): like `valid_response_rate` they stay shown for a
    not-evaluable subject, since they are what makes it not evaluable."""
    implicit_gates: list[GateResult] = field(default_factory=list)
    """Gates the track itself holds subjects to, beside the declared ones (e.g. TRB's combined
    trust verdict); each names its `subject` and its reason starts with `"<subject>: "`."""
    verdict_note: str = ""
    """A fact about the whole run that heads every subject's verdict line (e.g. the corpus is a
    retired held-out set, so no figure is evidence of held-out performance); empty: none."""
    summary: dict[str, Any] = field(default_factory=dict)
    """Track-specific keys added to `report --json`'s summary (small: e.g. `held_out_set`)."""
    expected_to_fail: frozenset[str] = frozenset()
    """The instruments built to fail at least one gate (an always-permit sentinel, a known-bad
    boundary): one of these passing every gate is a harness problem. Instruments outside this set
    may legitimately pass (a reckless scripted agent against an enforcing boundary)."""


@runtime_checkable
class Analyzer(Protocol):
    """A track that can grade a finished (or partial) run from its ledger."""

    def analyze(self, manifest: Manifest, ledger: LedgerContents) -> TrackAnalysis:
        """Grade the run and return figures, report blocks and record content.

        A track whose grading reads no attempt's `request` or `raw_response` (only outcomes,
        latencies, tokens, costs) may set a class attribute `reads_attempt_texts = False`: the
        report then reads the ledger without them (`read_ledger(attempt_texts=False)`).
        """
        ...
