"""AI recommendations: an earlier, finished run's configuration decisions, per case.

The source run is named in the participant's frozen `recommendation` and pinned by its manifest
hash. It is verified (manifest hash, ledger chain, finished) and graded with the same functions
as any reviewer-track run, so a recommendation shown to a participant is exactly the outcome the
report attributes to that configuration: a missing or invalid AI reply is shown as "no valid
recommendation", never as a decision.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from trustbench.core import Manifest, RecommendationSpec, read_ledger, read_manifest, verify_run
from trustbench.errors import CheckFailed, InputError

if TYPE_CHECKING:  # the review track's grading loads when a source run is read (`--help`
    # imports this package)
    from trustbench.rtb.corpus._load import Corpus
    from trustbench.rtb.review._grading import ConfigurationRow


@dataclass(frozen=True)
class SourceRun:
    """A verified, graded AI run whose configurations can be paired with human trials."""

    run_dir: Path
    """The run folder."""
    manifest: Manifest
    """Its frozen manifest."""
    rows: dict[str, list[ConfigurationRow]]
    """Configuration name -> graded rows (every case x trial that finished)."""

    def decision(self, configuration: str, case_id: str, trial: int = 0) -> str | None:
        """The configuration's outcome on a case (`permit`/`deny`/`hold`/`missing`/`invalid`).

        Returns None when that trial is not in the run (not run).
        """
        for item in self.rows[configuration]:
            if item.row.case_id == case_id and item.row.trial == trial:
                return item.row.observed.value
        return None


def source_run_dir(spec: RecommendationSpec, base_dir: Path) -> Path:
    """The source run folder, relative paths resolved against the spec's folder."""
    path = Path(spec.run)
    return path if path.is_absolute() else (base_dir / path).resolve()


def load_source_run(
    spec: RecommendationSpec, human_manifest: Manifest, corpus: Corpus
) -> SourceRun:
    """Verify and grade the recommendation source run.

    Args:
        spec: The participant's frozen recommendation.
        human_manifest: The human run's manifest (its spec folder resolves a relative `run`;
            its hashed corpus files must equal the source run's, byte for byte).
        corpus: The corpus the human run pins.

    Raises:
        InputError: the folder is not a run, is another manifest, another corpus or lacks the
            configuration.
        CheckFailed: its ledger was altered or the run did not finish.
    """
    from trustbench.rtb.review._grading import configuration_rows, member_trials
    from trustbench.rtb.review._options import configurations

    run_dir = source_run_dir(spec, Path(human_manifest.base_dir))
    where = f"{run_dir} (recommendation source)"
    manifest = read_manifest(run_dir)
    if manifest.manifest_sha256 != spec.manifest_sha256:
        raise InputError(
            f"manifest sha256 {manifest.manifest_sha256[:12]}… is not the frozen "
            f"{spec.manifest_sha256[:12]}…",
            location=where,
        )
    if manifest.spec.track_id != "rtb/review":
        raise InputError(f"is a {manifest.spec.track_id} run, not rtb/review", location=where)
    if _corpus_files(manifest) != _corpus_files(human_manifest):
        raise InputError(
            f"reviewed corpus {manifest.corpus.version} at {manifest.corpus.root}, whose files "
            f"differ from the human run's ({human_manifest.corpus.version} at "
            f"{human_manifest.corpus.root})",
            location=where,
        )
    report = verify_run(run_dir)
    if not report.ok:
        raise CheckFailed(
            f"recommendation source is not a finished, intact run: {report.problems[0]}",
            location=where,
        )
    configs = {c.name: (c, members) for c, members in configurations(manifest.spec)}
    if spec.configuration not in configs:
        raise InputError(
            f"has no configuration {spec.configuration!r} (it has {sorted(configs)})",
            location=where,
        )
    # Only the human run's cases are paired: the source may have reviewed more of the corpus.
    graded = member_trials(manifest, read_ledger(run_dir), corpus, skip_other_cases=True)
    rows: dict[str, list[ConfigurationRow]] = {}
    for name, (configuration, members) in configs.items():
        trials, _ = configuration_rows(
            configuration, members, corpus, manifest.spec.trials_per_case, graded
        )
        rows[name] = list(trials)  # a human run's trials: few
    return SourceRun(run_dir=run_dir, manifest=manifest, rows=rows)


def _corpus_files(manifest: Manifest) -> dict[str, str]:
    return {f.name: f.sha256 for f in manifest.files if f.role == "corpus"}
