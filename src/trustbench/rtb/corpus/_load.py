"""Load and validate an RTB corpus folder (a built-in corpus or a user's own).

A corpus folder holds `cases/<case_id>.json`, `schemas/{case,candidate_input,reviewer_response}
.schema.json`, `prompts/review_prompt.md` and `MANIFEST.json`. Validation collects *every* problem
(file + JSON pointer + message) rather than stopping at the first, so one run tells the author
everything to fix; loading refuses a corpus with any problem, so no track ever scores against a
corrupt, tampered or inconsistent answer key. Neither ever writes a file.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from pydantic import BaseModel, PrivateAttr, SerializeAsAny, ValidationError

from trustbench._canonical import (
    DuplicateKeyError,
    read_input_file,
    refuse_duplicate_keys,
    sha256_hex,
)
from trustbench._docstrings import documented
from trustbench.core import ExperimentSpec, ResolvedItem
from trustbench.errors import CheckFailed, InputError, did_you_mean
from trustbench.rtb.corpus._models import Problem, json_pointer
from trustbench.rtb.policy._default import DEFAULT_POLICY_ID
from trustbench.rtb.policy._protocol import AuthoredCase, CorpusPolicy
from trustbench.rtb.policy._registry import known_policy_ids, policy_for

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError as SchemaError
    from jsonschema.protocols import Validator


# ------------------------------------------------------------------------------------------------
# JSON Schemas (Draft 2020-12) of the RTB case contract, generated from the pydantic models.
#
# The models of the corpus's policy (`CorpusPolicy.case_model`, ...) are the single source; the
# corpus ships the generated documents in `schemas/` so that people and tools outside Python can
# check files against the same contract. A test regenerates the documents and compares them with the
# shipped files, and a property test checks that the models and the schemas accept and reject the
# same documents.
#
# Two adjustments to pydantic's output keep schema and model in agreement:
#
# - Evidence records are a discriminated union on `kind`. Pydantic gives `kind` a default (so a
#   record can be built in code without it) and therefore leaves it out of `required`, but *inside*
#   the union pydantic requires the discriminator. Every evidence record in a case or candidate
#   input sits inside that union, so the schema requires `kind` too.
# - The reason-code enum gets a description listing every code with its meaning and the decision it
#   supports: the closed vocabulary is documented where a reviewer reads the response format.

DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
"""The JSON Schema dialect every shipped schema declares."""

SCHEMA_FILES: tuple[str, ...] = (
    "case.schema.json",
    "candidate_input.schema.json",
    "reviewer_response.schema.json",
)
"""Shipped schema file names (under a corpus's `schemas/`), the same for every policy."""


def _policy(policy: CorpusPolicy | str | None) -> CorpusPolicy:
    if policy is None or isinstance(policy, str):
        from trustbench.rtb.policy._registry import policy_for

        return policy_for(policy)
    return policy


def schema_models(policy: CorpusPolicy | str | None = None) -> dict[str, type[BaseModel]]:
    """Schema file name -> the policy's model it is generated from."""
    chosen = _policy(policy)
    return dict(
        zip(
            SCHEMA_FILES,
            (chosen.case_model, chosen.candidate_model, chosen.response_model),
            strict=True,
        )
    )


def reason_code_vocabulary_text(policy: CorpusPolicy | str | None = None) -> str:
    """The closed reason-code vocabulary as one line per code: `code (decision): meaning`.

    Args:
        policy: The corpus policy (object or id); None for the default policy.

    Returns:
        Text used in the reviewer-response schema description (the review prompt states the
        same vocabulary in its own words).
    """
    chosen = _policy(policy)
    return "\n".join(
        f"{code} ({chosen.reason_decision[code]}): {chosen.reason_meaning[code]}"
        for code in chosen.reason_codes
    )


def build_schema(file_name: str, policy: CorpusPolicy | str | None = None) -> dict[str, Any]:
    """Generate one shipped schema document from its model.

    Args:
        file_name: One of `SCHEMA_FILES`, e.g. `case.schema.json`.
        policy: The corpus policy (object or id); None for the default policy.

    Returns:
        The Draft 2020-12 schema document, with `$schema` and a stable `$id`.
    """
    chosen = _policy(policy)
    generated = schema_models(chosen)[file_name].model_json_schema()
    definitions: dict[str, Any] = generated.get("$defs", {})
    for name in chosen.evidence_defs:
        if name in definitions:
            required = definitions[name].setdefault("required", [])
            if "kind" not in required:
                required.insert(0, "kind")
    if chosen.reason_code_def in definitions:
        definitions[chosen.reason_code_def]["description"] = (
            "Closed vocabulary of reason codes; each supports one decision.\n"
            + reason_code_vocabulary_text(chosen)
        )
    urn = chosen.schema_id_prefix + file_name.removesuffix(".schema.json")
    return {"$schema": DRAFT_2020_12, "$id": urn, **generated}


def schema_text(document: dict[str, Any]) -> str:
    """Serialize a schema the way it is shipped (stable text, so hashes are reproducible)."""
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def schema_documents(policy: CorpusPolicy | str | None = None) -> dict[str, dict[str, Any]]:
    """All three shipped schema documents of a policy's format, keyed by file name."""
    chosen = _policy(policy)
    return {name: build_schema(name, chosen) for name in SCHEMA_FILES}


def write_schemas(schemas_dir: Path, policy: CorpusPolicy | str | None = None) -> list[Path]:
    """Write the three schema files into `schemas_dir` (created if absent).

    Args:
        schemas_dir: A corpus's `schemas/` folder.
        policy: The corpus policy (object or id); None for the default policy.

    Returns:
        The paths written.
    """
    schemas_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, document in schema_documents(policy).items():
        path = schemas_dir / name
        path.write_text(schema_text(document), encoding="utf-8")
        written.append(path)
    return written


# ------------------------------------------------------------------------------------------------
# Strict JSON reading and schema checking that report problems as file + JSON pointer.
#
# Every corpus file is read the same way: UTF-8 only, no duplicate keys (JSON parsers silently keep
# the last one, which would let two readers see different values), no `NaN`/`Infinity`. Schema
# errors are reported at the JSON pointer of the offending value, descending into `oneOf` failures
# to the branch the document evidently meant, so an author sees `/evidence/1/status` rather than
# "not valid under any of the given schemas".

_MAX_MESSAGE = 240


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


NESTED_TOO_DEEPLY = "JSON nested too deeply to read (beyond Python's recursion limit)"
"""The problem reported for a file whose nesting would exhaust the parser or the validator."""


def read_json(root: Path, rel: str, problems: list[Problem]) -> Any | None:
    """Parse a corpus JSON file strictly (UTF-8, no duplicate keys, no NaN); None on a problem."""
    return parse_json(rel, (root / rel).read_bytes(), problems)


def parse_json(rel: str, data: bytes, problems: list[Problem]) -> Any | None:
    """Parse the bytes of corpus file `rel` as `read_json` does; None on a problem."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        problems.append(Problem(file=rel, message=f"not UTF-8 text ({error.reason})"))
        return None
    try:
        return json.loads(
            text, object_pairs_hook=refuse_duplicate_keys, parse_constant=_reject_constant
        )
    except json.JSONDecodeError as error:
        message = f"not valid JSON: {error.msg} at line {error.lineno} column {error.colno}"
        problems.append(Problem(file=rel, message=message))
    except DuplicateKeyError as error:
        problems.append(Problem(file=rel, message=f"duplicate JSON key {error.args[0]!r}"))
    except RecursionError:
        problems.append(Problem(file=rel, message=NESTED_TOO_DEEPLY))
    except ValueError as error:
        problems.append(Problem(file=rel, message=f"not valid JSON: {error}"))
    return None


@cache
def _validator(schema_name: str, policy_id: str | None = None) -> Validator:
    """The schema's Draft 2020-12 validator, built once per schema, with `_one_of_by_kind`."""
    import jsonschema
    from jsonschema.validators import extend

    schema = build_schema(schema_name, policy_id)
    standard = jsonschema.Draft202012Validator
    by_kind = extend(standard, {"oneOf": _one_of_by_kind(schema, standard.VALIDATORS["oneOf"])})
    return by_kind(schema)


def _one_of_by_kind(root: Mapping[str, Any], one_of: Callable[..., Any]) -> Callable[..., Any]:
    """Draft 2020-12 `oneOf`, trying first the one branch whose `kind` constant the record names.

    An evidence list is a `oneOf` of the record models, each a `$ref` whose `kind` property is
    a string constant. A record naming one branch's `kind` fails every other branch (their
    `kind` constant differs), so when that one branch accepts it, exactly one branch does and
    `oneOf` holds: what the standard keyword (`one_of`) would conclude after validating the
    record against all seven branches. Anything else, an invalid record included, goes to the
    standard keyword, so every error and its message are the library's. The evidence `oneOf`
    was most of a corpus's validation, which a run pays before its first trial: the 180 cases of
    the second corpus took 0.42 to 0.45 s of CPU and take 0.18 to 0.22 s (load 14,
    bench/README.md "Reviewers in the loop"); every case is still validated in full, once per
    process.
    """

    def validate(validator: Any, branches: Any, instance: Any, schema: Any) -> Iterator[Any]:
        named = _branch_named(root, branches, instance)
        if named is None or not validator.evolve(schema=named).is_valid(instance):
            yield from one_of(validator, branches, instance, schema)

    return validate


def _branch_named(root: Mapping[str, Any], branches: Any, instance: Any) -> Any | None:
    """The one `oneOf` branch whose `kind` constant is the record's `kind`, else None.

    None also when a branch is not a `$ref` to `#/$defs/NAME` with a string `kind` constant.
    """
    kind = instance.get("kind") if isinstance(instance, dict) else None
    if not isinstance(kind, str) or not isinstance(branches, list):
        return None
    named = []
    for branch in branches:
        reference = branch.get("$ref") if isinstance(branch, dict) and len(branch) == 1 else None
        if not isinstance(reference, str) or not reference.startswith("#/$defs/"):
            return None
        definition = root.get("$defs", {}).get(reference.removeprefix("#/$defs/"), {})
        constant = definition.get("properties", {}).get("kind", {}).get("const")
        if not isinstance(constant, str):
            return None
        if constant == kind:
            named.append(branch)
    return named[0] if len(named) == 1 else None


_MEMO_SIZE = 4096
"""Documents whose schema findings are remembered (a bound: past it the memo starts again)."""
_memo: dict[tuple[str, str | None, str], tuple[tuple[str, str], ...]] = {}


def schema_problems(
    rel: str, document: Any, schema_name: str, policy_id: str | None = None
) -> list[Problem]:
    """Problems of a document against one of the three schemas, each with its JSON pointer.

    `policy_id` picks the policy's format (None: the default policy).

    Validation is a pure function of the schema and the document, and it is most of reading a
    corpus (about 17 ms a case of the default corpus): one process validates the same case when
    it checks a corpus, loads it and exports it, and every load of a built-in corpus again. So
    the findings are remembered per document text (its key order included, which fixes the
    order of the findings); a document that does not serialise is validated every time.
    """
    try:
        key = (schema_name, policy_id, json.dumps(document, ensure_ascii=False))
    except (TypeError, ValueError, RecursionError):
        return [_problem(rel, found) for found in _findings(document, schema_name, policy_id)]
    findings = _memo.get(key)
    if findings is None:
        findings = _findings(document, schema_name, policy_id)
        if len(_memo) >= _MEMO_SIZE:
            _memo.clear()
        _memo[key] = findings
    return [_problem(rel, found) for found in findings]


def _problem(rel: str, found: tuple[str, str]) -> Problem:
    return Problem(file=rel, pointer=found[0], message=found[1])


def _findings(
    document: Any, schema_name: str, policy_id: str | None
) -> tuple[tuple[str, str], ...]:
    """(JSON pointer, message) of each schema problem of `document`, in reporting order."""
    try:
        errors = sorted(
            _validator(schema_name, policy_id).iter_errors(document),
            key=lambda e: [str(p) for p in e.path],
        )
    except RecursionError:
        return (("", NESTED_TOO_DEEPLY),)
    return tuple(
        (json_pointer(leaf.absolute_path), f"schema: {_shorten(leaf.message)}")
        for error in errors
        for leaf in _specific(error)
    )


def _specific(error: SchemaError) -> list[SchemaError]:
    """Descend into a `oneOf`/`anyOf` failure to the branch the document evidently meant.

    An evidence record that fails names its branch through `kind`: the branches whose `kind`
    constant did not match are noise, the remaining branch holds the useful errors.
    """
    if not error.context:
        return [error]
    branches: dict[Any, list[SchemaError]] = {}
    for sub in error.context:
        branches.setdefault(sub.relative_schema_path[0], []).append(sub)
    meant = [
        subs
        for subs in branches.values()
        if not any(s.validator == "const" and list(s.relative_path) == ["kind"] for s in subs)
    ]
    if len(meant) == 1:
        return [leaf for sub in meant[0] for leaf in _specific(sub)]
    kinds = sorted(
        {
            str(s.validator_value)
            for s in error.context
            if s.validator == "const" and list(s.relative_path) == ["kind"]
        }
    )
    if kinds and not meant:
        error.message = f"evidence record `kind` must be one of {', '.join(map(repr, kinds))}"
    return [error]


def _shorten(message: str) -> str:
    return message if len(message) <= _MAX_MESSAGE else message[: _MAX_MESSAGE - 3] + "..."


# ------------------------------------------------------------------------------------------------
# `MANIFEST.json`: the SHA-256 of every corpus file, the corpus version and its case counts.
#
# The manifest pins a corpus: a frozen experiment records the manifest's own hash, and the validator
# recomputes every file's hash so that a file changed after the manifest was written is reported
# instead of silently scored. The manifest is written by `trustbench rtb manifest`, never by the
# validator or the loader.

MANIFEST_NAME = "MANIFEST.json"
"""File name of the manifest at a corpus root."""

MANIFEST_FORMAT = "trustbench-rtb-corpus"
"""Value of the manifest's `format` field: says what kind of folder this is."""


class CorpusCounts(BaseModel):
    """How many cases the corpus holds, by reference decision, group and variant."""

    model_config = documented(extra="forbid")

    cases: int
    """Number of case files."""
    by_decision: dict[str, int]
    """Reference decision -> number of cases (authored answer key, not observed results)."""
    by_group: dict[str, int]
    """Domain group -> number of cases."""
    by_variant: dict[str, int]
    """Variant -> number of cases."""


class CorpusManifest(BaseModel):
    """The content of `MANIFEST.json`."""

    model_config = documented(extra="forbid")

    format: Literal["trustbench-rtb-corpus"] = MANIFEST_FORMAT
    """Identifies the folder as an RTB corpus."""
    version: str
    """Corpus version, e.g. `0.1` for the built-in starter."""
    policy_id: str | None = None
    """The policy the corpus's answer key follows; its registered `CorpusPolicy` object fixes the
    case format and the code allowed to grade it. Absent: `DEFAULT_POLICY_ID` (the first starter
    predates this field)."""
    starter: bool = False
    """True for a policy's starter corpus and its copies: the validator then also runs the
    policy's starter checks (`CorpusPolicy.check_starter`: for the first starter the 10 x 6 grid,
    the 20/20/20 split and the shared policy wording). User corpora leave it false."""
    hash_algorithm: Literal["sha256"] = "sha256"
    """Digest used for `files` (hex-encoded)."""
    files: dict[str, str]
    """Relative POSIX path -> SHA-256 of the file's bytes, for every file except the manifest."""
    counts: CorpusCounts
    """Case counts, checked against the cases actually present."""


def corpus_file_paths(root: Path) -> list[str]:
    """Every regular file under `root` except the manifest, as sorted relative POSIX paths.

    Nothing is skipped silently: a stray file is listed so the manifest check reports it.
    """
    return sorted(
        path.relative_to(root).as_posix()
        for path in root.rglob("*")
        if path.is_file() and path.relative_to(root).as_posix() != MANIFEST_NAME
    )


def count_cases(cases: Iterable[AuthoredCase]) -> CorpusCounts:
    """Count cases by reference decision, group and variant (keys sorted for stable output)."""
    case_list = list(cases)
    decisions = Counter(case.expectations.reference_decision.value for case in case_list)
    groups = Counter(case.group for case in case_list)
    variants = Counter(case.variant for case in case_list)
    return CorpusCounts(
        cases=len(case_list),
        by_decision=dict(sorted(decisions.items())),
        by_group=dict(sorted(groups.items())),
        by_variant=dict(sorted(variants.items())),
    )


def build_manifest(
    files: dict[str, str],
    version: str,
    cases: Iterable[AuthoredCase],
    *,
    starter: bool = False,
    policy_id: str | None = None,
) -> CorpusManifest:
    """Build the manifest certifying `files` (path -> SHA-256 of the bytes validated)."""
    return CorpusManifest(
        version=version,
        policy_id=policy_id,
        starter=starter,
        files=files,
        counts=count_cases(cases),
    )


def manifest_text(manifest: CorpusManifest) -> str:
    """Serialize a manifest the way it is written (stable, no timestamps, so it is reproducible)."""
    # `exclude_none` leaves an absent `policy_id` out: manifests written before the field stay
    # byte-identical.
    document = manifest.model_dump(mode="json", exclude_none=True)
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def compare_manifest(
    manifest: CorpusManifest,
    files: dict[str, str],
    cases: Sequence[AuthoredCase] | None,
) -> list[Problem]:
    """Problems of the files on disk (`files`: path -> sha256) and counts against a manifest.

    Args:
        manifest: The manifest as read.
        files: Every corpus file as read now (see `CorpusSnapshot.file_hashes`).
        cases: The parsed cases, or None when some case failed to parse (then counts would only
            repeat that failure and are not compared).
    """
    problems = []
    for rel, digest in files.items():
        listed = manifest.files.get(rel)
        pointer = json_pointer(["files", rel])
        if listed is None:
            problems.append(
                Problem(
                    file=rel, message=f"not listed in {MANIFEST_NAME} (added after it was written?)"
                )
            )
        elif listed != digest:
            problems.append(
                Problem(
                    file=rel,
                    message=f"sha256 {digest[:16]}... differs from {MANIFEST_NAME} {pointer} "
                    f"({listed[:16]}...): the file changed after the manifest was written",
                )
            )
    for rel in manifest.files:
        if rel not in files:
            problems.append(
                Problem(
                    file=MANIFEST_NAME,
                    pointer=json_pointer(["files", rel]),
                    message=f"lists {rel}, which does not exist",
                )
            )
    if cases is not None:
        actual = count_cases(cases)
        for field in ("cases", "by_decision", "by_group", "by_variant"):
            if getattr(actual, field) != getattr(manifest.counts, field):
                problems.append(
                    Problem(
                        file=MANIFEST_NAME,
                        pointer=json_pointer(["counts", field]),
                        message=f"{getattr(manifest.counts, field)} does not match the cases "
                        f"present: {getattr(actual, field)}",
                    )
                )
    return problems


# ------------------------------------------------------------------------------------------------
# A corpus folder's files read once: every hash and every parse comes from the same bytes.
#
# Reading a file to hash it and again to parse it leaves a window in which the file can change
# between the two. The hash a freeze records would then vouch for bytes nobody validated, and
# `load_frozen_corpus`, which skips re-validating bytes that hash to what a freeze recorded,
# would trust them at every later run. A snapshot takes each file's bytes once; the validator,
# the frozen loader and the manifest's hashes (`ResolvedItem.data`) all use those bytes. It also
# spares a run's start-up reading each of the corpus's files three times.


@dataclass(frozen=True)
class CorpusSnapshot:
    """The bytes of every regular file under a corpus root, `MANIFEST.json` included."""

    root: Path
    """The corpus folder the bytes were read from."""
    data: Mapping[str, bytes]
    """Relative POSIX path -> the file's bytes as read."""

    @classmethod
    def take(cls, root: Path) -> CorpusSnapshot:
        """Read every file under `root` (see `corpus_file_paths`) and the manifest, once.

        Raises:
            InputError: a file could not be read, is not a regular file or is too large (names
                it).
        """
        names = corpus_file_paths(root)
        if (root / MANIFEST_NAME).is_file():
            names.append(MANIFEST_NAME)
        data: dict[str, bytes] = {}
        for rel in names:  # regular files of bounded size only, each named when refused
            data[rel] = read_input_file(root / rel)
        return cls(root=root, data=data)

    def __contains__(self, rel: object) -> bool:
        return rel in self.data

    def sha256(self, rel: str) -> str | None:
        """SHA-256 of the file's bytes; None when there was no such file."""
        data = self.data.get(rel)
        return None if data is None else sha256_hex(data)

    def file_hashes(self) -> dict[str, str]:
        """Relative path -> SHA-256 of every file except the manifest."""
        return {rel: sha256_hex(data) for rel, data in self.data.items() if rel != MANIFEST_NAME}

    def read_json(self, rel: str, problems: list[Problem]) -> Any | None:
        """The file parsed strictly (see `parse_json`); None on a problem or no such file."""
        data = self.data.get(rel)
        if data is None:
            problems.append(
                Problem(file=rel, message="was not there when the corpus was read (just added?)")
            )
            return None
        return parse_json(rel, data, problems)


# ------------------------------------------------------------------------------------------------
# Reading each part of a corpus from its snapshot: cases, schemas, prompt and manifest.
#
# Each reader appends what is wrong to `problems` (file, JSON pointer, message) and returns what
# did parse, so `validate_corpus` reports every problem of a corpus in one pass.

PROMPT_PATH = "prompts/review_prompt.md"
"""Where a corpus keeps the shared advisory-review prompt."""


def load_cases(
    snapshot: CorpusSnapshot, problems: list[Problem], policy: CorpusPolicy
) -> list[tuple[str, AuthoredCase]]:
    """`(rel, case)` of every case file that parses, matches the policy's schema and its name."""
    root = snapshot.root
    cases_dir = root / "cases"
    if not cases_dir.is_dir():
        problems.append(Problem(file="cases/", message="missing folder of case files"))
        return []
    paths = sorted(p for p in cases_dir.iterdir())
    if not any(p.suffix == ".json" for p in paths):
        problems.append(Problem(file="cases/", message="no case files (*.json)"))
    loaded: list[tuple[str, AuthoredCase]] = []
    case_model = policy.case_model
    for path in paths:
        rel = path.relative_to(root).as_posix()
        if path.suffix != ".json" or not path.is_file():
            problems.append(Problem(file=rel, message="not a case file (cases/ holds *.json only)"))
            continue
        document = snapshot.read_json(rel, problems)
        if document is None:
            continue
        found = schema_problems(rel, document, "case.schema.json", policy.policy_id)
        if found:
            problems += found
            continue
        try:
            # An instance of the policy's case model; `AuthoredCase` is what it has to offer.
            case = cast(AuthoredCase, case_model.model_validate(document))
        except ValidationError as error:
            for detail in error.errors():
                problems.append(
                    Problem(
                        file=rel,
                        pointer=json_pointer(detail["loc"]),
                        message=f"model (schema accepted it): {detail['msg']}",
                    )
                )
            continue
        if case.case_id != path.stem:
            problems.append(
                Problem(
                    file=rel,
                    pointer="/case_id",
                    message=f"case id {case.case_id!r} does not match the file name {path.name!r}",
                )
            )
            continue
        loaded.append((rel, case))  # type: ignore[arg-type]
    return loaded


def check_schemas(snapshot: CorpusSnapshot, problems: list[Problem], policy: CorpusPolicy) -> None:
    """Report each schema file that is missing or differs from the one generated from the models."""
    expected = schema_documents(policy)
    for name in SCHEMA_FILES:
        rel = f"schemas/{name}"
        if rel not in snapshot:
            problems.append(Problem(file=rel, message="missing schema file"))
            continue
        document = snapshot.read_json(rel, problems)
        if document is not None and document != expected[name]:
            problems.append(
                Problem(
                    file=rel,
                    message="differs from the schema generated from trustbench's models; copy "
                    "the built-in corpus's schemas/ (the contract is the same for every corpus)",
                )
            )


def read_prompt(snapshot: CorpusSnapshot, problems: list[Problem]) -> str | None:
    """The shared review prompt's text; None (with a problem) when missing, not UTF-8 or empty."""
    data = snapshot.data.get(PROMPT_PATH)
    if data is None:
        problems.append(Problem(file=PROMPT_PATH, message="missing shared review prompt"))
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        problems.append(Problem(file=PROMPT_PATH, message=f"not UTF-8 text ({error.reason})"))
        return None
    if not text.strip():
        problems.append(Problem(file=PROMPT_PATH, message="empty review prompt"))
        return None
    return text


def read_manifest(snapshot: CorpusSnapshot, problems: list[Problem]) -> CorpusManifest | None:
    """`MANIFEST.json` parsed; None when absent (no problem) or invalid (problems added)."""
    if MANIFEST_NAME not in snapshot:
        return None
    document = snapshot.read_json(MANIFEST_NAME, problems)
    if document is None:
        return None
    try:
        return CorpusManifest.model_validate(document)
    except ValidationError as error:
        for detail in error.errors():
            problems.append(
                Problem(
                    file=MANIFEST_NAME, pointer=json_pointer(detail["loc"]), message=detail["msg"]
                )
            )
        return None


BUILTIN_VERSION = "0.1"
"""Version of the default built-in corpus (the starter; data folder `v<version>`)."""

DEFAULT_VERSION = "0.4"
"""The built-in corpus the reviewer-side tools default to, and the one place that says so:
`rtb review --model`, `rtb validate`, `rtb audit` and `rtb export` without `--corpus`, the
Inspect interop (which otherwise finds the built-in corpus an export was made from), and every
shipped spec that names a built-in corpus (the demos, the examples, the human and adjudication
walk-throughs; a test holds each to this value). The newest corpus: contrast families on
realistic worlds, audited by attackers it was not filtered against. The starter
(`BUILTIN_VERSION`, the spec's 60 cases) stays the corpus of the starter checks; the older
corpora stay shipped and selectable with `--corpus builtin:v<version>`, each labelled in
`docs/` as superseded, with its `rtb audit` result."""

BUILTIN_VERSIONS: tuple[str, ...] = tuple(
    sorted(
        folder.name.removeprefix("v")
        for folder in Path(__file__).parent.glob("v*")
        if (folder / "MANIFEST.json").is_file()
    )
)
"""Every corpus version shipped inside the package: one data folder `v<version>` each."""


def builtin_corpus_root(version: str = BUILTIN_VERSION) -> Path:
    """Folder of a built-in corpus (package data); default the starter."""
    return Path(__file__).parent / f"v{version.removeprefix('v')}"


if TYPE_CHECKING:
    AuthoredCases = list[AuthoredCase]
else:
    # Each case is an instance of its policy's own case model, so pydantic holds (and serializes)
    # them as the models they are; `AuthoredCase` says what the harness may read of any of them.
    AuthoredCases = list[SerializeAsAny[BaseModel]]


class ValidationReport(BaseModel):
    """Everything `validate_corpus` found: the problems and what did parse."""

    model_config = documented()

    root: Path
    """The corpus folder that was validated."""
    starter: bool
    """Whether the starter-only checks (10 x 6 grid, 20/20/20 split, shared policy) ran: for
    the built-in corpus and for copies whose manifest declares itself the starter."""
    version: str | None
    """Corpus version from `MANIFEST.json`; None when the manifest could not be read."""
    policy_id: str
    """Policy the corpus declares (`DEFAULT_POLICY_ID` when the manifest names none); an unknown
    one is also a problem, and its cases were then read in the default policy's format."""
    cases: AuthoredCases
    """Cases that parsed and matched the schema, in file-name order."""
    problems: list[Problem]
    """Every problem found, in the order checked; empty means the corpus is valid."""
    files: dict[str, str]
    """Relative path -> SHA-256 of every file as found on disk (manifest excluded)."""
    review_prompt: str | None
    """The shared review prompt text; None when it is missing or unreadable."""
    manifest_sha256: str | None
    """SHA-256 of `MANIFEST.json` itself (pins the whole corpus); None when missing."""

    @property
    def ok(self) -> bool:
        """True when no problem was found."""
        return not self.problems

    def decision_counts(self) -> dict[str, int]:
        """Reference decision -> number of parsed cases (authored answer key, not results)."""
        return dict(
            sorted(Counter(c.expectations.reference_decision.value for c in self.cases).items())
        )

    def grid(self) -> dict[str, dict[str, list[str]]]:
        """Group -> variant -> reference decisions of the parsed cases in that cell."""
        table: dict[str, dict[str, list[str]]] = {}
        for case in self.cases:
            cell = table.setdefault(case.group, {}).setdefault(case.variant, [])
            cell.append(case.expectations.reference_decision.value)
        return table


class Corpus(BaseModel):
    """A validated corpus, ready for export and grading."""

    model_config = documented(frozen=True)

    version: str
    """Corpus version from `MANIFEST.json`."""
    policy_id: str = DEFAULT_POLICY_ID
    """Policy the corpus declares; its `CorpusPolicy` object (`policy_for`) reads and grades it."""
    root: Path
    """The corpus folder."""
    cases: AuthoredCases
    """All cases, in file-name (= case id) order."""
    review_prompt: str
    """The shared advisory-review prompt (policy and response format; no answer)."""
    files: dict[str, str]
    """Relative path -> SHA-256 of every corpus file (all match `MANIFEST.json`)."""
    manifest_sha256: str
    """SHA-256 of `MANIFEST.json`; record it to pin exactly this corpus in an experiment."""
    _snapshot: CorpusSnapshot | None = PrivateAttr(default=None)
    """The bytes the corpus was parsed and validated from (see `file_data`)."""

    def file_data(self, rel: str) -> bytes | None:
        """The bytes of corpus file `rel` (`MANIFEST.json` included) as they were validated.

        None when unknown (a corpus built by hand, not loaded).
        """
        return None if self._snapshot is None else self._snapshot.data.get(rel)

    def with_snapshot(self, snapshot: CorpusSnapshot) -> Corpus:
        """Remember the bytes this corpus was parsed from and return it (its loaders call this)."""
        self._snapshot = snapshot
        return self

    def case(self, case_id: str) -> AuthoredCase:
        """The case with this id.

        Raises:
            InputError: No case has this id.
        """
        for case in self.cases:
            if case.case_id == case_id:
                return case  # type: ignore[return-value]
        raise InputError(f"no case {case_id!r} in the corpus at {self.root}")


def resolve_root(path: Path | None) -> tuple[Path, bool]:
    root = builtin_corpus_root() if path is None else Path(path)
    if not root.is_dir():
        raise InputError(f"corpus folder not found: {root}")
    return root, root.resolve() == builtin_corpus_root().resolve()


def validate_corpus(
    path: Path | None = None,
    *,
    starter: bool | None = None,
    check_manifest: bool = True,
    policy_id: str | None = None,
    snapshot: CorpusSnapshot | None = None,
) -> ValidationReport:
    """Validate a corpus folder and report every problem; never writes anything.

    Args:
        path: Corpus folder; None for the built-in starter.
        starter: Run the starter-only checks (grid, split, shared policy). Default: for the
            built-in corpus and any copy whose manifest declares `starter`; a user corpus may
            have any size and any groups.
        check_manifest: Compare files and counts against `MANIFEST.json` (off only while the
            manifest is being rewritten).
        policy_id: Check against this policy's format instead of the one the manifest declares
            (used while a manifest is being written for a new corpus).
        snapshot: The folder's files as already read (`CorpusSnapshot.take`); default: read
            now. Every check and every hash in the report comes from these bytes.

    Returns:
        The report; `report.ok` is False when any problem was found.

    Raises:
        InputError: The folder does not exist, or a file in it cannot be read.
    """
    root, is_builtin = resolve_root(path)
    if snapshot is None:
        snapshot = CorpusSnapshot.take(root)
    problems: list[Problem] = []
    manifest = read_manifest(snapshot, problems)
    declared_policy = policy_id or (manifest.policy_id if manifest else None) or DEFAULT_POLICY_ID
    if declared_policy not in known_policy_ids():
        problems.append(
            Problem(
                file=MANIFEST_NAME,
                pointer="/policy_id",
                message=f"policy {declared_policy!r} is not implemented by trustbench (known: "
                f"{', '.join(known_policy_ids())}); its cases cannot be checked or graded",
            )
        )
    policy = policy_for(declared_policy if declared_policy in known_policy_ids() else None)
    declared = manifest is not None and manifest.starter
    run_starter = (is_builtin or declared) if starter is None else starter
    case_files = load_cases(snapshot, problems, policy)
    check_schemas(snapshot, problems, policy)
    prompt = read_prompt(snapshot, problems)
    problems += policy.check_cases(case_files)
    all_parsed = len(case_files) == len(list((root / "cases").glob("*.json")))
    starter_problems = (
        policy.check_starter(case_files, prompt, complete=all_parsed) if run_starter else None
    )
    run_starter = starter_problems is not None  # a policy without a starter contract: no checks
    problems += starter_problems or []
    cases = [case for _, case in case_files]
    if manifest is not None and run_starter and manifest.version != BUILTIN_VERSION:
        problems.append(
            Problem(
                file=MANIFEST_NAME,
                pointer="/version",
                message=f"built-in corpus version must be {BUILTIN_VERSION!r}, "
                f"found {manifest.version!r}",
            )
        )
    files = snapshot.file_hashes()
    if check_manifest:
        if manifest is None and not (root / MANIFEST_NAME).exists():
            problems.append(
                Problem(
                    file=MANIFEST_NAME,
                    message="missing; write it with `trustbench rtb manifest --corpus DIR "
                    "--version V`",
                )
            )
        elif manifest is not None:
            problems += compare_manifest(manifest, files, cases if all_parsed else None)
    return ValidationReport(
        root=root,
        starter=run_starter,
        version=manifest.version if manifest else None,
        policy_id=declared_policy,
        cases=cases,
        problems=problems,
        files=files,
        review_prompt=prompt,
        manifest_sha256=snapshot.sha256(MANIFEST_NAME),
    )


def load_corpus(path: Path | None = None) -> Corpus:
    """Load a corpus, refusing one with any validation problem.

    Args:
        path: Corpus folder; None for the built-in starter.

    Returns:
        The validated corpus.

    Raises:
        InputError: The folder does not exist.
        CheckFailed: Validation found problems; the message names the first ones (file and
            JSON pointer) and how to see them all.
    """
    snapshot = CorpusSnapshot.take(resolve_root(path)[0])
    report = validate_corpus(path, snapshot=snapshot)
    if not report.ok:
        raise CheckFailed(failure_summary(report))
    if not (report.version and report.review_prompt is not None and report.manifest_sha256):
        raise CheckFailed(f"{report.root}: corpus validated but its manifest or prompt is missing")
    return Corpus(
        version=report.version,
        policy_id=report.policy_id,
        root=report.root,
        cases=report.cases,
        review_prompt=report.review_prompt,
        files=report.files,
        manifest_sha256=report.manifest_sha256,
    ).with_snapshot(snapshot)


def failure_summary(report: ValidationReport, limit: int = 5) -> str:
    """One message naming the first problems of a failed validation, with full file paths."""
    lines = [f"corpus at {report.root} has {len(report.problems)} problem(s):"]
    lines += [f"  {report.root}/{p}" for p in report.problems[:limit]]
    if len(report.problems) > limit:
        lines.append(
            f"  ... and {len(report.problems) - limit} more (see `trustbench rtb validate`)"
        )
    return "\n".join(lines)


def write_manifest(
    path: Path | None = None, version: str | None = None, policy_id: str | None = None
) -> CorpusManifest:
    """Rewrite `MANIFEST.json` for a corpus whose files are otherwise valid.

    Args:
        path: Corpus folder; None for the built-in starter.
        version: Corpus version to record; default: the version in the existing manifest.
        policy_id: Policy the corpus follows; default: the one in the existing manifest (none:
            `DEFAULT_POLICY_ID`, recorded by leaving the field out).

    Returns:
        The manifest written.

    Raises:
        InputError: No version given and none readable from an existing manifest.
        CheckFailed: The corpus has problems other than its manifest; nothing is written, so a
            manifest never certifies a broken corpus.
    """
    snapshot = CorpusSnapshot.take(resolve_root(path)[0])  # the bytes the manifest certifies
    previous = read_manifest(snapshot, [])
    chosen_policy = policy_id or (previous.policy_id if previous is not None else None)
    report = validate_corpus(path, check_manifest=False, policy_id=chosen_policy, snapshot=snapshot)
    problems = [p for p in report.problems if p.file != MANIFEST_NAME]
    if problems:
        raise CheckFailed(failure_summary(report.model_copy(update={"problems": problems})))
    chosen = version or report.version
    if not chosen:
        raise InputError(f"{report.root / MANIFEST_NAME}: no corpus version; pass --version")
    if report.starter and chosen != BUILTIN_VERSION:
        raise InputError(f"the built-in corpus is version {BUILTIN_VERSION}, not {chosen!r}")
    starter = report.starter or (previous is not None and previous.starter)
    recorded = None if chosen_policy in (None, DEFAULT_POLICY_ID) else chosen_policy
    manifest = build_manifest(
        report.files, chosen, report.cases, starter=starter, policy_id=recorded
    )
    (report.root / MANIFEST_NAME).write_text(manifest_text(manifest), encoding="utf-8")
    return manifest


# ------------------------------------------------------------------------------------------------
# Loading a corpus whose bytes a freeze already validated, without validating them again.
#
# `trustbench run` re-resolves a frozen experiment's inputs before its first trial and refuses any
# file that changed. Re-running every corpus check there (JSON Schema, model, leak scans, grid)
# on bytes that `freeze` already checked took about 0.15 s of every run's start-up, more than
# everything else the run does before its first trial together. When every corpus file hashes to
# exactly what the freeze recorded, and the trustbench source that froze it is this one (the
# manifest's source digest, not its version string), the checks would only repeat themselves:
# the corpus is parsed into its models (which still enforce their types) and nothing else. Any
# difference, or anything that fails to parse, falls back to the full validation with its usual
# messages. The hashes compared and the cases parsed come from one read of each file (in this
# module), so the bytes trusted are the bytes that matched.


def load_frozen_corpus(path: Path | None, frozen_files: Mapping[str, str]) -> Corpus:
    """Load a corpus; skip the checks when its files are exactly those a freeze validated.

    Args:
        path: Corpus folder; None for the built-in starter.
        frozen_files: Relative path -> SHA-256 of every corpus file, `MANIFEST.json` included,
            as the freeze recorded them (by this trustbench source: the caller checks that).

    Returns:
        The corpus, equal to what `load_corpus` returns for the same folder.

    Raises:
        InputError, CheckFailed: as `load_corpus`, when the files differ and validation fails.
    """
    trusted = _parsed_if_unchanged(path, frozen_files)
    return trusted if trusted is not None else load_corpus(path)


def _parsed_if_unchanged(path: Path | None, frozen_files: Mapping[str, str]) -> Corpus | None:
    root, _ = resolve_root(path)
    snapshot = CorpusSnapshot.take(root)
    files = snapshot.file_hashes()
    manifest_sha256 = snapshot.sha256(MANIFEST_NAME)
    if manifest_sha256 is None or {**files, MANIFEST_NAME: manifest_sha256} != dict(frozen_files):
        return None
    problems: list[Problem] = []
    document = snapshot.read_json(MANIFEST_NAME, problems)
    try:
        manifest = CorpusManifest.model_validate(document)
        policy_id = manifest.policy_id or DEFAULT_POLICY_ID
        if policy_id not in known_policy_ids():
            return None  # full validation reports it
        case_model = policy_for(policy_id).case_model
        cases: list[AuthoredCase] = []
        for rel in sorted(name for name in files if name.startswith("cases/")):
            # An instance of the policy's case model; `AuthoredCase` is what it has to offer.
            case = cast(AuthoredCase, case_model.model_validate(snapshot.read_json(rel, problems)))
            if problems or case.case_id != Path(rel).stem:
                return None
            cases.append(case)
        prompt = snapshot.data[PROMPT_PATH].decode("utf-8")
    except (ValidationError, KeyError, UnicodeDecodeError):
        return None
    if problems or not cases:
        return None
    return Corpus(
        version=manifest.version,
        policy_id=policy_id,
        root=root,
        cases=cases,
        review_prompt=prompt,
        files=files,
        manifest_sha256=manifest_sha256,
    ).with_snapshot(snapshot)


# ------------------------------------------------------------------------------------------------
# Where an RTB track's corpus is, and what of it (and of the harness) a manifest must pin.
#
# The reviewer, control-path and workflow tracks all resolve their corpus the same way: the
# built-in starter by version label, or a user folder relative to the spec. The manifest names the
# built-in one `builtin:v<version>` so a frozen run never depends on where the package is installed.

BUILTIN_LABEL = f"builtin:v{BUILTIN_VERSION}"
"""How a manifest names the default built-in corpus (`builtin:v<version>` names another)."""


def corpus_location(
    spec: ExperimentSpec, base_dir: Path, *, sealed_ok: bool = False
) -> tuple[Path, str]:
    """The corpus folder a spec names and the label the manifest records for it.

    Args:
        spec: The experiment spec.
        base_dir: The spec file's folder.
        sealed_ok: Whether the track can run a sealed held-out set (`HELDOUT.json`): only the
            reviewer track can, since its trials need only the set's clear inputs.

    Raises:
        InputError: an unknown built-in version (names the spec field), or a sealed held-out
            set given to a track that needs the answer key to run its trials.
    """
    if spec.corpus.builtin is not None:
        version = spec.corpus.builtin.removeprefix("v")
        if version not in BUILTIN_VERSIONS:
            known = ", ".join(f"v{v}" for v in BUILTIN_VERSIONS)
            raise InputError(
                f"unknown built-in corpus {spec.corpus.builtin!r} (known: {known})",
                location="corpus/builtin",
            )
        return builtin_corpus_root(version), f"builtin:v{version}"
    assert spec.corpus.path is not None  # the spec model requires builtin or path
    root = (base_dir / spec.corpus.path).resolve()
    if not sealed_ok and (root / "HELDOUT.json").is_file():
        raise InputError(
            f"track {spec.track_id} cannot run a sealed held-out set: its trials read grader-only "
            "case data (only rtb/review runs a sealed set without the key)",
            location="corpus/path",
        )
    return root, str(root)


def case_family(case: object) -> str | None:
    """A case's contrast family id (its `family`, or `authoring.family`), when it names one.

    A contrast-family corpus declares it on the case, grader-side: it is never
    exported to a candidate.
    """
    family = getattr(case, "family", None) or getattr(
        getattr(case, "authoring", None), "family", None
    )
    return family if isinstance(family, str) and family else None


def declared_subset(corpus: Corpus, families: Sequence[str] | None) -> Corpus:
    """The corpus restricted to the spec's `corpus.families`: those families' cases, each whole.

    Why whole families: a family holds the contrast (the same change permitted, denied and held
    on a detail) and its decision balance, so a subset of families keeps both; a sample of cases
    would keep neither. None (the field absent) is every case.

    Raises:
        InputError: the corpus's cases name no family, or a listed family is not in the
            corpus (naming `corpus/families` and the family).
    """
    if families is None:
        return corpus
    known = sorted({family for case in corpus.cases if (family := case_family(case))})
    if not known:
        raise InputError(
            f"corpus v{corpus.version}'s cases name no contrast family: run it without "
            "corpus.families",
            location="corpus/families",
        )
    for family in families:
        if family not in known:
            raise InputError(
                f"unknown contrast family {family!r} in corpus v{corpus.version}"
                f"{did_you_mean(family, known)} ({len(known)} families)",
                location="corpus/families",
            )
    kept = set(families)
    return corpus.model_copy(
        update={"cases": [case for case in corpus.cases if case_family(case) in kept]}
    )


def corpus_folder(label: str) -> Path:
    """The folder behind a manifest's `corpus.root` (`builtin:<version>` or a path)."""
    if label.startswith("builtin:"):
        return builtin_corpus_root(label.removeprefix("builtin:"))
    return Path(label)


def corpus_items(root: Path, corpus: Corpus) -> list[ResolvedItem]:
    """Every corpus file, `MANIFEST.json` included, as manifest inputs to hash.

    Each carries the bytes the corpus was validated from (`Corpus.file_data`), so the manifest
    pins what was checked.
    """
    return [
        ResolvedItem("corpus", name, path=root / name, data=corpus.file_data(name))
        for name in sorted({*corpus.files, "MANIFEST.json"})
    ]


def harness_code_items(patterns: tuple[str, ...]) -> list[ResolvedItem]:
    """The package's own grading and platform code matching `patterns`, as manifest inputs.

    Pinning this code means a report re-graded later is refused if the grader changed.
    """
    package = Path(str(files("trustbench")))
    return [
        ResolvedItem("harness_code", path.relative_to(package).as_posix(), path=path)
        for pattern in patterns
        for path in sorted(package.glob(pattern))
    ]
