"""Checks `freeze` makes before anything runs: every name a spec uses must mean something.

A misspelled gate metric, a gate naming a candidate that does not exist, or an unset API-key
variable would otherwise pass the freeze, spend the whole budget, and leave the gate "not
evaluable". Each check raises a one-line `InputError` naming the spec field (JSON-pointer style,
as `_spec.py` does).

Tracks opt in to the metric and subject checks by implementing the optional hooks
`figure_names(spec) -> set[str]` (every figure name the track can produce for this spec; each
a proportion in [0, 1], so a gate's threshold on one must lie there too),
`subject_names(spec) -> set[str]` (every configuration a gate may name; default: the candidates)
and `reserved_names(spec) -> set[str]` (the configurations the harness itself adds, such as the
reviewer track's `unchecked` baseline: a candidate may not take one of those names, since a role
comes from how a configuration is declared and a shared name would let one pass for the other).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from trustbench._canonical import json_sha256
from trustbench.core._spec import ExperimentSpec
from trustbench.core.gates import GateSpec
from trustbench.errors import InputError

ALWAYS_PRODUCED = frozenset({"valid_response_rate"})
"""Figures core adds to every subject (see `_evaluability`); a proportion."""


def check_api_keys(spec: ExperimentSpec, *, allow_missing: bool) -> None:
    """Every `api_key_env` must name a set, non-empty variable (unless explicitly allowed).

    Only the variable's presence is checked; its value is never read into the manifest.
    """
    if allow_missing:
        return
    for index, candidate in enumerate(spec.candidates):
        name = candidate.api_key_env
        if name and not os.environ.get(name):
            raise InputError(
                f"environment variable {name} (candidate {candidate.name}) is not set; set it "
                "or freeze with --allow-missing-keys",
                location=f"candidates/{index}/api_key_env",
            )


def _hook_names(track: Any, hook: str, spec: ExperimentSpec) -> set[str] | None:
    """The names a track's optional hook gives for `spec`; None when the track has no such hook."""
    named: Callable[[ExperimentSpec], Iterable[str]] | None = getattr(track, hook, None)
    return set(named(spec)) if callable(named) else None


def check_names(spec: ExperimentSpec, track: Any) -> None:
    """Every name the spec gives (its candidates') or uses (its gates') must be what it says."""
    check_reserved_names(spec, track)
    check_gates(spec, track)


def check_reserved_names(spec: ExperimentSpec, track: Any) -> None:
    """No candidate may take the name of a configuration the harness adds (`reserved_names`).

    A candidate named `unchecked` in the reviewer track would share every per-name table with
    the built-in baseline (its figures, its record, its gates), so a reader, or a check keyed
    by name, could take one for the other; it is refused instead of being told apart.
    """
    reserved = _hook_names(track, "reserved_names", spec) or set()
    for index, candidate in enumerate(spec.candidates):
        if candidate.name in reserved:
            raise InputError(
                f"candidate name {candidate.name!r} is reserved: track {spec.track_id} adds a "
                "built-in configuration of that name; rename the candidate",
                location=f"candidates/{index}/name",
            )


def _check_gate_values(gate: GateSpec, where: str, *, proportion: bool) -> None:
    """A gate that gates something, against a threshold its figure can take.

    `candidates = []` written out would gate no configuration while reading as a gate (the
    field left out means every configuration); a proportion's threshold outside [0, 1] is one
    no figure can meet or one every figure meets, a typo either way.
    """
    if "candidates" in gate.model_fields_set and not gate.candidates:
        raise InputError(
            "an empty list gates nothing; name configurations, or leave the field out to "
            "gate every one",
            location=f"{where}/candidates",
        )
    if proportion and not 0.0 <= gate.threshold <= 1.0:
        raise InputError(
            f"{gate.metric} is a proportion, so its threshold must lie in [0, 1] (5% is 0.05); "
            f"got {gate.threshold:g}",
            location=f"{where}/threshold",
        )


def check_gates(spec: ExperimentSpec, track: Any) -> None:
    """Gate metrics must be figures the track produces; gate candidates must be its subjects."""
    subjects = _hook_names(track, "subject_names", spec)
    if subjects is None:
        subjects = {c.name for c in spec.candidates}
    declared = _hook_names(track, "figure_names", spec)
    figures = None if declared is None else declared | ALWAYS_PRODUCED
    for index, gate in enumerate(spec.gates):
        if figures is not None and gate.metric not in figures:
            raise InputError(
                f"unknown metric {gate.metric!r} for track {spec.track_id}; it produces: "
                f"{', '.join(sorted(figures))}",
                location=f"gates/{index}/metric",
            )
        proportion = figures is not None or gate.metric in ALWAYS_PRODUCED
        _check_gate_values(gate, f"gates/{index}", proportion=proportion)
        for name in gate.candidates:
            if name not in subjects:
                raise InputError(
                    f"gate names {name!r}, which is not a configuration of this experiment "
                    f"(known: {', '.join(sorted(subjects))})",
                    location=f"gates/{index}/candidates",
                )


def check_references(spec: ExperimentSpec, base_dir: Path) -> None:
    """Every run folder a spec refers to must exist now and hold the manifest it pins.

    A human participant's `recommendation` names an earlier run and its manifest hash; a spec
    pinning a folder that does not exist (or a hash of 64 zeros) would freeze, and fail only
    when the participant is served. The manifest's own hash is recomputed here (as
    `read_manifest` does; that module imports this one).
    """
    for index, candidate in enumerate(spec.candidates):
        participant = candidate.participant
        recommendation = participant.recommendation if participant is not None else None
        if recommendation is None:
            continue
        where = f"/candidates/{index}/participant/recommendation"
        run = Path(recommendation.run)
        folder = run if run.is_absolute() else base_dir / run
        path = folder / "manifest.json"
        if not folder.is_dir():
            raise InputError(f"run folder {recommendation.run!r} does not exist", location=where)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            stored = data.pop("manifest_sha256")
        except (OSError, ValueError, RecursionError, AttributeError, KeyError, TypeError):
            raise InputError(
                f"run folder {recommendation.run!r} holds no readable manifest.json",
                location=where,
            ) from None
        if stored != json_sha256(data):
            raise InputError(
                f"the manifest.json of {recommendation.run!r} changed after its freeze",
                location=where,
            )
        if stored != recommendation.manifest_sha256:
            raise InputError(
                f"manifest_sha256 {recommendation.manifest_sha256[:12]}… is not the manifest of "
                f"{recommendation.run!r} ({stored[:12]}…)",
                location=where,
            )


def located_in_spec(error: InputError, source: str) -> InputError:
    """`error` located in the spec file when its location is a pointer into the spec.

    The freeze's checks and a track's `resolve` name the field they refuse as a pointer into
    the spec (`gates/0/metric`, `/candidates/0/participant/recommendation`) without knowing
    the file; the message then reads `SPEC#/gates/0/metric: ...`, as a validation error's
    does. Any other location (a corpus file, a run folder, `SPEC#/...` already) is kept.
    """
    location = (error.location or "").lstrip("/")
    if "#" in location or location.partition("/")[0] not in ExperimentSpec.model_fields:
        return error
    return type(error)(error.message, location=f"{source}#/{location}")


@contextmanager
def in_spec(source: str) -> Iterator[None]:
    """Within: an `InputError` pointing into the spec is re-raised located in `source`."""
    try:
        yield
    except InputError as error:
        raise located_in_spec(error, source) from None
