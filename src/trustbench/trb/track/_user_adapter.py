"""A submitted `MODULE:FACTORY` adapter: located without importing it, checked in its worker.

Its code is untrusted, so it never runs in the harness process (see `trb.isolation`): the
conformance kit runs inside the sandboxed worker, and the module's file is hashed for the
manifest without being imported.
"""

from __future__ import annotations

from pathlib import Path

from trustbench.core import CandidateSpec, ResolvedItem
from trustbench.core.runs import CANDIDATE_PACKAGE_ROLE, MAX_CANDIDATE_PACKAGE_FILES
from trustbench.errors import CheckFailed, InputError
from trustbench.trb.adapter._conformance import ConformanceCheck
from trustbench.trb.isolation._client import (
    AdapterWorker,
    _module_paths,
    read_paths,
    refuse_overlap,
)
from trustbench.trb.reference import cache_dir
from trustbench.trb.track._corpus_source import LoadedCorpus
from trustbench.trb.track._options import TrbTrackOptions


def user_adapter(
    candidate: CandidateSpec, target: str, corpus: LoadedCorpus, options: TrbTrackOptions
) -> tuple[AdapterWorker, list[ResolvedItem]]:
    """A `MODULE:FACTORY` candidate's sandboxed worker (after the conformance kit) and files.

    Raises:
        InputError: a malformed target, or a readable path holding the corpus or the cache.
        CheckFailed: the worker cannot start, or the adapter fails the conformance kit.
    """
    if ":" not in target.strip(":") or target.count(":") != 1:
        raise InputError(f"expected MODULE:FACTORY, got {target!r}", location=candidate.name)
    read, roots = read_paths(target, options.adapter_read_paths)
    refuse_overlap(
        [p for p in read if not p.startswith(("/usr", "/lib", "/bin", "/etc", "/dev"))],
        {"corpus": corpus.folder, "TRB cache": cache_dir()},
    )
    worker = AdapterWorker(target, read, roots)
    try:
        results = [ConformanceCheck.model_validate(r) for r in
                   worker.conformance(options.conformance_traces)]  # fmt: skip
    except Exception as error:
        worker.close()
        raise CheckFailed(
            f"adapter {target} could not be started in its sandboxed worker: {error}",
            location=f"candidate {candidate.name}",
        ) from None
    failed = [r for r in results if not r.passed]
    if failed:
        first = failed[0]
        worker.close()
        raise CheckFailed(
            f"adapter {target} fails the conformance kit ({len(failed)} check(s)); first: "
            f"{first.hook} / {first.check}: {first.detail}",
            location=f"candidate {candidate.name}",
        )
    items = []
    source_file = _source_file(target)
    if source_file is not None:
        items.append(ResolvedItem("candidate_code", target, path=source_file))
    items += _package_items(target)  # the adapter's package as a whole, not its entry file
    return worker, items


def _package_items(target: str) -> list[ResolvedItem]:
    """The files of the factory's top-level package (or its single module), unimported."""
    top = target.partition(":")[0].split(".")[0]
    folders, _ = _module_paths(target)
    items: dict[str, ResolvedItem] = {}
    for root in map(Path, folders):
        files = [root] if root.is_file() else sorted(
            p for p in root.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
        )  # fmt: skip
        for path in files:
            name = top if root.is_file() else f"{top}/{path.relative_to(root).as_posix()}"
            items.setdefault(name, ResolvedItem(CANDIDATE_PACKAGE_ROLE, name, path=path))
        if len(items) > MAX_CANDIDATE_PACKAGE_FILES:
            raise InputError(
                f"the candidate's package {top!r} holds more than {MAX_CANDIDATE_PACKAGE_FILES} "
                "files: put the factory in a package of its own",
                location=target,
            )
    return list(items.values())


def _source_file(target: str) -> Path | None:
    """The factory module's file, located without importing it (its code is untrusted)."""
    from importlib.util import find_spec

    module = target.partition(":")[0]
    try:  # a dotted name imports its parent packages, never the module itself
        spec = find_spec(module)
    except (ImportError, ValueError):
        return None
    origin = None if spec is None else spec.origin
    return Path(origin) if origin and Path(origin).is_file() else None
