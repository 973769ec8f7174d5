"""The "System under test" block: what was tested, stated before any figure is read.

The spec's "Freeze the Experiment Before Running It" asks a report to retain the requested and
the reported model identifiers and the relevant serving settings, and to disclose when no
immutable model revision was available. A run whose server answered `fake-model-2025-01-01` for
a requested `fake-model` measured the dated model, whatever the spec said; the block shows both
ids and the verdict line flags the difference. Lineage, administrative boundary and revision
are what the spec declares (`CandidateSpec`); left out they read "not declared", never a guess.

One block per report, the same in `record.json` (`system_under_test`) and at the top of
`report.html`, built once by `describe_system_under_test` from the frozen manifest, the track's
`SubjectDescription` and the ledger's model ids.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from trustbench._docstrings import documented

if TYPE_CHECKING:
    from trustbench.core._export import ModelIds
    from trustbench.core._track import SubjectDescription
    from trustbench.core.spec._manifest import Manifest
    from trustbench.core.spec._spec import CandidateSpec

MODEL_KINDS = ("openai_chat", "anthropic_messages")
"""Candidate kinds whose requests name a served model (the others are code or a person)."""


class _Model(BaseModel):
    model_config = documented(extra="forbid", frozen=True)


class ConfigurationUnderTest(_Model):
    """One configuration as tested: its type, model ids, settings and declarations."""

    name: str
    """Configuration name (a candidate, or a configuration the track assembles from them)."""
    subject_type: str
    """`endpoint`, `agent application`, `review chain`, `execution architecture`, or
    `human participant`: from the track and the candidate's kind."""
    kind: str
    """The candidate's kind (`openai_chat`, `inprocess`, ...) or `composite` for a
    configuration assembled from candidates."""
    is_model: bool
    """Whether it is a served model (an API candidate); in-process code and people are not."""
    requested_model: str | None = None
    """The model id the spec requested (None when it is not a model)."""
    reported_models: dict[str, int] = Field(default_factory=dict)
    """Each model id the server reported -> attempts that reported it (every one, not the
    first)."""
    attempts_without_reported_id: int = 0
    """Attempts whose response named no model (a failed call, a server that omits it)."""
    model_id_mismatch: bool = False
    """True when a reported id differs from the requested one: the run measured that model."""
    serving_settings: dict[str, Any] = Field(default_factory=dict)
    """The candidate's declared settings (temperature, max_tokens, seed, ... or an in-process
    factory's arguments), as frozen."""
    code_sha256: str | None = None
    """SHA-256 of an in-process candidate's entry file, as frozen (None otherwise)."""
    entry: str | None = None
    """An in-process candidate's factory (`module:callable`)."""
    in_process_model: str | None = None
    """An in-process candidate's `model` (a TRB adapter id or `MODULE:FACTORY`): which code
    runs, not a served model's id."""
    information_condition: str
    """What it could see: `packet` or `tools` (the track's declaration)."""
    tools: list[str] = Field(default_factory=list)
    """Tools it could call (empty: none)."""
    declared_limits: str | None = None
    """Its declared time limit, tool set and review budget in words, where the track declares
    them per configuration (`declared_limits`: the review track's reviewers and participants);
    None = the track declares none."""
    lineage: str | None = None
    """Declared lineage; None = not declared."""
    administrative_boundary: str | None = None
    """Declared administrative boundary; None = not declared."""
    immutable_revision: bool | None = None
    """Whether an immutable model revision was available, as declared; None = not declared."""

    def mismatch_text(self) -> str:
        """`requested X, server reported Y` (every differing id), or "" when they agree."""
        if not self.model_id_mismatch:
            return ""
        others = [m for m in self.reported_models if m != self.requested_model]
        return f"requested {self.requested_model}, server reported {', '.join(others)}"


class SystemUnderTest(_Model):
    """The report's "System under test" block (also `record.json`'s `system_under_test`)."""

    track: str
    """`suite/track` of the run."""
    configurations: list[ConfigurationUnderTest]
    """Every configuration, candidates first in spec order."""
    prompt_sha256: dict[str, str] = Field(default_factory=dict)
    """Prompt name -> SHA-256, as frozen: the track's prompts and the corpus's `prompts/`."""
    policy_sha256: dict[str, str] = Field(default_factory=dict)
    """Corpus file pinning the policy (its `MANIFEST.json`, which names the policy id and
    hashes every case, schema and prompt) -> SHA-256, as frozen."""

    def mismatch_note(self, subject: str) -> str:
        """The verdict-line flag of `subject`'s model id mismatch, or "" when there is none."""
        for configuration in self.configurations:
            if configuration.name == subject and configuration.model_id_mismatch:
                return f"MODEL ID MISMATCH: {configuration.mismatch_text()}"
        return ""


def _reported(candidate: CandidateSpec, model_ids: ModelIds) -> tuple[dict[str, int], int, bool]:
    """(reported id -> attempts, attempts naming none, mismatch) of an API candidate.

    Only the attempts that requested the candidate's model are the server's answer about it.
    A track may record its own work under another id beside them (TRB's profile track logs
    each trial's hook calls under the adapter id, `proxy:chat`): that is no served model, and
    counting it flagged every TRB chat model as MODEL ID MISMATCH.
    """
    reported: dict[str, int] = {}
    unnamed = 0
    for (requested, found), count in sorted(model_ids.get(candidate.name, {}).items(), key=str):
        if requested not in (None, candidate.model):
            continue
        if found is None:
            unnamed += count
        else:
            reported[found] = reported.get(found, 0) + count
    mismatch = any(found != candidate.model for found in reported)
    return reported, unnamed, mismatch


Access = Mapping[str, tuple[str, tuple[str, ...]]]
"""Configuration name -> (information condition, tools) where a track declares it per
configuration (`candidate_access`); a name not in it has the track's `SubjectDescription`."""


def _candidate(
    candidate: CandidateSpec,
    subject: SubjectDescription,
    model_ids: ModelIds,
    code_sha256: dict[str, str],
    access: Access,
    limits: Mapping[str, str],
) -> ConfigurationUnderTest:
    is_model = candidate.kind in MODEL_KINDS
    reported, unnamed, mismatch = _reported(candidate, model_ids) if is_model else ({}, 0, False)
    human = candidate.kind == "human"
    default = (subject.information_condition, subject.tools)
    return ConfigurationUnderTest(
        name=candidate.name,
        subject_type="human participant" if human else subject.subject_type,
        kind=candidate.kind,
        is_model=is_model,
        requested_model=candidate.model if is_model else None,
        reported_models=reported,
        attempts_without_reported_id=unnamed,
        model_id_mismatch=mismatch,
        serving_settings=dict(candidate.settings),
        code_sha256=code_sha256.get(candidate.entry or ""),
        entry=candidate.entry,
        in_process_model=None if is_model else candidate.model,
        information_condition=access.get(candidate.name, default)[0],
        tools=list(access.get(candidate.name, default)[1]),
        declared_limits=limits.get(candidate.name),
        lineage=candidate.lineage,
        administrative_boundary=candidate.administrative_boundary,
        immutable_revision=candidate.immutable_revision,
    )


def describe_system_under_test(
    manifest: Manifest,
    subject: SubjectDescription,
    model_ids: ModelIds,
    assembled: Iterable[str] = (),
    access: Access | None = None,
    limits: Mapping[str, str] | None = None,
) -> SystemUnderTest:
    """The block for one run.

    Args:
        manifest: The frozen manifest (candidates, settings, declarations, file hashes).
        subject: The track's `SubjectDescription`.
        model_ids: The ledger's (requested, reported) id pairs per candidate
            (`model_ids_by_candidate`).
        assembled: Configurations the track assembles from candidates (the review track's
            chains), shown with the track's `composite_type`.
        access: Each configuration's own information condition and tools, where the track
            declares them per configuration (the review track's `access`).
        limits: Each candidate's declared time limit, tool set and review budget in words
            (the track's `declared_limits`), where it declares them.
    """
    access = access or {}
    limits = limits or {}
    default = (subject.information_condition, subject.tools)
    files = manifest.files
    code = {f.name: f.sha256 for f in files if f.role == "candidate_code"}
    rows = [
        _candidate(c, subject, model_ids, code, access, limits) for c in manifest.spec.candidates
    ]
    rows += [
        ConfigurationUnderTest(
            name=name,
            subject_type=subject.composite_type or "configuration",
            kind="composite",
            is_model=False,
            information_condition=access.get(name, default)[0],
            tools=list(access.get(name, default)[1]),
        )
        for name in assembled
    ]
    prompts = {
        f.name: f.sha256
        for f in files
        if f.role == "prompt" or (f.role == "corpus" and f.name.startswith("prompts/"))
    }
    policy = {f.name: f.sha256 for f in files if f.role == "corpus" and f.name == "MANIFEST.json"}
    return SystemUnderTest(
        track=manifest.spec.track_id,
        configurations=rows,
        prompt_sha256=prompts,
        policy_sha256=policy,
    )
