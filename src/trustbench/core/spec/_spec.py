"""The experiment spec: everything a run will do, declared in TOML before anything runs.

`ExperimentSpec` is the public contract of the spec file (see `docs/experiment-spec.md`). Every
field is documented here; unknown keys are errors naming the field, so a typo can never silently
fall back to a default. Numbers and flags are strict (`StrictInt`, `StrictFloat`, `StrictBool`):
`trials_per_case = "2"` or `= true` is refused naming the field, never converted to a count.
Analysis and gates are kept as data: the statistics and gate modules evaluate them after the
run, but they are fixed (and hashed into the manifest) before it.
"""

from __future__ import annotations

import json
import os
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import (
    BaseModel,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails

from trustbench._canonical import read_input_file
from trustbench._docstrings import documented
from trustbench.core.gates import GateSpec
from trustbench.core.spec._values import MAX_BOOTSTRAP_RESAMPLES as MAX_BOOTSTRAP_RESAMPLES
from trustbench.core.spec._values import (
    checked_base_url,
    key_free,
    refuse_inline_credentials,
    refuse_key_shaped_name,
    refuse_key_values,
    refuse_unrepresentable,
)
from trustbench.errors import InputError, did_you_mean
from trustbench.providers._types import DEFAULT_MAX_RESPONSE_BYTES, PriceSpec, RetryableErrorClass

# ------------------------------------------------------------------------------------------------
# API candidates without a base URL default the way the vendors' SDKs do.
#
# An `openai_chat` candidate with no `base_url` uses `$OPENAI_BASE_URL` or the public endpoint, with
# the key in `OPENAI_API_KEY`; an `anthropic_messages` one `$ANTHROPIC_BASE_URL` or the public
# endpoint, with `ANTHROPIC_API_KEY`. Applied when the spec is parsed, so the frozen manifest
# records the URL actually used (and only the key variable's name). A candidate that names its own
# `base_url` but no `api_key_env` (a local server) sends no key.

SDK_DEFAULTS: dict[str, tuple[str, str, str]] = {
    "openai_chat": ("OPENAI_BASE_URL", "https://api.openai.com/v1", "OPENAI_API_KEY"),
    "anthropic_messages": ("ANTHROPIC_BASE_URL", "https://api.anthropic.com", "ANTHROPIC_API_KEY"),
}
"""Per API kind: (base-URL variable, public endpoint, API-key variable)."""


def with_sdk_defaults(data: Any) -> Any:
    """A candidate's raw spec mapping with the SDK defaults filled in (other input unchanged)."""
    if not isinstance(data, dict) or data.get("kind") not in SDK_DEFAULTS:
        return data
    if data.get("base_url") is None:
        url_env, public_url, key_env = SDK_DEFAULTS[data["kind"]]
        data = {**data, "base_url": os.environ.get(url_env) or public_url}
        if data.get("api_key_env") is None:
            data["api_key_env"] = key_env
    return data


JsonValue = Any
"""A JSON-compatible value (pydantic validates the concrete types where it matters)."""

TRANSIENT_ERROR_CLASSES: tuple[str, ...] = (
    "rate_limited",
    "server_error",
    "connection_error",
    "timeout",
)
"""Error classes retried by default: the service, not the candidate, failed to answer."""


class _Strict(BaseModel):
    model_config = documented(extra="forbid", frozen=True)


class CorpusSpec(_Strict):
    """Which corpus the track reads: a built-in version or a folder, never both."""

    builtin: str | None = None
    """Version of the corpus shipped inside the package (e.g. `"v0.1"`)."""
    path: str | None = None
    """Folder holding a user corpus, relative to the spec file's folder (or absolute)."""
    families: list[str] | None = Field(default=None, min_length=1)
    """A declared subset: run only the cases of these contrast families (ids as the cases name
    them in `family`), each family whole. Frozen with the spec, so the manifest and the report
    say which cases ran; None runs every case. A track whose corpus names no families, or a
    family the corpus lacks, is refused at freeze naming `corpus/families`."""

    @model_validator(mode="after")
    def _exactly_one(self) -> CorpusSpec:
        if (self.builtin is None) == (self.path is None):
            raise ValueError("set exactly one of corpus.builtin or corpus.path")
        return self


class RecommendationSpec(_Strict):
    """Which earlier AI configuration's decisions are paired with a human participant's cases.

    The source is a finished run folder of the same corpus, pinned by its manifest hash. Whether
    the participant *sees* the recommendation is `visible`; with `visible = false` the decisions
    are still paired in the report, so agreement can be compared with and without visibility.
    """

    run: str
    """Finished run folder holding the AI configuration, relative to the spec file's folder
    (or absolute)."""
    manifest_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    """SHA-256 of that run's frozen manifest: a different or re-frozen run is refused."""
    configuration: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:+-]*$")
    """Configuration of that run (a candidate name or a declared chain) whose decisions are used."""
    visible: StrictBool
    """True: the participant is shown the configuration's decision beside each case."""


class ParticipantSpec(_Strict):
    """A real person reviewing cases (a `human` candidate); all of it is frozen with the run."""

    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    """Pseudonymous participant id (never a name or an e-mail address)."""
    team: str = Field(min_length=1)
    """The team the participant reviews for, as named in the report (never "humans" in general)."""
    workflow: str = Field(min_length=1)
    """The review workflow being exercised (e.g. `change-advisory-desk, single reviewer`)."""
    qualifications: list[str] = Field(min_length=1)
    """Declared qualifications (role, years in the domain, certifications), as the participant
    or the study lead stated them."""
    permitted_tools: list[str] = Field(default_factory=list)
    """Tools the participant may use while reviewing; empty = none beyond the review page."""
    evidence_access: str = Field(min_length=1)
    """What evidence the participant can consult (e.g. `the case's evidence records only, as
    shown to model reviewers`)."""
    time_limit_s: StrictFloat = Field(gt=0)
    """Time limit per case in seconds. Not enforced: overruns are recorded and reported."""
    recommendation: RecommendationSpec | None = None
    """The AI configuration paired with this participant's cases, shown or not; None = no AI
    recommendation is shown or compared."""


class HumanProtocolSpec(_Strict):
    """Experiment-level facts of a human comparison."""

    reference_suppliers: list[str] = Field(min_length=1)
    """Pseudonymous ids (or the team) who supplied the reference decisions; no participant may
    be one of them, so the people measured are not the people who wrote the answer key."""


class CandidateSpec(_Strict):
    """One system under test: an API chat model, in-process code, or a person (`human`).

    A `human` candidate is a real participant reviewing through `trustbench rtb human serve`.
    """

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")
    """Unique name used in trial keys, the ledger and the report."""
    kind: Literal["openai_chat", "anthropic_messages", "inprocess", "human"]
    """`openai_chat` (any OpenAI-compatible chat-completions server: vLLM, Ollama, llama.cpp,
    hosted APIs), `anthropic_messages`, `inprocess` (deterministic Python code) or `human` (a
    participant answering in the local review app; never run by `trustbench run`)."""
    model: str | None = None
    """Requested model id sent to the API (required for API kinds). The reported id is recorded
    per attempt; a hosted alias may resolve to different revisions over time."""
    base_url: str | None = None
    """API base URL, e.g. `http://127.0.0.1:8000/v1` (OpenAI-compatible) or
    `https://api.anthropic.com` (Anthropic). No credentials in the URL. Omitted, it defaults as
    the official SDKs do: `$OPENAI_BASE_URL` / `$ANTHROPIC_BASE_URL` if set, else the vendor's
    public endpoint; the resolved URL is what the manifest freezes."""
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """Name of the environment variable holding the API key. The value is read at run time
    only and never written to the manifest or the ledger. Omitted together with `base_url`, it
    defaults to `OPENAI_API_KEY` / `ANTHROPIC_API_KEY` (a candidate with an explicit `base_url`
    and no `api_key_env`, e.g. a local server, sends no key). For an `inprocess` candidate it
    names the one variable of the harness's environment passed to its sandbox worker, and only
    to its worker (a worker inherits no other variable but the runtime's, docs/sandbox.md); an
    unset one is refused at freeze and at run, and its value is redacted from what is stored.
    Under `isolation = "none"` the code runs in the harness process and reads its whole
    environment anyway."""
    entry: str | None = None
    """For `inprocess`: import string `module:callable` of a factory called once per trial with
    the candidate's `settings`, returning a fresh responder (no state carried between trials)."""
    rate_limit_per_s: StrictFloat | None = Field(default=None, gt=0)
    """Requests per second allowed to this candidate's endpoint (token bucket); none = unlimited."""
    settings: dict[str, JsonValue] = Field(default_factory=dict)
    """Serving settings merged into every request (temperature, max_tokens, seed, ...) or, for
    in-process candidates, the factory's arguments. No secrets: keys that look like credentials
    are rejected."""
    reasoning_delimiter: str | None = Field(default=None, min_length=1)
    """The text that ends this model's reasoning in its replies (e.g. `Final answer:`), for
    models that reason in plain text rather than in `<think>` blocks or a separate
    `reasoning_content` field. Everything up to its last occurrence is recorded and never
    graded; a reply without it is invalid. Read by the reviewer track's `final_json_object`
    answer extraction (refused at freeze under any other rule); not sent to the server."""
    price: PriceSpec | None = None
    """Token prices for cost accounting; without it every attempt's cost is null."""
    participant: ParticipantSpec | None = None
    """For `human`: who reviews and under which protocol (required for `human`, refused
    otherwise)."""
    lineage: str | None = Field(default=None, min_length=1)
    """Declared lineage of the system (base model, fine-tune parent, vendor family, e.g.
    `Llama-3.1-8B-Instruct, fine-tuned in-house on change reviews`). Shown in the report as
    declared; left out it reads "not declared", never a guess from the model id."""
    administrative_boundary: str | None = Field(default=None, min_length=1)
    """Who operates and controls the system under test (e.g. `vendor-hosted API, shared
    tenant` or `our cluster, team X`): whose change could alter it between runs. Shown as
    declared; "not declared" when left out."""
    immutable_revision: StrictBool | None = None
    """Whether the requested model id names an immutable revision (pinned weights, a dated
    snapshot its provider does not change). False discloses the limitation the spec asks to
    disclose: a moving alias may serve other weights on another day. None: "not declared"."""
    isolation: Literal["sandbox", "none"] | None = None
    """For `inprocess` candidates whose code is not trustbench's own: `sandbox` (the default,
    from the spec's `isolation`) runs it in a confined worker process (docs/sandbox.md); `none`
    runs it in the harness process, with the harness's rights, and every report says so."""
    endpoints: list[str] = Field(default_factory=list)
    """Network endpoints (`host:port` or URLs) the sandboxed code may connect to; none: no
    network at all."""

    @model_validator(mode="before")
    @classmethod
    def _sdk_defaults(cls, data: Any) -> Any:
        """Fill `base_url` / `api_key_env` the way the vendors' SDKs do, before validation."""
        return with_sdk_defaults(data)

    @field_validator("settings")
    @classmethod
    def _no_secret_settings(cls, value: dict[str, JsonValue]) -> dict[str, JsonValue]:
        refuse_inline_credentials(value, "settings")
        refuse_key_values(value, "settings")
        return value

    _no_key_as_model = field_validator("model")(key_free("model"))
    _no_key_as_lineage = field_validator("lineage")(key_free("lineage"))
    _no_key_as_boundary = field_validator("administrative_boundary")(
        key_free("administrative_boundary")
    )
    _no_key_as_candidate_name = field_validator("name")(key_free("name"))

    _no_key_as_name = field_validator("api_key_env")(refuse_key_shaped_name)

    _no_credentials_in_url = field_validator("base_url")(checked_base_url)

    @model_validator(mode="after")
    def _kind_fields(self) -> CandidateSpec:
        if (self.kind == "human") != (self.participant is not None):
            raise ValueError("participant is required for a human candidate and only for one")
        if self.kind == "human":
            if self.base_url or self.api_key_env or self.entry or self.model or self.settings:
                raise ValueError(
                    "a human candidate takes only a name and a participant (no model, "
                    "base_url, api_key_env, entry or settings)"
                )
        elif self.kind == "inprocess":
            if self.base_url:
                raise ValueError("an inprocess candidate takes no base_url")
            if (self.api_key_env or "").startswith("TRUSTBENCH"):
                raise ValueError(
                    "an inprocess candidate's api_key_env may not name a TRUSTBENCH_* variable "
                    "(those are the harness's own, never passed to candidate code)"
                )
        else:
            if not self.model or not self.base_url:
                raise ValueError(f"a {self.kind} candidate needs model and base_url")
            if self.entry:
                raise ValueError("entry is only for inprocess candidates")
        return self


class RetryPolicy(_Strict):
    """How failed calls are retried. Transport retries and candidate re-sampling are distinct."""

    transport_max_retries: StrictInt = Field(default=3, ge=0, le=20)
    """Extra attempts after the first when the service fails transiently (see `retry_on`). Each
    retry is recorded as its own `transport_retry` attempt."""
    retry_on: tuple[RetryableErrorClass, ...] = TRANSIENT_ERROR_CLASSES
    """Error classes that trigger a transport retry. `client_error` is never retried."""
    backoff_base_s: StrictFloat = Field(default=0.5, ge=0)
    """Base of the exponential backoff: retry n waits up to `base * 2**n` seconds."""
    backoff_max_s: StrictFloat = Field(default=30.0, ge=0)
    """Cap of the exponential backoff before jitter."""
    jitter: Literal["full", "none"] = "full"
    """`full`: wait a uniform random fraction of the backoff (seeded by `order_seed`), so
    concurrent retries do not stampede; `none`: wait the full backoff."""
    honour_retry_after: StrictBool = True
    """Wait at least a 429/503 response's Retry-After (capped by `retry_after_max_s`)."""
    retry_after_max_s: StrictFloat = Field(default=120.0, ge=0)
    """Longest Retry-After honoured."""
    candidate_resample: StrictInt = Field(default=0, ge=0, le=20)
    """Times a track may re-ask a candidate whose answer it judged unusable. 0 (default) = off.
    Anything above 0 defines a different decision policy, recorded and reported as such."""
    stop_after_client_errors: StrictInt = Field(default=5, ge=0, le=10_000)
    """First N trials all one same client error (a model-id typo): the rest stay "not run"."""

    @field_validator("retry_on")
    @classmethod
    def _never_client_errors(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if "client_error" in value:
            raise ValueError("client_error is a request defect and is never retried")
        return value


class AnalysisSpec(_Strict):
    """How results will be analysed; declared before the run, evaluated after it."""

    unit: Literal["trial", "case", "group"] = "case"
    """Unit of analysis: independent scenarios are cases (or groups of related variants), not
    repeated trials; intervals are computed at this level."""
    intervals: tuple[Literal["clopper_pearson", "wilson", "cluster_bootstrap"], ...] = (
        "clopper_pearson",
        "cluster_bootstrap",
    )
    """Interval methods reported for every rate."""
    confidence: StrictFloat = Field(default=0.95, gt=0, lt=1)
    """Confidence level of every interval."""
    bootstrap_resamples: StrictInt = Field(default=10_000, ge=100, le=MAX_BOOTSTRAP_RESAMPLES)
    """Resamples of the clustered bootstrap (at most `MAX_BOOTSTRAP_RESAMPLES`)."""
    bootstrap_seed: StrictInt = 0
    """Seed of the clustered bootstrap, recorded so the interval is reproducible."""
    min_valid_response_rate: StrictFloat = Field(default=0.95, ge=0, le=1)
    """Least share of attempted trials with a present, valid response for a subject's error
    rates to count as evidence; below it the subject is "not evaluable" and blocks release (a
    candidate that never answered has no false approvals because it never approved anything)."""
    exclude_disputed: StrictBool = False
    """Leave cases whose reference decision is disputed by its reviewers out of every gate's
    figures (a track that reads reference statuses says which cases, and still shows their
    figures apart). Off by default: a disputed answer key is still the declared one."""


class ExperimentSpec(_Strict):
    """A whole experiment: what runs, against what, how often, and how it will be judged."""

    suite: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    """Benchmark suite (e.g. `rtb`, `trb`)."""
    track: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    """Track within the suite (e.g. `review`); `suite/track` names the registered track."""
    description: str = ""
    """Free text: the question this experiment answers."""
    corpus: CorpusSpec
    """The corpus the track reads."""
    candidates: Annotated[list[CandidateSpec], Field(min_length=1)]
    """Systems under test."""
    trials_per_case: StrictInt = Field(default=1, ge=1, le=10_000)
    """Independent trials per (case, candidate); each starts from a fresh context."""
    concurrency: StrictInt = Field(default=8, ge=1, le=4096)
    """Trials in flight at once."""
    timeout_s: StrictFloat = Field(default=60.0, gt=0)
    """Limit for one call (attempt), from sending the request to reading the whole body."""
    max_response_bytes: StrictInt = Field(default=DEFAULT_MAX_RESPONSE_BYTES, ge=1024, le=1 << 30)
    """Largest response body read from an API candidate (default 4 MiB). A longer body is stored
    cut to this size with error class `response_too_large` (the truncation flag) and never
    parsed: the trial has no usable answer (missing or invalid, never approval)."""
    trial_timeout_s: StrictFloat | None = Field(default=None, gt=0)
    """Limit for a whole trial; none = only per-call timeouts apply."""
    order_seed: StrictInt = 0
    """Seed of the interleaved random trial order (and of backoff jitter)."""
    retry: RetryPolicy = RetryPolicy()
    """Retry policy."""
    analysis: AnalysisSpec = AnalysisSpec()
    """Analysis plan."""
    gates: list[GateSpec] = Field(default_factory=list)
    """Release gates."""
    track_options: dict[str, JsonValue] = Field(default_factory=dict)
    """Track-specific options (the track validates them when it resolves the spec)."""
    isolation: Literal["sandbox", "none"] = "sandbox"
    """How candidate code runs unless a candidate says otherwise: `sandbox` (a confined worker
    per candidate; a machine where it cannot be set up refuses to freeze or run) or `none` (in
    the harness process; shown in the report and the verdict line)."""
    human_protocol: HumanProtocolSpec | None = None
    """Required when any candidate is `human`: who supplied the reference decisions."""

    _no_key_in_description = field_validator("description")(key_free("description"))

    @field_validator("track_options")
    @classmethod
    def _no_secret_track_options(cls, value: dict[str, JsonValue]) -> dict[str, JsonValue]:
        refuse_inline_credentials(value, "track_options")
        refuse_key_values(value, "track_options")  # a key pasted as a value is frozen too
        return value

    @property
    def track_id(self) -> str:
        """The registry key of the track, `suite/track`."""
        return f"{self.suite}/{self.track}"

    @model_validator(mode="after")
    def _unique_names(self) -> ExperimentSpec:
        seen: set[str] = set()
        for candidate in self.candidates:
            if candidate.name in seen:
                raise ValueError(f"candidate name {candidate.name!r} is used twice")
            seen.add(candidate.name)
        humans = [c for c in self.candidates if c.participant is not None]
        if humans and self.human_protocol is None:
            raise ValueError("human candidates need [human_protocol] reference_suppliers")
        participant_ids = [c.participant.id for c in humans if c.participant is not None]
        if len(participant_ids) != len(set(participant_ids)):
            raise ValueError("a participant id is used by two human candidates")
        if self.human_protocol is not None:
            measured = set(participant_ids) & set(self.human_protocol.reference_suppliers)
            if measured:
                raise ValueError(
                    f"participant(s) {sorted(measured)} also supplied the reference decisions; "
                    "the people measured must not be the answer key's authors"
                )
        gate_names = [gate.label for gate in self.gates]
        if len(gate_names) != len(set(gate_names)):
            raise ValueError("gate names must be unique")
        # Gate candidates are checked at freeze against the track's configurations (a review
        # chain is gateable by name): see `core/spec/_manifest.check_gates`.
        return self


def parse_spec(data: dict[str, Any], *, source: str) -> ExperimentSpec:
    """Validate spec data, turning the first validation error into an `InputError`.

    Args:
        data: The parsed TOML (or JSON) mapping.
        source: File name used in error messages.

    Returns:
        The validated spec.

    Raises:
        InputError: naming the file and the JSON pointer of the offending field.
    """
    refuse_unrepresentable(data, source)
    try:
        return ExperimentSpec.model_validate(data)
    except ValidationError as error:
        pass

        raise spec_error(ExperimentSpec, error.errors(), source=source) from None


def load_spec(path: Path) -> ExperimentSpec:
    """Read and validate an experiment spec file: TOML, or JSON when its name ends in `.json`.

    Args:
        path: The spec file.

    Returns:
        The validated spec.

    Raises:
        InputError: when the file is missing or not a regular file, is not TOML, or a field is
            invalid.
    """
    import tomllib  # reading a spec (freeze); a run reads the frozen manifest, JSON

    as_json = path.suffix == ".json"
    raw = read_input_file(path)  # a FIFO or /dev/zero is refused, never read (exit 2)
    try:
        text = raw.decode("utf-8")
        data = json.loads(text) if as_json else tomllib.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError, UnicodeDecodeError) as error:
        kind = "JSON" if as_json else "TOML"
        raise InputError(f"not valid {kind}: {error}", location=str(path)) from None
    except RecursionError:
        raise InputError("nested too deeply to read", location=str(path)) from None
    if not isinstance(data, dict):
        raise InputError("a spec must be a table (a JSON object)", location=str(path))
    return parse_spec(data, source=str(path))


def refuse_unused_resample(spec: ExperimentSpec, track: object, *, source: str) -> None:
    """Refuse `retry.candidate_resample > 0` for a track that never re-samples a candidate.

    Re-sampling is a different decision policy; declaring it for a track that does not use it
    would freeze a policy the run never applies. A track that re-samples says so with a class
    attribute `uses_candidate_resample = True` (none of the built-in tracks does yet).

    Raises:
        InputError: naming the field.
    """
    if spec.retry.candidate_resample and not getattr(track, "uses_candidate_resample", False):
        raise InputError(
            f"track {spec.track_id} never re-samples a candidate, so candidate_resample = "
            f"{spec.retry.candidate_resample} would have no effect; set it to 0",
            location=f"{source}#/retry/candidate_resample",
        )


# ------------------------------------------------------------------------------------------------
# Spec validation errors as one line a user can act on: where, what, and the likely fix.
#
# A misspelt key (`transport_max_retires`) is refused by the strict spec models as an extra
# input; the message then names the closest key the table accepts, so the fix is one look away.


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The models an annotation can hold (through Optional, unions, lists, dicts, Annotated)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if get_origin(annotation) in (Union, types.UnionType) or get_args(annotation):
        return [model for arg in get_args(annotation) for model in _models_in(arg)]
    return []


def accepted_keys(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """The keys the table at `loc` accepts (`loc`: a validation error's, ending in the bad key).

    Every field name and alias of the model(s) that table is validated as.
    """
    models = [model]
    for part in loc[:-1]:
        if isinstance(part, int):
            continue  # a list index: the same models
        fields = [m.model_fields[part] for m in models if part in m.model_fields]
        if not fields:  # a dict key (a free-form table) or a union tag: keep the models
            continue
        models = [found for field in fields for found in _models_in(field.annotation)]
    names: list[str] = []
    for found in models:
        for name, field in found.model_fields.items():
            names += [name] + ([field.alias] if field.alias else [])
    return names


def spec_error(
    model: type[BaseModel], errors: Sequence[ErrorDetails], *, source: str
) -> InputError:
    """The `InputError` for a spec's validation errors: file#/json/pointer: message.

    A misspelt key shows as two errors (the key it should be is missing, the one written is
    extra); the extra one, with the key it is close to, is the one reported, since it says the
    fix. Otherwise the first error is.

    Args:
        model: The model the data was validated as (the spec).
        errors: Pydantic's errors, in its order.
        source: The file name shown in the message.
    """
    chosen, message = errors[0], errors[0]["msg"]
    for error in errors:
        loc = tuple(error["loc"])
        if error["type"] != "extra_forbidden" or not loc:
            continue
        hint = did_you_mean(loc[-1], accepted_keys(model, loc))
        if hint:
            chosen, message = error, error["msg"] + hint
            break
    pointer = "/" + "/".join(str(part) for part in chosen["loc"])
    return InputError(message, location=f"{source}#{pointer}")


# ------------------------------------------------------------------------------------------------
# Which candidates run code of their own, and under what isolation (checked at freeze and run).


def runs_candidate_code(candidate: CandidateSpec) -> bool:
    """Whether the candidate is code from outside trustbench (an `entry` or a `module:attr`)."""
    if candidate.kind != "inprocess":
        return False
    target = candidate.entry or (candidate.model if ":" in (candidate.model or "") else None)
    return target is not None and not target.startswith("trustbench.")


def isolation_of(candidate: CandidateSpec, spec: ExperimentSpec) -> str:
    """`sandbox` or `none`: the candidate's own setting, else the spec's."""
    return candidate.isolation or spec.isolation


def check_isolation(spec: ExperimentSpec) -> None:
    """Refuse a spec whose candidate code would run sandboxed on a machine without the sandbox.

    Raises:
        InputError: naming the candidate, why the sandbox is missing and the setting that runs
            it anyway (`isolation = "none"`, shown in every report).
    """
    needing = [
        c for c in spec.candidates if runs_candidate_code(c) and isolation_of(c, spec) == "sandbox"
    ]
    if not needing:
        return
    from trustbench.sandbox import platform_problem

    problem = platform_problem()
    if problem is not None:
        raise InputError(
            f"the candidate sandbox cannot be set up here: {problem}; refusing to run candidate "
            f'code unconfined (set isolation = "none" on the candidate or the spec to run it '
            "in the harness process; the report will say so)",
            location=f"candidate {needing[0].name}",
        )
