"""Checks `freeze` makes before anything runs: every name a spec uses must mean something.

A misspelled gate metric, a gate naming a candidate that does not exist, or an unset API-key
variable would otherwise pass the freeze, spend the whole budget, and leave the gate "not
evaluable". Each check raises a one-line `InputError` naming the spec field (JSON-pointer style,
as `_spec.py` does).

Tracks opt in to the metric and subject checks by implementing the optional hooks
`figure_names(spec) -> set[str]` (every figure name the track can produce for this spec) and
`subject_names(spec) -> set[str]` (every configuration a gate may name; default: the candidates).
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
from trustbench.errors import InputError

ALWAYS_PRODUCED = frozenset({"valid_response_rate"})
"""Figures core adds to every subject (see `_evaluability`)."""


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


def check_gates(spec: ExperimentSpec, track: Any) -> None:
    """Gate metrics must be figures the track produces; gate candidates must be its subjects."""
    subject_hook: Callable[[ExperimentSpec], Iterable[str]] | None = getattr(
        track, "subject_names", None
    )
    subjects = (
        set(subject_hook(spec)) if callable(subject_hook) else {c.name for c in spec.candidates}
    )
    figure_hook: Callable[[ExperimentSpec], Iterable[str]] | None = getattr(
        track, "figure_names", None
    )
    figures = set(figure_hook(spec)) | ALWAYS_PRODUCED if callable(figure_hook) else None
    for index, gate in enumerate(spec.gates):
        if figures is not None and gate.metric not in figures:
            raise InputError(
                f"unknown metric {gate.metric!r} for track {spec.track_id}; it produces: "
                f"{', '.join(sorted(figures))}",
                location=f"gates/{index}/metric",
            )
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
