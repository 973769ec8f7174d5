"""Freeze-time checks of a human participant's recommendation source run.

Core's `check_references` proves the named folder holds the pinned manifest; only this track
knows what else a source must be. docs/human-review.md promises a *finished* run that has the
named configuration: a configuration the run lacks, or a run of which only part was run (a
`--limit`, an interruption), froze without complaint and failed only when a participant was
served, or paired the participant with decisions on some cases and "not run" on the rest.
"""

from __future__ import annotations

from pathlib import Path

from trustbench.core import ExperimentSpec, RecommendationSpec, read_manifest, verify_run
from trustbench.errors import CheckFailed, InputError
from trustbench.rtb.review._options import configurations


def check_recommendation_sources(spec: ExperimentSpec, base_dir: Path) -> None:
    """Every participant's recommendation source is finished, intact and has its configuration.

    Raises:
        InputError: naming the `recommendation` field of the first participant whose source
            lacks the configuration, or is unfinished, interrupted or altered.
    """
    for index, candidate in enumerate(spec.candidates):
        participant = candidate.participant
        if participant is None or participant.recommendation is None:
            continue
        where = f"/candidates/{index}/participant/recommendation"
        problem = source_problem(participant.recommendation, base_dir)
        if problem is not None:
            field, text = problem
            raise InputError(text, location=f"{where}/{field}")


def source_problem(spec: RecommendationSpec, base_dir: Path) -> tuple[str, str] | None:
    """`(field, why)` when the source run cannot pair with a participant, else None.

    The configuration is checked first (it needs only the manifest); then the ledger must be
    intact, signed off and hold a finished row for every planned trial.
    """
    folder = Path(spec.run) if Path(spec.run).is_absolute() else base_dir / spec.run
    names = sorted(c.name for c, _ in configurations(read_manifest(folder).spec))
    if spec.configuration not in names:
        return "configuration", (
            f"run {spec.run!r} has no configuration {spec.configuration!r} (it has: "
            f"{', '.join(names)})"
        )
    try:
        report = verify_run(folder)
    except (InputError, CheckFailed) as error:
        return "run", f"run {spec.run!r} is not a finished run: {error.message}"
    if not report.ok:
        return "run", f"run {spec.run!r} is not a finished, intact run: {report.problems[0]}"
    if report.finished_trials < report.planned_trials:
        return "run", (
            f"run {spec.run!r} is not finished: {report.finished_trials} of "
            f"{report.planned_trials} planned trials ran (finish it with `trustbench run`)"
        )
    return None
