"""Seal a corpus into a held-out set folder, verify its pins, and open it with the owner's key.

A sealed set folder holds:

- clear (what a candidate may see): `inputs/<evaluation_id>.json`, `review_prompt.md`,
  `reviewer_response.schema.json`, exactly as `rtb export` writes them;
- sealed: `sealed/answer_key.seal`, one `trustbench-seal-v1` envelope holding every corpus file
  (cases with expectations and authoring metadata, schemas, prompt, `MANIFEST.json`) and the
  export's `grader/evaluation_map.json`;
- `HELDOUT.json`: the set's manifest (set id, case count, budget, recipient key, format) pinning
  the SHA-256 of every clear file and of the sealed file;
- `exposure.jsonl`: the append-only exposure log (`_pipeline.py`).

Nothing grader-only is written to the set folder in the clear: the export runs in a temporary
folder and only its candidate-visible files are copied over.
"""

from __future__ import annotations

import base64
import json
import secrets
import shutil
import tempfile
from pathlib import Path
from typing import Any

from trustbench._canonical import canonical_json, sha256_hex
from trustbench.errors import InputError

HELDOUT_NAME = "HELDOUT.json"
SEALED_PATH = "sealed/answer_key.seal"
CLEAR_FILES = ("review_prompt.md", "reviewer_response.schema.json")
HELDOUT_FORMAT = "trustbench-heldout-v1"


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


def seal_corpus(
    corpus_root: Path | None,
    recipient: str,
    out: Path,
    *,
    budget: int,
    set_id: str | None = None,
    sealed_by: str = "",
    at: str = "",
) -> dict[str, Any]:
    """Seal a corpus into `out` (which must not exist or be empty); returns the set manifest."""
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
    set_id = set_id or f"heldout-{secrets.randbits(64):016x}"
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
        out.mkdir(parents=True, exist_ok=True)
        shutil.copytree(exported.inputs_dir, out / "inputs")
        for rel in CLEAR_FILES:
            shutil.copyfile(exported.out_dir / rel, out / rel)
    envelope = seal(canonical_json(payload), recipient, _aad(set_id))
    (out / SEALED_PATH).parent.mkdir(parents=True, exist_ok=True)
    (out / SEALED_PATH).write_bytes(envelope)
    manifest = {
        "format": HELDOUT_FORMAT,
        "set_id": set_id,
        "corpus_version": corpus.version,
        "policy_id": corpus.policy_id,
        "case_count": len(corpus.cases),
        "budget": budget,
        "recipient": recipient.strip(),
        "seal_format": SEAL_FORMAT,
        "sealed_by": sealed_by,
        "sealed_at": at,
        "withheld": "case expectations, authoring metadata, corpus manifest and the "
        "evaluation-id map (the answer key), encrypted to the set owner's key",
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
