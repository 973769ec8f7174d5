"""TRB, the Trace AI Reflection Benchmark: does a self-representation govern action?

Each public name has one home, its subpackage: the adapter contract (`trustbench.trb.adapter`:
`Adapter`, `AdapterTier`, `SelfReport`, `StepContext`, `OverrideUnsupported`, the conformance
kit), the exact reference world (`trustbench.trb.world`), the corpus format
(`trustbench.trb.corpus`), the tracks as measures of the profile (`trustbench.trb.track`; the
governance gap and the building blocks of the tracks in `trustbench.trb.measures`), the proxy
adapters (`trustbench.trb.proxy`), the oracle audit and Goodhart cheats
(`trustbench.trb.instruments`), the reference run and the five-baseline profile
(`trustbench.trb.profile`). This package exports one name of its own, `measure_profile`, the
library's way to the profile a `trb run` reports; importing it loads nothing heavy (the `trb`
command group imports this package).
"""

from __future__ import annotations

from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trustbench.core import ExperimentSpec, Manifest
    from trustbench.trb.track._profile_track import TrbProfile

__all__ = ["measure_profile"]


def measure_profile(
    source: str | PathLike[str] | ExperimentSpec, *, base_dir: str | PathLike[str] | None = None
) -> TrbProfile:
    """The TRB profile vector and governance gap of a spec or frozen run, measured here.

    The same numbers `trustbench trb run` writes to `record.json` (`trb.profile` and
    `trb.governance_gap`) for that spec: the track's trials are run in this process (no ledger)
    and scored by the report's code, so a library user and the report cannot disagree. Named
    `measure_profile`, not `profile`: `trustbench.trb.profile` is the reference-run package.

    Example:
        >>> from trustbench.trb import measure_profile
        >>> from trustbench.trb.track import builtin_spec
        >>> result = measure_profile(builtin_spec("smoke"))  # trains small models on first use
        >>> result.profile["trace-ai-full"]["G"]["value"]  # G* of the full reference model
        >>> result.governance_gap["estimate"]  # Delta_gov = G(full) - G(ablation)

    Args:
        source: A `trb/profile` spec file (TOML or JSON), a loaded `ExperimentSpec`, or a
            frozen run: its folder or its `manifest.json` (its pinned corpus is re-checked).
        base_dir: Folder the spec's relative paths are read from (default: the spec file's
            folder; the current folder for a loaded spec). Ignored for a frozen run.

    Returns:
        `TrbProfile`: `profile` (candidate -> axis -> entry), `governance_gap`, `figures`.

    Raises:
        InputError: the source is neither a spec nor a run, or the spec is invalid (naming the
            file and field), or it is not a `trb/profile` spec.
        CheckFailed: a frozen run's manifest or corpus no longer matches its hashes.
    """
    from trustbench.errors import InputError
    from trustbench.trb.track._profile_track import profile_of_manifest

    manifest = _manifest_of(source, None if base_dir is None else Path(base_dir))
    if manifest.spec.track_id != "trb/profile":
        raise InputError(
            f"not a TRB profile spec (track {manifest.spec.track_id!r})", location="track"
        )
    return profile_of_manifest(manifest)


def _manifest_of(source: str | PathLike[str] | ExperimentSpec, base_dir: Path | None) -> Manifest:
    """A frozen run's manifest, or a spec frozen in memory as `trustbench freeze` freezes it."""
    import json
    import tempfile

    from trustbench.core import ExperimentSpec, build_manifest, read_manifest

    if isinstance(source, ExperimentSpec):
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "spec.json"
            path.write_text(json.dumps(source.model_dump(mode="json", exclude_unset=True)))
            return build_manifest(path, base_dir=base_dir or Path.cwd())
    path = Path(source)
    if path.is_dir():
        return read_manifest(path)
    if path.name == "manifest.json":
        return read_manifest(path.parent)
    return build_manifest(path, base_dir=base_dir)
