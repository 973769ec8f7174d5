"""Seal a corpus into a held-out set folder, verify its pins, and open it with the owner's key.

A sealed set folder holds:

- clear (what a candidate may see): `inputs/<evaluation_id>.json`, `review_prompt.md`,
  `reviewer_response.schema.json`, exactly as `rtb export` writes them;
- sealed: `sealed/answer_key.seal`, one `trustbench-seal-v1` envelope holding every corpus file
  (cases with expectations and authoring metadata, schemas, prompt, `MANIFEST.json`), the
  export's `grader/evaluation_map.json` and `grader/binding.json`: the set's identity and budget
  as sealed (`BOUND_FIELDS`). A custodian who edits `budget` in `HELDOUT.json` cannot re-seal
  (that needs the answer key in the clear), so the owner's report finds the two differ;
- `HELDOUT.json`: the set's manifest (set id, case count, budget, recipient key, format) pinning
  the SHA-256 of every clear file and of the sealed file;
- `exposure.jsonl`: the append-only exposure log (`_pipeline.py`).

Nothing grader-only is written to the set folder in the clear: the export runs in a temporary
folder and only its candidate-visible files are copied over.

A case whose candidate-visible structure equals a shipped public corpus's case (`public_matches`:
proposal and evidence compared after normalisation, free-text wording left out) is no held-out
case at all: sealing refuses it, or with `force` records it in `HELDOUT.json`, and every report
of the set flags it.
"""

from __future__ import annotations

import base64
import json
import secrets
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from trustbench._canonical import canonical_json, sha256_hex
from trustbench.errors import InputError

HELDOUT_NAME = "HELDOUT.json"
SEALED_PATH = "sealed/answer_key.seal"
CLEAR_FILES = ("review_prompt.md", "reviewer_response.schema.json")
HELDOUT_FORMAT = "trustbench-heldout-v1"
BINDING_PATH = "grader/binding.json"
BOUND_FIELDS = ("set_id", "budget", "case_count", "recipient", "policy_id", "corpus_version")
"""`HELDOUT.json` fields sealed with the answer key: the owner's report refuses a set whose
clear manifest differs from them (an edited budget above all)."""
FREE_TEXT_FIELDS = frozenset(
    {"task", "text", "title", "note", "notes", "summary", "description", "comment", "message",
     "body", "reason", "evaluation_id"}
)  # fmt: skip
"""Fields whose wording a copier may change freely: left out when matching public cases."""


def _aad(set_id: str) -> str:
    return f"{HELDOUT_FORMAT}:{set_id}"


def _clear_files(folder: Path) -> dict[str, str]:
    rels = [*CLEAR_FILES, *(f"inputs/{p.name}" for p in sorted((folder / "inputs").glob("*")))]
    return {rel: sha256_hex((folder / rel).read_bytes()) for rel in rels}


def _is_builtin(manifest_sha256: str) -> bool:
    from trustbench.rtb.corpus._load import BUILTIN_VERSIONS, builtin_corpus_root

    return any(
        sha256_hex((builtin_corpus_root(v) / "MANIFEST.json").read_bytes()) == manifest_sha256
        for v in BUILTIN_VERSIONS
    )


def _structure(value: Any) -> Any:
    """A value with free text and absent fields left out, leaves normalised, list order ignored."""
    from trustbench.rtb.corpus._normalise import normalise_value

    if isinstance(value, dict):
        return {
            key: _structure(item)
            for key, item in sorted(value.items())
            if key not in FREE_TEXT_FIELDS and item is not None
        }
    if isinstance(value, list):
        return sorted((_structure(item) for item in value), key=_sort_key)
    return normalise_value(value)


def _sort_key(value: Any) -> str:
    # The normaliser gives a time with an offset as its UTC instant (a datetime): written in
    # ISO form, so one instant in any offset fingerprints the same.
    return json.dumps(value, sort_keys=True, default=_instant_text)


def _instant_text(value: Any) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"not JSON: {type(value).__name__}")


def case_fingerprint(case: dict[str, Any]) -> str:
    """SHA-256 of a case file's proposal and evidence, free-text wording aside.

    Two cases with the same fingerprint pose the same decision: a suffix added to the task or
    a reworded note does not make a public case new. Read from the case files' JSON (not the
    validated models), so the shipped corpora are fingerprinted without validating them again.
    """
    decision = {"proposal": case.get("proposal"), "evidence": case.get("evidence")}
    return sha256_hex(_sort_key(_structure(decision)).encode("utf-8"))


def _case_files(root: Path, names: Iterable[str]) -> Iterator[dict[str, Any]]:
    """The JSON of every `cases/*.json` file among `names` (paths relative to `root`)."""
    for rel in sorted(names):
        if rel.startswith("cases/") and rel.endswith(".json"):
            case = json.loads((root / rel).read_bytes())
            if isinstance(case, dict):
                yield case


def public_matches(corpus: Any) -> list[dict[str, str]]:
    """Each case of `corpus` whose fingerprint equals a shipped public corpus's case."""
    from trustbench.rtb.corpus._load import BUILTIN_VERSIONS, builtin_corpus_root

    public: dict[str, tuple[str, str]] = {}
    for version in BUILTIN_VERSIONS:
        root = builtin_corpus_root(version)
        files = json.loads((root / "MANIFEST.json").read_bytes())["files"]
        for case in _case_files(root, files):
            public.setdefault(case_fingerprint(case), (f"v{version}", str(case.get("case_id"))))
    matches = []
    for case in _case_files(corpus.root, corpus.files):
        found = public.get(case_fingerprint(case))
        if found is not None:
            matches.append(
                {"case": str(case.get("case_id")), "corpus": found[0], "public_case": found[1]}
            )
    return matches


def _refuse_public(matches: list[dict[str, str]], force: bool) -> None:
    if matches and not force:
        first = matches[0]
        raise InputError(
            f"{len(matches)} case(s) match a shipped public corpus after normalisation (first: "
            f"{first['case']} = {first['corpus']} {first['public_case']}): a candidate can look "
            "their labels up, so they are not held out; remove them, or seal with --force to "
            "have every report flag them",
            location=first["case"],
        )


def read_binding(opened: Path) -> dict[str, Any] | None:
    """The identity and budget sealed with the answer key (None: sealed before binding)."""
    path = opened / BINDING_PATH
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def binding_problems(manifest: dict[str, Any], binding: dict[str, Any] | None) -> list[str]:
    """Each `HELDOUT.json` field that differs from what the seal binds (needs the opened seal)."""
    if binding is None:
        return [f"the seal binds no budget or identity ({BINDING_PATH} missing): re-seal the set"]
    return [
        f"{HELDOUT_NAME} {field} is {manifest.get(field)!r} but the seal binds "
        f"{binding.get(field)!r} (edited {field})"
        for field in BOUND_FIELDS
        if manifest.get(field) != binding.get(field)
    ]


def seal_corpus(
    corpus_root: Path | None,
    recipient: str,
    out: Path,
    *,
    budget: int,
    set_id: str | None = None,
    sealed_by: str = "",
    at: str = "",
    force: bool = False,
) -> dict[str, Any]:
    """Seal a corpus into `out` (which must not exist or be empty); returns the set manifest.

    Refuses cases that match a shipped public corpus (`public_matches`) unless `force`, which
    records them in the manifest so that every report flags them.
    """
    from trustbench.rtb.corpus._export import export_candidate_inputs
    from trustbench.rtb.corpus._load import load_corpus
    from trustbench.rtb.heldout._crypto import SEAL_FORMAT, parse_public, seal

    parse_public(recipient)
    if budget < 1:
        raise InputError("--budget must be at least 1 evaluation")
    if out.exists() and any(out.iterdir()):
        raise InputError("the held-out set folder already holds files", location=str(out))
    corpus = load_corpus(corpus_root)
    if _is_builtin(corpus.manifest_sha256):
        raise InputError(
            "this corpus ships inside the installed package with its answer key in the clear; "
            "sealing a copy would hide nothing: seal a corpus of your own"
        )
    matches = public_matches(corpus)
    _refuse_public(matches, force)
    set_id = set_id or f"heldout-{secrets.randbits(64):016x}"
    bound = {
        "set_id": set_id, "budget": budget, "case_count": len(corpus.cases),
        "recipient": recipient.strip(), "policy_id": corpus.policy_id,
        "corpus_version": corpus.version,
    }  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        exported = export_candidate_inputs(corpus, Path(tmp) / "export")
        payload: dict[str, str] = {}
        for rel in [*sorted(corpus.files), "MANIFEST.json"]:
            data = corpus.file_data(rel)
            if data is None:
                data = (corpus.root / rel).read_bytes()
            payload[f"corpus/{rel}"] = base64.b64encode(data).decode("ascii")
        payload["grader/evaluation_map.json"] = base64.b64encode(
            exported.grader_map_path.read_bytes()
        ).decode("ascii")
        payload[BINDING_PATH] = base64.b64encode(canonical_json(bound)).decode("ascii")
        out.mkdir(parents=True, exist_ok=True)
        shutil.copytree(exported.inputs_dir, out / "inputs")
        for rel in CLEAR_FILES:
            shutil.copyfile(exported.out_dir / rel, out / rel)
    envelope = seal(canonical_json(payload), recipient, _aad(set_id))
    (out / SEALED_PATH).parent.mkdir(parents=True, exist_ok=True)
    (out / SEALED_PATH).write_bytes(envelope)
    manifest = {
        "format": HELDOUT_FORMAT,
        **bound,
        "seal_format": SEAL_FORMAT,
        "sealed_by": sealed_by,
        "sealed_at": at,
        "withheld": "case expectations, authoring metadata, corpus manifest and the "
        "evaluation-id map (the answer key), encrypted to the set owner's key",
        # The public cases only: which sealed case matched is part of the answer key.
        "public_matches": [
            {"corpus": m["corpus"], "public_case": m["public_case"]} for m in matches
        ],
        "clear_files": _clear_files(out),
        "sealed_files": {SEALED_PATH: sha256_hex(envelope)},
    }
    (out / HELDOUT_NAME).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def read_set_manifest(folder: Path) -> dict[str, Any]:
    """The set's `HELDOUT.json`, refusing a folder that is not a held-out set."""
    path = folder / HELDOUT_NAME
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise InputError(
            "not a held-out set folder (no HELDOUT.json)", location=str(folder)
        ) from exc
    except (OSError, ValueError) as exc:
        raise InputError(f"unreadable {HELDOUT_NAME}: {exc}", location=str(path)) from exc
    if not isinstance(manifest, dict) or manifest.get("format") != HELDOUT_FORMAT:
        raise InputError(f"{HELDOUT_NAME} is not in format {HELDOUT_FORMAT}", location=str(path))
    return manifest


def pin_problems(folder: Path, manifest: dict[str, Any]) -> list[str]:
    """Every clear or sealed file that differs from, is missing from or was added to the pins."""
    problems: list[str] = []
    pinned = {**manifest.get("clear_files", {}), **manifest.get("sealed_files", {})}
    for rel, digest in sorted(pinned.items()):
        path = folder / rel
        if not path.is_file():
            problems.append(f"{rel}: pinned file is missing")
        elif sha256_hex(path.read_bytes()) != digest:
            problems.append(f"{rel}: bytes differ from the pin in {HELDOUT_NAME}")
    for path in sorted((folder / "inputs").glob("*")):
        if f"inputs/{path.name}" not in pinned:
            problems.append(f"inputs/{path.name}: not pinned (added after sealing)")
    return problems


def open_set(folder: Path, private_key: str, into: Path) -> dict[str, Any]:
    """Decrypt the grader-only parts into `into/corpus/` and `into/grader/`; returns the manifest.

    Refuses a set whose pinned bytes changed, so a grader never scores against altered files.
    """
    # The cipher suite (cryptography) is imported by the commands that seal or open a set: a
    # run reads the clear parts and pins only, never a key.
    from trustbench.rtb.heldout._crypto import unseal

    manifest = read_set_manifest(folder)
    problems = pin_problems(folder, manifest)
    if problems:
        raise InputError("held-out set altered since sealing: " + "; ".join(problems))
    envelope = (folder / SEALED_PATH).read_bytes()
    payload = json.loads(unseal(envelope, private_key, _aad(manifest["set_id"])))
    for rel, data in payload.items():
        target = into / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(base64.b64decode(data))
    return manifest
