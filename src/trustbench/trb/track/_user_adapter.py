"""A submitted `MODULE:FACTORY` adapter: located without importing it, checked in its worker.

Its code is untrusted, so it never runs in the harness process (see `trb.isolation`): the
conformance kit runs inside the sandboxed worker, and its code (the factory's file and its whole
package) is hashed for the manifest without being imported. A frozen run's inputs are re-checked
(`verify`, `report`, and `run` before its first trial) from those files alone: no worker starts
until they match the manifest.
"""

from __future__ import annotations

from trustbench.core import CandidateSpec, ResolvedItem, entry_code_items
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
    return worker, adapter_code_items(candidate, target)


def adapter_code_items(candidate: CandidateSpec, target: str) -> list[ResolvedItem]:
    """The adapter's code the manifest pins, found without importing any of it.

    Core's `entry_code_items`, as for an in-process candidate: the factory's file and its whole
    top-level package (or, for a lone module, the sibling modules it imports), so a helper the
    adapter imports cannot change after the run unseen. `find_spec` on a dotted name would
    import the parent packages in the harness process; core's search never does.

    Raises:
        InputError: the adapter's module cannot be found.
    """
    _module_paths(
        target
    )  # the working folder importable, as for the worker; a missing module named
    return entry_code_items(target, f"candidate {candidate.name}")
