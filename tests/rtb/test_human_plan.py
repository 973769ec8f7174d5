"""A human run serves, records and reports exactly its frozen plan; its recommendation source
must be a finished run with the named configuration (refused at freeze)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient
from tests.rtb.test_human_app import complete, serve
from tests.rtb.test_human_fixtures import ai_run, participant, small_corpus

from trustbench.core import build_manifest, read_ledger, report_run, run_experiment, write_manifest
from trustbench.errors import CheckFailed, InputError
from trustbench.rtb.human import _store as _protocol

SELECTED = "backup_retention-"


def human_spec(tmp: Path, corpus: Path, sha: str, *, configuration: str = "always-permit") -> Path:
    """A one-participant human spec that selects one of the small corpus's two groups."""
    spec = tmp / "human.toml"
    text = (
        f'suite = "rtb"\ntrack = "review"\ntrials_per_case = 1\norder_seed = 5\n'
        f'[corpus]\npath = "{corpus}"\n[track_options]\ncases = ["{SELECTED}*"]\n'
        f'[human_protocol]\nreference_suppliers = ["corpus-authors"]\n'
        + participant("P01", sha, True)
    )
    spec.write_text(text.replace('"always-permit"', f'"{configuration}"'))
    return spec


def frozen_human_run(tmp: Path) -> Path:
    corpus = small_corpus(tmp / "corpus")
    _, sha = ai_run(tmp, corpus)  # reviews all 12 cases: more than the human run selects
    run_dir = tmp / "human-run"
    write_manifest(build_manifest(human_spec(tmp, corpus, sha)), run_dir)
    return run_dir


def review_everything(run_dir: Path) -> list[str]:
    pages: list[str] = []

    async def driver(client: TestClient, tokens: dict[str, str]) -> None:
        await complete(client, tokens["sre-cab-p01"], False, pages)

    serve(run_dir, driver)
    return pages


def test_a_session_serves_exactly_the_cases_the_frozen_plan_selects(tmp_path: Path) -> None:
    run_dir = frozen_human_run(tmp_path)
    pages = review_everything(run_dir)
    assert re.search(r"case 1 of (\d+)", pages[0]).group(1) == "6"  # type: ignore[union-attr]
    cases = {trial["case_id"] for trial in read_ledger(run_dir).trials}
    assert len(cases) == 6
    assert all(case.startswith(SELECTED) for case in cases)
    assert report_run(run_dir).complete  # the source's other cases are not paired


def test_report_refuses_a_ledger_holding_trials_outside_the_frozen_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = frozen_human_run(tmp_path)
    # How such a ledger came about: a serve that ordered the whole corpus, not the plan.
    monkeypatch.setattr(_protocol, "planned_cases", lambda manifest, corpus: list(corpus.cases))
    review_everything(run_dir)
    with pytest.raises(CheckFailed, match="outside the frozen plan"):
        report_run(run_dir)


def test_freeze_refuses_a_recommendation_configuration_the_source_run_lacks(
    tmp_path: Path,
) -> None:
    corpus = small_corpus(tmp_path / "corpus")
    _, sha = ai_run(tmp_path, corpus)
    with pytest.raises(InputError, match="no configuration 'no-such-reviewer'") as error:
        build_manifest(human_spec(tmp_path, corpus, sha, configuration="no-such-reviewer"))
    assert str(error.value.location).endswith(
        ".toml#/candidates/0/participant/recommendation/configuration"
    )


def test_freeze_refuses_a_recommendation_source_run_that_did_not_finish(tmp_path: Path) -> None:
    corpus = small_corpus(tmp_path / "corpus")
    spec = tmp_path / "ai.toml"
    spec.write_text(
        f'suite = "rtb"\ntrack = "review"\ntrials_per_case = 1\n[corpus]\npath = "{corpus}"\n'
        '[[candidates]]\nname = "always-permit"\nkind = "inprocess"\n'
        'entry = "trustbench.rtb.review.reviewers:chat_responder"\n'
        'settings = { reviewer = "always-permit" }\n'
    )
    manifest = build_manifest(spec)
    write_manifest(manifest, tmp_path / "ai-run")
    run_experiment(tmp_path / "ai-run", limit=2)  # signed off, 2 of 12 trials
    with pytest.raises(InputError, match="2 of 12 planned trials ran") as error:
        build_manifest(human_spec(tmp_path, corpus, manifest.manifest_sha256))
    assert str(error.value.location).endswith(".toml#/candidates/0/participant/recommendation/run")
