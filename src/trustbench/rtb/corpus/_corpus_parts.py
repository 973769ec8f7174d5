"""Reading each part of a corpus from its snapshot: cases, schemas, prompt and manifest.

Each reader appends what is wrong to `problems` (file, JSON pointer, message) and returns what
did parse, so `validate_corpus` reports every problem of a corpus in one pass.
"""

from __future__ import annotations

from typing import cast

from pydantic import ValidationError

from trustbench.rtb.corpus._jsondoc import Problem, json_pointer, schema_problems
from trustbench.rtb.corpus._manifest import MANIFEST_NAME, CorpusManifest
from trustbench.rtb.corpus._schemas import SCHEMA_FILES, schema_documents
from trustbench.rtb.corpus._snapshot import CorpusSnapshot
from trustbench.rtb.policy._protocol import AuthoredCase, CorpusPolicy

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
