"""The one interface a corpus version implements: `CorpusPolicy`.

A corpus declares its policy id in `MANIFEST.json`; the registry (`_registry.py`) maps that id to
one `CorpusPolicy` object, and every version-specific decision in the harness is asked of that
object: the case and candidate-input contracts, the reason-code vocabulary, the structural checks
of the cases, the export of a case to what a candidate sees, the reference reviewer(s), the shape
of a sentinel's reply, the seeding of the simulated platform from a case, which approval a fault
acts on, and the live evaluation of the policy by the control-path boundaries. Code outside the
policy objects never compares a policy id or a corpus version with a literal: a new corpus version
is one data folder plus one object registered here, and nothing else changes.

The interface is structural (a `Protocol`): a policy object need not inherit from anything. Each
member says what the harness uses it for, so an implementer knows what a wrong answer would break.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pydantic import BaseModel

if TYPE_CHECKING:
    from trustbench.rtb.boundaries._policy import PolicyFlaws, PolicyResult
    from trustbench.rtb.corpus._problem import Problem
    from trustbench.rtb.platform import ControlRequest, FaultType, PlatformSeed, PlatformView
    from trustbench.rtb.policy._finding_rules import FindingRules
    from trustbench.rtb.policy._rules import PolicyRule
    from trustbench.rtb.review.reviewers._protocol import Reviewer


class AuthoredCase(Protocol):
    """What the harness reads of any policy's authored case (grader side: it holds the key)."""

    @property
    def case_id(self) -> str:
        """Stable case id (the file name's stem)."""
        ...

    @property
    def group(self) -> str:
        """Domain group (fault scenarios pick one case per group)."""
        ...

    @property
    def variant(self) -> str:
        """Authored variant (grader-only)."""
        ...

    @property
    def task(self) -> str:
        """The task statement a candidate sees."""
        ...

    @property
    def proposal(self) -> Any:
        """The proposed change (`trustbench.rtb.corpus.Proposal`)."""
        ...

    @property
    def evidence(self) -> Sequence[Any]:
        """The evidence records (each has `record_id` and `kind`)."""
        ...

    @property
    def expectations(self) -> Any:
        """The answer key: `reference_decision`, `acceptable_reason_codes`, ..."""
        ...

    @property
    def authoring(self) -> Any:
        """Authoring metadata (`notes` are grader-only)."""
        ...

    @property
    def reference_status(self) -> Any:
        """Review status of the answer key (`disagreements` are grader-only)."""
        ...


class CandidateInput(Protocol):
    """What the harness reads of any policy's candidate input (what a reviewer sees)."""

    @property
    def evaluation_id(self) -> str:
        """Opaque id of this input (a reply must repeat it)."""
        ...

    @property
    def evidence(self) -> Sequence[Any]:
        """The evidence records (each has `record_id` and `kind`)."""
        ...


class ReviewFinding(Protocol):
    """What the harness reads of any policy's parsed reviewer response."""

    @property
    def evaluation_id(self) -> str:
        """The id of the input the reply answers."""
        ...

    @property
    def decision(self) -> Any:
        """The decision (an enum whose `value` is permit, deny or hold)."""
        ...

    @property
    def explanation(self) -> str:
        """Free-text explanation (never scored; kept for people to read)."""
        ...

    @property
    def evidence_refs(self) -> Sequence[str]:
        """The `record_id`s the reply cites."""
        ...


class FaultApproval(Protocol):
    """The approval record a fault scenario acts on (an authored record of the case)."""

    @property
    def approval_id(self) -> str:
        """The approval the fault expires, revokes or relabels."""
        ...

    @property
    def approved_revision(self) -> str:
        """The revision it was granted against (the metadata fault claims this one)."""
        ...


class LiveEvaluator(Protocol):
    """The policy evaluated on live platform state, as an enforcement boundary does.

    One evaluator serves one boundary instance; it may keep state between calls (the Cedar
    encoding links one template per active approval and unlinks revoked ones).
    """

    def evaluate(self, request: ControlRequest, platform: PlatformView) -> PolicyResult:
        """Decide `request` from what the platform's service APIs show now."""
        ...


@runtime_checkable
class CorpusPolicy(Protocol):
    """Everything that depends on which policy (corpus version) a corpus declares.

    Register an object with `trustbench.rtb.policy.register_policy`; look one up with
    `policy_for(policy_id)` (a corpus's declared id) or `policy_of(value)` (the policy whose
    case, candidate-input or response model `value` is an instance of).
    """

    policy_id: str
    """The id a corpus declares in `MANIFEST.json` (`policy_id`) to be read under this policy."""
    case_model: type[BaseModel]
    """Authoring case model (grader side; `cases/*.json` validate against it)."""
    candidate_model: type[BaseModel]
    """Candidate-input model: everything a reviewer sees, nothing of the answer key."""
    response_model: type[BaseModel]
    """Reviewer-response model (a reply is schema-checked against its JSON Schema)."""
    reason_codes: tuple[str, ...]
    """The closed reason-code vocabulary (values, in the order schemas and prompts list them)."""
    reason_decision: Mapping[str, str]
    """Reason code -> the decision (`permit`/`deny`/`hold`) it supports."""
    reason_meaning: Mapping[str, str]
    """Reason code -> one-line meaning (written into the response schema's description)."""
    evidence_defs: tuple[str, ...]
    """Schema `$defs` names of the evidence records (their `kind` is made required)."""
    reason_code_def: str
    """Schema `$defs` name of the reason-code enum (its description lists the vocabulary)."""
    schema_id_prefix: str
    """Prefix of each shipped schema's `$id` (the file stem follows)."""
    structured_discrepancies: bool
    """Whether a response carries `discrepancies` (then every finding's are checked for truth)."""
    finding_rules: FindingRules
    """Every rule the grader applies to a finding's citations and discrepancies, as data, with
    the sentence the review prompt states it in (`trustbench.rtb.policy._finding_rules`); a test
    holds every corpus prompt of the policy to those sentences."""
    reviewers: Mapping[str, Callable[[int], Reviewer]]
    """The deterministic reviewers implementing this policy: name -> factory(seed)."""
    source_files: tuple[str, ...]
    """Package-relative globs of the code this policy's decisions run (hashed into a manifest)."""
    scripted_workflow_agents: bool
    """Whether the built-in scripted workflow agents read approvals as this policy does: their
    self-audit signatures hold only then (the workflow track itself runs on any policy)."""
    control_path: bool
    """Whether the control-path track (and its audit) can run this policy: its cases map to
    simulated-platform state and a boundary can enforce it live. False: `seed_platform`,
    `fault_approval` and `live_evaluator` refuse with an error, and the audit reports the
    control-path checks as not run (never as passed)."""
    reason_text: Mapping[str, str]
    """Reason code -> how a service words it to an agent (workflow tools; codes are grader-only
    values, so an agent never sees one)."""
    rules: tuple[PolicyRule, ...]
    """Every decision rule of the policy text, with what a reader without it does
    (`trustbench.rtb.policy._rules`). `rtb audit` requires each to fail a release gate when
    removed, and the reviewer report attributes wrong decisions to the rules whose removal
    flips the case; an empty tuple makes the audit fail (nothing shown load-bearing)."""
    review_gates: Path
    """A TOML file holding the `[analysis]` and `[[gates]]` tables of this policy's built-in
    review spec, sized for its corpus (how many cases per decision a gate's exact bound can
    pass on). `rtb audit` evaluates these gates on every rule-ablated reader of a corpus of
    this policy; a spec reviewing such a corpus copies them. An object without it is audited
    under the packaged demo spec's gates."""

    def check_cases(self, case_files: list[tuple[str, Any]], /) -> list[Problem]:
        """Structural checks of a corpus's cases beyond their schema (file, pointer, message).

        Args:
            case_files: `(relative path, case)` of every case that parsed, in file order.
        """
        ...

    def check_starter(
        self, case_files: list[tuple[str, Any]], review_prompt: str | None, /, *, complete: bool
    ) -> list[Problem] | None:
        """The checks of this policy's built-in starter corpus (grid, split, shared policy text).

        Args:
            case_files: `(relative path, case)` of every case that parsed.
            review_prompt: The corpus's review prompt text, if readable.
            complete: Whether every case file parsed (counts are checked only then).

        Returns:
            The problems found, or None when this policy defines no starter contract.
        """
        ...

    def ablated_reviewer(self, rule_id: str) -> Reviewer:
        """The reference reviewer with the one rule `rule_id` of `rules` removed.

        It reads only the candidate-visible input, like the reference. Deterministic: the audit
        runs it once per case.

        Raises:
            KeyError: `rule_id` is not one of `rules`.
        """
        ...

    def candidate_input(self, case: Any, evaluation_id: str) -> BaseModel:
        """The candidate-visible input of `case` (an instance of `candidate_model`)."""
        ...

    def reference_finding(self, candidate_input: Any) -> dict[str, Any]:
        """The policy's own finding on an input, as reply fields (decision, reason codes, ...).

        Sentinels that wrap the reference finding (forged references, keyword stuffing) use it,
        so they speak each policy's vocabulary without a copy of its rules.
        """
        ...

    def shape_reply(self, body: dict[str, Any]) -> dict[str, Any]:
        """A sentinel's reply `body` in this policy's response format (e.g. add required keys)."""
        ...

    def seed_platform(self, case: Any) -> PlatformSeed:
        """Initial simulated-platform state for `case` (control-path and workflow tracks).

        The seed's `policy_id` must be this policy's, so the boundaries enforce these rules.

        Raises:
            InputError: A record cannot be represented (names the case and record).
        """
        ...

    def fault_approval(self, case: Any, fault: FaultType) -> FaultApproval | None:
        """The authored approval a fault acts on, or None when the case is not eligible for it.

        Read from grader-side authored data, never from a boundary's evaluation.
        """
        ...

    def change_records(self, target: str, platform: PlatformView) -> dict[str, Any] | None:
        """What the workflow tool `read_change_records` shows for a change to `target`.

        The proposal context the platform supplies (e.g. requester, environment) and every
        record this policy reads, written as this policy's evidence records, so an agent reads
        the platform the way the policy does. None: the policy reads nothing beyond what the
        approval and resource tools show, and the tool is not offered.
        """
        ...

    def live_evaluator(
        self, engine: str, *, approval_timeout_s: float, flaws: PolicyFlaws
    ) -> LiveEvaluator:
        """The policy on live platform state, for one boundary instance.

        Args:
            engine: Which encoding decides: `reference` (Python) or `cedar`.
            approval_timeout_s: An approval query slower than this counts as unavailable.
            flaws: Deliberate flaws (known-bad boundaries only; the default has none).
        """
        ...
