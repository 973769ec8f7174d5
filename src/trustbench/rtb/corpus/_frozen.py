"""Loading a corpus whose bytes a freeze already validated, without validating them again.

`trustbench run` re-resolves a frozen experiment's inputs before its first trial and refuses any
file that changed. Re-running every corpus check there (JSON Schema, model, leak scans, grid)
on bytes that `freeze` already checked took about 0.15 s of every run's start-up, more than
everything else the run does before its first trial together. When every corpus file hashes to
exactly what the freeze recorded, and the trustbench that froze it is this one, the checks would
only repeat themselves: the corpus is parsed into its models (which still enforce their types)
and nothing else. Any difference, or anything that fails to parse, falls back to the full
validation with its usual messages. The hashes compared and the cases parsed come from one read
of each file (`_snapshot`), so the bytes trusted are the bytes that matched.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import cast

from pydantic import ValidationError

from trustbench.rtb.corpus._jsondoc import Problem
from trustbench.rtb.corpus._load import PROMPT_PATH, Corpus, load_corpus, resolve_root
from trustbench.rtb.corpus._manifest import MANIFEST_NAME, CorpusManifest
from trustbench.rtb.corpus._snapshot import CorpusSnapshot
from trustbench.rtb.policy._default import DEFAULT_POLICY_ID
from trustbench.rtb.policy._protocol import AuthoredCase
from trustbench.rtb.policy._registry import known_policy_ids, policy_for


def load_frozen_corpus(path: Path | None, frozen_files: Mapping[str, str]) -> Corpus:
    """Load a corpus; skip the checks when its files are exactly those a freeze validated.

    Args:
        path: Corpus folder; None for the built-in starter.
        frozen_files: Relative path -> SHA-256 of every corpus file, `MANIFEST.json` included,
            as the freeze recorded them (by this trustbench version: the caller checks that).

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
