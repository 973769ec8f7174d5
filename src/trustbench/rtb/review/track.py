"""RTB track 1, reviewer comparison: every candidate reviews every case, K independent trials.

Registered as `rtb/review`. Each trial issues a fresh, unpredictable evaluation id
(`new_evaluation_id`), builds the shared review messages of the candidate-visible input (no
case id, variant or answer key; `ReviewMessages`, the text `build_review_messages` gives) and
makes one `ctx.chat` call. In-process reviewers (`trustbench.rtb.review.reviewers:chat_responder`)
receive exactly the messages an LLM receives. The trial stores the evaluation id, the raw reply
text (None when there was none) and the reported model; it judges nothing.

Grading happens only in `analyze`, from the ledger: the input is rebuilt from the case and the
recorded evaluation id, the raw reply is validated, support is judged against the answer key,
and configurations (singles, the unchecked baseline, declared chains) are assembled then. A trial
whose call failed (retries exhausted, a candidate error) is recorded failed with its error class
and graded `missing`: never approval.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trustbench.core import (
    CallFailed,
    Resolution,
    SubjectDescription,
    TrialOutcome,
    cross_product,
)
from trustbench.errors import InputError, did_you_mean
from trustbench.providers import ChatRequest
from trustbench.rtb.corpus._load import (
    Corpus,
    corpus_folder,
    corpus_items,
    corpus_location,
    declared_subset,
    load_corpus,
    load_frozen_corpus,
)
from trustbench.rtb.heldout._corpus import SealedSet, is_sealed_set
from trustbench.rtb.policy._protocol import AuthoredCase
from trustbench.rtb.review._extraction import prompt_note, response_format
from trustbench.rtb.review._options import (
    UNCHECKED,
    ReviewerAccess,
    access_of,
    parse_options,
    select_cases,
)
from trustbench.rtb.review.reviewers._llm import ReviewMessages
from trustbench.rtb.review.reviewers._registry import require_reviewer_policy

if TYPE_CHECKING:
    # The report step (matplotlib included) and the analysis types are imported only by
    # `report`; a run reads neither (issue 35). The input export (and its checks) and the
    # response validation are imported by the first trial: a run with none left (a resume of a
    # finished folder, start-up alone) needs neither.
    from trustbench import core

_SCHEMA_PROBE_ID = "rtb-" + "0" * 32
"""An evaluation id for the input that only selects the response schema (never sent)."""
BUILTIN_REVIEWER_ENTRY = "trustbench.rtb.review.reviewers:chat_responder"
"""Entry of the built-in in-process reviewers (named by `settings.reviewer`)."""


class ReviewTrack:
    """The `rtb/review` track: resolve the corpus, plan every (case, candidate, k), run, grade."""

    reads_attempt_texts = False
    """Grading reads each trial's recorded outcome (the reply) and its attempts' latency, tokens
    and cost, never an attempt's request or raw response: `report` skips those texts."""

    subject_description = SubjectDescription(
        subject_type="endpoint", information_condition="packet", composite_type="review chain"
    )
    """Each candidate is a reviewer endpoint given the fixed evidence packet; a declared chain
    is a review chain of them (the report's "System under test")."""

    def __init__(self) -> None:
        self._corpora: dict[str, Corpus] = {}
        self._cases: dict[str, dict[str, AuthoredCase]] = {}
        self._messages: dict[str, ReviewMessages] = {}
        self._schemas: dict[str, dict[str, Any]] = {}
        self._sealed: dict[str, SealedSet | None] = {}

    def sealed_set(self, root: str) -> SealedSet | None:
        """The sealed held-out set a manifest's corpus root names, None for an open corpus."""
        if root not in self._sealed:
            folder = corpus_folder(root)
            self._sealed[root] = SealedSet(folder) if is_sealed_set(folder) else None
        return self._sealed[root]

    def corpus(self, root: str, frozen_files: dict[str, str] | None = None) -> Corpus:
        """The corpus a manifest names (`builtin:<version>` or a folder), loaded once per track.

        `frozen_files` (see `resolve_frozen`) lets an unchanged frozen corpus skip re-validation.
        """
        if root not in self._corpora:
            folder = corpus_folder(root)
            corpus = (
                load_corpus(folder)
                if frozen_files is None
                else load_frozen_corpus(folder, frozen_files)
            )
            self._corpora[root] = corpus
            self._cases[root] = {case.case_id: case for case in corpus.cases}
            self._messages[root] = ReviewMessages(corpus.review_prompt)
        return self._corpora[root]

    def selected(self, manifest: core.Manifest) -> Corpus:
        """The manifest's corpus restricted to its declared subset, then to the cases selected.

        The subset is the spec's `corpus.families`; the selection `track_options.cases`. Loaded
        as `resolve_frozen` loads it: `report` grades from this corpus, and validating unchanged
        frozen bytes again cost 40 % of its CPU on a 2,000-trial run (issue 55).
        """
        corpus = declared_subset(
            self.corpus(manifest.corpus.root, _frozen_corpus_files(manifest)),
            manifest.spec.corpus.families,
        )
        patterns = parse_options(manifest.spec).cases
        if patterns is None:
            return corpus
        keep = set(select_cases([case.case_id for case in corpus.cases], patterns))
        return corpus.model_copy(update={"cases": [c for c in corpus.cases if c.case_id in keep]})

    def resolve(self, spec: core.ExperimentSpec, base_dir: Path) -> Resolution:
        """Load and validate the corpus, check the options, and list every corpus file.

        At freeze only (not `resolve_frozen`): a human participant's recommendation source must
        be a finished run with the named configuration (`_options`).
        """
        resolution = self._resolve(spec, base_dir, None)
        from trustbench.rtb.review._options import check_recommendation_sources

        check_recommendation_sources(spec, base_dir)
        return resolution

    def resolve_frozen(self, manifest: core.Manifest) -> Resolution:
        """`resolve` for a frozen experiment (core's `check_inputs` calls it before a run).

        When the corpus files hash to exactly what the freeze recorded, and the freeze ran this
        very trustbench source (its digest in the manifest), the corpus is parsed without
        repeating the checks the freeze ran on the same bytes (`rtb.corpus._load`); otherwise
        it is validated in full. Core compares every hash with the manifest afterwards either
        way.
        """
        return self._resolve(manifest.spec, Path(manifest.base_dir), _frozen_corpus_files(manifest))

    def _resolve(
        self, spec: core.ExperimentSpec, base_dir: Path, frozen_files: dict[str, str] | None
    ) -> Resolution:
        options = parse_options(spec)
        _check_reasoning_delimiters(spec, options.answer_extraction)
        from trustbench.rtb.review.reviewers._registry import ALL_REVIEWER_NAMES

        for index, candidate in enumerate(spec.candidates):
            reviewer = candidate.settings.get("reviewer")
            if candidate.entry == BUILTIN_REVIEWER_ENTRY and reviewer not in ALL_REVIEWER_NAMES:
                raise InputError(
                    f"unknown reviewer {reviewer!r}{did_you_mean(reviewer, ALL_REVIEWER_NAMES)}; "
                    f"known: {', '.join(ALL_REVIEWER_NAMES)}",
                    location=f"candidates/{index}/settings/reviewer",
                )
            if candidate.kind == "inprocess" and not candidate.entry:
                raise InputError(
                    "an in-process reviewer needs entry = "
                    '"trustbench.rtb.review.reviewers:chat_responder"',
                    location=f"candidate {candidate.name}",
                )
        root, label = corpus_location(spec, base_dir, sealed_ok=True)
        sealed = self.sealed_set(label)
        if sealed is not None:
            return self._resolve_sealed(spec, sealed, label)
        corpus = self.corpus(label, frozen_files)
        subset = declared_subset(corpus, spec.corpus.families)
        select_cases([case.case_id for case in subset.cases], options.cases)
        for candidate in spec.candidates:
            reviewer = (candidate.settings or {}).get("reviewer")
            if candidate.kind == "inprocess" and isinstance(reviewer, str):
                require_reviewer_policy(reviewer, label, corpus.policy_id)
        items = corpus_items(root, corpus)
        return Resolution(corpus_version=corpus.version, corpus_root=label, items=items)

    def _resolve_sealed(
        self, spec: core.ExperimentSpec, sealed: SealedSet, label: str
    ) -> Resolution:
        """A sealed held-out set: its clear parts and pins only (no key is needed to run it)."""
        if spec.corpus.families is not None:  # its cases' families are sealed with the key
            raise InputError(
                "corpus.families cannot select from a sealed held-out set (its families are "
                "sealed); run the whole set",
                location="corpus/families",
            )
        for name, access in parse_options(spec).access.items():
            if access.information == "tools":  # its evidence records are sealed with the keys
                raise InputError(
                    'information = "tools" is not supported on a sealed held-out set',
                    location=f"track_options/access/{name}/information",
                )
        if parse_options(spec).answer_extraction == "structured_output":
            raise InputError(
                "structured_output is not supported on a sealed held-out set yet",
                location="track_options/answer_extraction",
            )
        from trustbench.rtb.heldout._pipeline import check_sealed_spec

        check_sealed_spec(sealed, spec)
        for candidate in spec.candidates:
            reviewer = (candidate.settings or {}).get("reviewer")
            if candidate.kind == "inprocess" and isinstance(reviewer, str):
                require_reviewer_policy(reviewer, label, sealed.policy_id)
        version = str(sealed.manifest["corpus_version"])
        return Resolution(corpus_version=version, corpus_root=label, items=sealed.items())

    def on_freeze(self, manifest: core.Manifest, run_dir: Path, reason: str = "") -> list[str]:
        """Count a freeze against a sealed held-out set (refused past its budget unreasoned)."""
        sealed = self.sealed_set(manifest.corpus.root)
        if sealed is None:
            return []
        from trustbench.rtb.heldout._pipeline import on_freeze

        return on_freeze(sealed, manifest, reason)

    def before_run(self, manifest: core.Manifest, run_dir: Path) -> list[str]:
        """Record a run against a sealed held-out set before its first trial."""
        sealed = self.sealed_set(manifest.corpus.root)
        if sealed is None:
            return []
        from trustbench.rtb.heldout._pipeline import before_run

        return before_run(sealed, manifest, run_dir)

    def requires_structured_output(self, spec: core.ExperimentSpec) -> bool:
        """Whether the spec declares server-side structured output (the preflight probes it)."""
        return parse_options(spec).answer_extraction == "structured_output"

    def figure_names(self, spec: core.ExperimentSpec) -> set[str]:
        """Figure names a gate may read (checked at freeze)."""
        from trustbench.rtb.review._counting import figure_names

        return figure_names()

    def subject_names(self, spec: core.ExperimentSpec) -> set[str]:
        """Configurations a gate may name: every candidate and declared chain."""
        return {c.name for c in spec.candidates} | {c.name for c in parse_options(spec).chains}

    def candidate_access(self, spec: core.ExperimentSpec) -> dict[str, tuple[str, tuple[str, ...]]]:
        """Each configuration's declared information condition and tools (the first screen).

        A single reviewer has its candidate's `access`; a chain its members' conditions joined
        (`packet+tools`). The track-wide `subject_description` stays the default (`packet`).
        """
        from trustbench.rtb.review._options import configurations, information_label

        options = parse_options(spec)
        result: dict[str, tuple[str, tuple[str, ...]]] = {}
        for configuration, members in configurations(spec):
            if not members:
                continue
            tools = [
                tool
                for member in members
                if access_of(options, member).information == "tools"
                for tool in access_of(options, member).tools
            ]
            result[configuration.name] = (
                information_label(options, members),
                tuple(dict.fromkeys(tools)),
            )
        return result

    def declared_limits(self, spec: core.ExperimentSpec) -> dict[str, str]:
        """Each reviewer's declared time limit, tool set and review budget (the first screen).

        A model reviewer's from its `access`; a human participant's from its declaration and,
        where `track_options.access` names it, the enforced limit and submission budget.
        """
        from trustbench.rtb.review._options import human_limits

        options = parse_options(spec)
        limits: dict[str, str] = {}
        for candidate in spec.candidates:
            if candidate.participant is not None:
                declared = options.access.get(candidate.name)
                limits[candidate.name] = human_limits(declared, candidate.participant)
            else:
                limits[candidate.name] = access_of(options, candidate.name).declared_limits()
        return limits

    def reserved_names(self, spec: core.ExperimentSpec) -> set[str]:
        """Names no candidate may take (refused at freeze): the `unchecked` baseline it adds.

        A configuration's role is its declared kind (`ConfigurationKind.UNCHECKED` for the
        baseline), never its name; a candidate sharing the name would share its tables too.
        """
        return {UNCHECKED}

    def plan(self, manifest: core.Manifest) -> Sequence[core.TrialKey]:
        """Every (selected) case for every candidate, `trials_per_case` times.

        On a sealed held-out set the cases are its exported evaluation ids (case ids are sealed).
        """
        sealed = self.sealed_set(manifest.corpus.root)
        if sealed is not None:
            return cross_product(sealed.evaluation_ids(), manifest)
        return cross_product([case.case_id for case in self.selected(manifest).cases], manifest)

    async def run_trial(self, key: core.TrialKey, ctx: core.TrialContext) -> TrialOutcome:
        """One review: fresh evaluation id, visible input only, one chat call, raw reply kept."""
        from trustbench.rtb.corpus._export import new_evaluation_id

        root = ctx.manifest.corpus.root
        evaluation_id = new_evaluation_id()
        options = parse_options(ctx.manifest.spec)
        extraction = options.answer_extraction
        access = access_of(options, ctx.candidate.name)
        if access.information == "tools":
            return await self._tools_trial(key, ctx, evaluation_id, extraction, access)
        sealed = self.sealed_set(root)
        if sealed is not None:  # the clear input, under this trial's fresh id
            messages = sealed.messages(key.case_id, evaluation_id, prompt_note(extraction))
            request = ChatRequest(messages=messages, response_format="text")
        else:
            self.corpus(root)
            case = self._cases[root].get(key.case_id)
            if case is None:
                raise InputError(f"no case {key.case_id!r} in the corpus {root}")
            messages = self._extraction_messages(root, extraction).messages(case, evaluation_id)
            request = ChatRequest(
                messages=messages, response_format=self._response_format(root, case, extraction)
            )
        recorded = {
            "evaluation_id": evaluation_id,
            "requested_model": ctx.candidate.model or ctx.candidate.name,
            "answer_extraction": extraction,
        }
        if ctx.candidate.reasoning_delimiter is not None:
            recorded["reasoning_delimiter"] = ctx.candidate.reasoning_delimiter
        try:
            reply = await ctx.chat(request)
        except CallFailed as error:
            return TrialOutcome(
                "failed",
                {**recorded, "reply": None, "reported_model": None},
                error_class=error.error_class,
                error=str(error),
            )
        return TrialOutcome(
            "completed",
            {
                **recorded,
                "reply": reply.text,
                "reported_model": reply.reported_model,
                "finish_reason": reply.finish_reason,
                "refusal": reply.refusal,
                # Kept for people to read, never graded (`_extraction`, `final_json_object`).
                "reasoning": reply.reasoning,
            },
        )

    async def _tools_trial(
        self,
        key: core.TrialKey,
        ctx: core.TrialContext,
        evaluation_id: str,
        extraction: str,
        access: ReviewerAccess,
    ) -> TrialOutcome:
        """One review under `tools`: the proposal only, the evidence read through tools.

        The reply is recorded as under `packet` (graded alike); a spent budget is recorded as
        `review_budget_exhausted` with no reply, which grading counts as the reviewer's hold.
        """
        from trustbench.rtb.corpus._export import to_candidate_input
        from trustbench.rtb.review._access import TOOLS_NOTE, proposal_only, review_with_tools

        root = ctx.manifest.corpus.root
        self.corpus(root)
        case = self._cases[root].get(key.case_id)
        if case is None:
            raise InputError(f"no case {key.case_id!r} in the corpus {root}")
        packet = to_candidate_input(case, evaluation_id).model_dump(mode="json")
        shown, evidence = proposal_only(packet)
        prompt = self._corpora[root].review_prompt + prompt_note(extraction) + TOOLS_NOTE
        messages = [{"role": "system", "content": prompt}, {"role": "user", "content": shown}]
        recorded: dict[str, Any] = {
            "evaluation_id": evaluation_id,
            "requested_model": ctx.candidate.model or ctx.candidate.name,
            "answer_extraction": extraction,
            "information": "tools",
        }
        try:
            review = await review_with_tools(
                ctx, messages, evidence, access, self._response_format(root, case, extraction)
            )
        except CallFailed as error:
            return TrialOutcome(
                "failed",
                {**recorded, "reply": None, "reported_model": None},
                error_class=error.error_class,
                error=str(error),
            )
        recorded["tool_calls"] = review.tool_calls
        if review.reply is None:
            return TrialOutcome(
                "completed",
                {
                    **recorded,
                    "reply": None,
                    "reported_model": None,
                    "review_budget_exhausted": review.exhausted,
                },
            )
        reply = review.reply
        return TrialOutcome(
            "completed",
            {
                **recorded,
                "reply": reply.text,
                "reported_model": reply.reported_model,
                "finish_reason": reply.finish_reason,
                "refusal": reply.refusal,
                "reasoning": reply.reasoning,
            },
        )

    def _extraction_messages(self, root: str, extraction: str) -> ReviewMessages:
        """The review messages whose prompt states the declared extraction rule."""
        note = prompt_note(extraction)
        if not note:
            return self._messages[root]
        key = f"{root}\x00{extraction}"
        if key not in self._messages:
            self._messages[key] = ReviewMessages(self._corpora[root].review_prompt + note)
        return self._messages[key]

    def _response_format(self, root: str, case: AuthoredCase, extraction: str) -> Any:
        """`text`, or the structured-output format with the corpus policy's response schema."""
        if extraction != "structured_output":
            return "text"
        if root not in self._schemas:
            from trustbench.rtb.corpus._export import to_candidate_input
            from trustbench.rtb.review._validation import response_schema

            self._schemas[root] = response_schema(to_candidate_input(case, _SCHEMA_PROBE_ID))
        return response_format(extraction, self._schemas[root])

    def analyze(self, manifest: core.Manifest, ledger: core.LedgerContents) -> core.TrackAnalysis:
        """Grade the run from the ledger (see `trustbench.rtb.review._analysis`)."""
        from trustbench.rtb.review._analysis import analyze_review

        sealed = self.sealed_set(manifest.corpus.root)
        if sealed is not None:  # needs the owner's key; refused without it
            from trustbench.rtb.heldout._pipeline import analyze_sealed

            return analyze_sealed(sealed, manifest, ledger, analyze_review)
        return analyze_review(manifest, ledger, self.selected(manifest))


def _frozen_corpus_files(manifest: core.Manifest) -> dict[str, str] | None:
    """The corpus files' hashes a freeze by this very trustbench source validated, else None.

    With them `load_frozen_corpus` parses a corpus whose bytes hash to exactly these without
    repeating the freeze's checks, which this same code ran on the same bytes. Keyed on the
    source digest, not the version string (the same across development commits): a corpus
    changed since, frozen by other code, or by a manifest with no digest is validated in full.
    """
    if not manifest.environment.froze_with_running_code():
        return None
    return {f.name: f.sha256 for f in manifest.files if f.role == "corpus"}


def _check_reasoning_delimiters(spec: core.ExperimentSpec, extraction: str) -> None:
    """Refuse a declared `reasoning_delimiter` that the declared extraction rule would ignore.

    Only `final_json_object` cuts reasoning off; under another rule the delimiter would be
    frozen and recorded yet change nothing, so a reader of the spec would be misled.
    """
    for index, candidate in enumerate(spec.candidates):
        if candidate.reasoning_delimiter is not None and extraction != "final_json_object":
            raise InputError(
                f"reasoning_delimiter is read only by answer_extraction final_json_object "
                f"(declared: {extraction}); declare that rule or remove the delimiter",
                location=f"candidates/{index}/reasoning_delimiter",
            )


def run_review_demo(out_dir: Path) -> core.ReportResult:
    """Freeze, run and report the built-in reviewer demo (see `review/_demo.py`).

    Returns:
        The report result (`html_path`, gates, `blocked`); failed gates do not raise.
    """
    from trustbench.rtb.review._quick import run_review_demo as run_demo

    return run_demo(out_dir)


__all__ = ["ReviewTrack", "run_review_demo"]
