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
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel

if TYPE_CHECKING:
    from trustbench.rtb.boundaries._protocol import PolicyFlaws, PolicyResult
    from trustbench.rtb.corpus._models import Problem
    from trustbench.rtb.platform import ControlRequest, FaultType, PlatformSeed, PlatformView
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
class CaseGenerator(Protocol):
    """The generator a corpus version was authored with, as `rtb audit` draws from it.

    An audit that only re-measures the learners a corpus was selected against says nothing: the
    audit fits its attackers on a fresh pool drawn from the shipped generator with seeds the
    corpus did not use, unfiltered, and tests them on the corpus.
    """

    corpus_seeds: frozenset[int]
    """The seeds the shipped corpus's draws used; a pool is never drawn with one of them."""

    def draw_pool(self, seed: int, count: int) -> list[BaseModel]:
        """Draw `count` labelled cases (the policy's `case_model`) from the generator with `seed`.

        The same world construction as the shipped corpus, no selection against any audit;
        deterministic for a seed.
        """
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
    the sentence the review prompt states it in (`trustbench.rtb.policy._protocol`); a test
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
    (`trustbench.rtb.policy._protocol`). `rtb audit` requires each to fail a release gate when
    removed, and the reviewer report attributes wrong decisions to the rules whose removal
    flips the case; an empty tuple makes the audit fail (nothing shown load-bearing)."""
    review_gates: Path
    """A TOML file holding the `[analysis]` and `[[gates]]` tables of this policy's built-in
    review spec, sized for its corpus (how many cases per decision a gate's exact bound can
    pass on). `rtb audit` evaluates these gates on every rule-ablated reader of a corpus of
    this policy; a spec reviewing such a corpus copies them. An object without it is audited
    under the packaged demo spec's gates."""
    generator: CaseGenerator | None
    """The generator the corpus version was authored with (a fresh pool for the audit's
    attackers), or None when it is not shipped (the pool-trained attackers are then "not run")."""

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


# ------------------------------------------------------------------------------------------------
# The decision rules of a policy text, as data a policy object declares (`CorpusPolicy.rules`).
#
# Each rule is one condition of the policy wording that a reviewer must apply to decide a case. A
# policy object names every such rule here, with the reader that omits it: the reference reviewer
# with that one rule removed (`CorpusPolicy.ablated_reviewer`). `trustbench rtb audit` runs every
# ablated reader over the corpus and checks it fails a release gate of the built-in review spec
# that the full reader passes (`trustbench.rtb.review._audit`): a rule no case turns on is not
# tested by the corpus, and a candidate could score as if it had read it without doing so. The
# cases whose decision an ablation flips are the cases that rule decides; the reviewer report
# attributes a candidate's wrong decisions to them.
#
# A new policy object declares its own tuple of `PolicyRule`s and an `ablated_reviewer`; the audit
# and the report ask the object and nothing else.


@dataclass(frozen=True)
class PolicyRule:
    """One rule of the policy text, and what a reader without it does instead."""

    rule_id: str
    """Stable id (kebab case), unique within the policy; named in the audit and the report."""
    clause: str
    """Where the policy text states it (e.g. `rule 3`, `precedence`)."""
    statement: str
    """The rule, in a few words of the policy text."""
    ablation: str
    """How the ablated reader reads instead (e.g. "ignores expires_at")."""


def rule_ids(rules: tuple[PolicyRule, ...]) -> tuple[str, ...]:
    """The ids of `rules`, in declaration order.

    Raises:
        ValueError: An id is declared twice (the audit and the report key on it).
    """
    ids = tuple(rule.rule_id for rule in rules)
    duplicated = sorted({rule_id for rule_id in ids if ids.count(rule_id) > 1})
    if duplicated:
        raise ValueError(f"policy rule id(s) declared twice: {', '.join(duplicated)}")
    return ids


def unknown_rule(rule_id: str, rules: tuple[PolicyRule, ...]) -> KeyError:
    """The error an `ablated_reviewer` raises for an id its policy does not declare."""
    known = ", ".join(rule.rule_id for rule in rules)
    return KeyError(f"rule {rule_id!r} is not a rule of this policy (declared: {known})")


# ------------------------------------------------------------------------------------------------
# The grading rules of a finding, as data a policy object declares (`CorpusPolicy.finding_rules`).
#
# "Do not hide the rule and punish the candidate for missing it": every rule the grader applies to a
# finding's citations and discrepancies is one entry here, with the sentence that states it to the
# candidate. The grader (`trustbench.rtb.review._validation`) reads nothing else, and a test checks
# that each corpus's review prompt contains every sentence of its policy's rules
# (`FindingRules.prompt_lines`), so the prompt states exactly what is graded.
#
# A cited discrepancy is true only when its record exists, its field is one the policy compares
# for that kind of record (a `FieldRule`), the field exists there (or is absent where the rule says
# absence is what is cited), the cited values equal the records' values after the policy's
# normalisation, the rule's condition holds (the values differ, the approval has expired, ...)
# and so does every other fact the discrepancy asserts of its record (`FieldRule.jointly`,
# `FieldRule.record_values`): a finding is graded as a whole, not field by field.
# One false discrepancy makes the finding unsupported.

Holds = Literal["differs", "same", "at_or_before", "after", "not_value", "not_authorised"]
"""When a cited discrepancy on a field is a discrepancy at all:

- `differs`: the proposed and the recorded value are not equivalent after normalisation;
- `same`: they are equivalent (e.g. the approver is the requester: separation of duties);
- `at_or_before`: the recorded instant is at or before the proposed one (expired at `as_of`);
- `after`: the recorded instant is after the proposed one (issued after `as_of`);
- `not_value`: the recorded value is not the rule's `conforming` value (e.g. status not active);
- `not_authorised`: the recorded approver is not among the policy record's authorised approvers.
"""

Jointly = Literal[
    "approval_of_the_proposal",
    "approval_governs",
    "revokes_the_governing_approval",
    "state_of_the_target",
    "freeze_started_over_the_environment",
]
"""A fact about the cited record that must hold *together with* the rule's own condition.

A discrepancy asserts more than its one field: "parameter `ttl` differs from the approval" asserts
that the approval is one the proposal is judged against; "a freeze in effect" asserts that the
freeze covers the proposal's environment and has started. Each field checked alone let a reviewer
pass a freeze that has not started, or a notice about another service, as a true discrepancy.
Names (checked by the grader, `trustbench.rtb.review._validation`):

- `approval_of_the_proposal`: the approval's operation and target are the proposal's (after
  normalisation), whenever it was issued (an approval "issued after `as_of`" is one of the
  proposal's scope that does not apply yet, not a sibling resource's);
- `approval_governs`: the approval is the one the proposal is judged against: it applies
  (`approval_of_the_proposal`, and its `issued_at` is at or before `as_of`) and no approval that
  applies was issued later (the latest applicable approval governs; on a tie, each of the
  latest). Every approval field whose discrepancy speaks of the proposal's own approval (its
  parameters, revision, status, expiry, approver) asserts it: of a sibling resource's superseded
  approval, or of an earlier approval the latest one superseded, "not active" or "expired" says
  nothing about the proposal;
- `revokes_the_governing_approval`: the revocation names (`revokes`) the `approval_id` of an
  evidence approval that governs in that sense;
- `state_of_the_target`: the resource_state's `resource_id` is the proposal's target;
- `freeze_started_over_the_environment`: the freeze's `environments` include the proposal's
  `environment` and its `starts_at` is at or before `as_of` (with the rule's own `ends_at` after
  `as_of`, the window contains `as_of`).
"""

PARAMETER = "{parameter}"
"""Placeholder in a `FieldRule` pointer: the name of a parameter the proposal sets."""


@dataclass(frozen=True)
class FieldRule:
    """One field the policy compares, and how a discrepancy on it must be written."""

    kind: str
    """Evidence record kind the field belongs to (`approval`, `resource_state`, ...)."""
    field: str
    """JSON pointer into the record; `{parameter}` stands for a parameter the proposal sets."""
    proposed: str | None
    """Where `proposed_value` must come from: a JSON pointer into the request
    (`{"proposal": ..., "as_of": ...}`), or None when `proposed_value` must be null."""
    holds: Holds
    """The condition that makes the cited values a discrepancy (see `Holds`)."""
    sentence: str
    """How the candidate prompt states this rule (verbatim)."""
    conforming: str | None = None
    """For `not_value`: the value that is no discrepancy (e.g. `active`)."""
    absent_is_null: bool = False
    """The field may be absent from the record (its parent object exists): that absence is
    cited with `evidence_value` null (an approval that lists no such parameter)."""
    jointly: tuple[Jointly, ...] = ()
    """Facts about the record that must hold together with `holds` (see `Jointly`)."""
    record_values: tuple[tuple[str, str], ...] = ()
    """(JSON pointer, value) pairs the record must hold, after normalisation (e.g. a service
    notice's `/service` is the service the proposal depends on)."""


@dataclass(frozen=True)
class CitationRule:
    """Which records a supported finding cites in `evidence_refs`."""

    free_kinds: tuple[str, ...]
    """Record kinds that may always be cited besides the decisive records."""
    max_other: int
    """Other non-decisive records (of kinds not in `free_kinds`) tolerated."""
    never_all_others: bool
    """Citing every non-decisive record of the other kinds is never a precise citation."""
    sentences: tuple[str, ...]
    """How the candidate prompt states these rules (verbatim)."""


@dataclass(frozen=True)
class FindingRules:
    """Every rule the grader applies to a finding beyond its decision and reason codes."""

    citations: CitationRule
    """What `evidence_refs` must and may hold."""
    fields: tuple[FieldRule, ...] = ()
    """The fields a discrepancy may cite (empty: the response format has no discrepancies)."""
    max_extra_discrepancies: int = 0
    """True discrepancies beyond the case's decisive ones that a supported finding may list."""
    discrepancy_sentences: tuple[str, ...] = field(default_factory=tuple)
    """General discrepancy rules as the prompt states them (verbatim)."""

    def prompt_lines(self) -> list[str]:
        """Every sentence the candidate prompt must contain for these rules."""
        return [
            *self.citations.sentences,
            *self.discrepancy_sentences,
            *(rule.sentence for rule in self.fields),
        ]

    def rules_for(self, kind: str) -> list[FieldRule]:
        """The field rules of a record kind."""
        return [rule for rule in self.fields if rule.kind == kind]
