"""A spec's declared subset, `[corpus] families`: whole families, frozen, reported, checked.

The demo runs its control-path and workflow steps on such a subset; a spec without the field
runs every case, and a family the corpus lacks is refused at freeze naming the field.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tests.support.child_env import child_env
from tests.support.cli import invoke

from trustbench.core import read_manifest
from trustbench.demo import first_families
from trustbench.rtb.corpus import builtin_corpus_root, load_corpus
from trustbench.rtb.corpus._load import case_family

REVIEW_SPEC = """
suite = "rtb"
track = "review"
trials_per_case = 1
concurrency = 4

[corpus]
builtin = "v0.4"
{families}

[[candidates]]
name = "reference-policy"
kind = "inprocess"
entry = "trustbench.rtb.review.reviewers:chat_responder"
settings = {{ reviewer = "reference-policy-v4" }}
"""

CONTROL_SPEC = """
suite = "rtb"
track = "control"
trials_per_case = 1

[corpus]
builtin = "{version}"
{families}

[track_options]
paths = ["direct"]

[[candidates]]
name = "reference"
kind = "inprocess"
settings = {{ boundary = "reference" }}
"""

WORKFLOW_SPEC = """
suite = "rtb"
track = "workflow"
trials_per_case = 1

[corpus]
builtin = "v0.4"
{families}

[track_options]
kinds = ["direct"]

[[candidates]]
name = "honest"
kind = "inprocess"
settings = {{ agent = "honest", boundary = "reference" }}
"""


def _families_line(families: list[str]) -> str:
    return "families = [" + ", ".join(json.dumps(family) for family in families) + "]"


def test_a_declared_family_subset_is_frozen_recorded_and_named_in_the_report(
    tmp_path: Path,
) -> None:
    corpus = load_corpus(builtin_corpus_root("0.4"))
    families = (first_families(corpus, 1) or [])[:2]
    in_families = [case.case_id for case in corpus.cases if case_family(case) in families]
    spec = tmp_path / "spec.toml"
    spec.write_text(REVIEW_SPEC.format(families=_families_line(families)))
    code, output = invoke("freeze", str(spec), "--out", str(tmp_path / "run"))
    assert code == 0, output
    manifest = read_manifest(tmp_path / "run")
    assert manifest.spec.corpus.families == families  # frozen under the manifest's hash
    assert manifest.plan.cases == len(in_families) < len(corpus.cases)  # whole families only
    assert invoke("run", str(tmp_path / "run"))[0] == 0
    code, output = invoke("report", str(tmp_path / "run"))
    assert code == 0, output
    record = json.loads((tmp_path / "run" / "record.json").read_text())
    rows = (tmp_path / "run" / "record.trials.jsonl").read_text().splitlines()
    assert sorted({json.loads(row)["case_id"] for row in rows}) == sorted(in_families)
    subset = record["qualifications"][0]
    assert subset.startswith("A declared subset of corpus 0.4") and all(
        f in subset for f in families
    )
    assert "remove corpus.families from the spec" in subset  # the way to the full corpus run
    html = (tmp_path / "run" / "report.html").read_text()
    assert "declared subset: 2 contrast families" in html and families[0] in html


@pytest.mark.parametrize("template", [REVIEW_SPEC, WORKFLOW_SPEC], ids=["review", "workflow"])
def test_an_unknown_family_is_refused_at_freeze_naming_the_field_and_the_family(
    tmp_path: Path, template: str
) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(template.format(families=_families_line(["fam-no-such"])))
    code, message = invoke("freeze", str(spec), "--out", str(tmp_path / "run"))
    assert code == 2
    assert "corpus/families" in message and "'fam-no-such'" in message
    assert not (tmp_path / "run" / "manifest.json").exists()


def test_the_command_line_refuses_an_unknown_family_in_one_line_with_exit_2(
    tmp_path: Path,
) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(CONTROL_SPEC.format(version="v0.4", families=_families_line(["fam-typo"])))
    result = subprocess.run(
        [sys.executable, "-m", "trustbench", "freeze", str(spec), "--out", str(tmp_path / "run")],
        env=child_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert "corpus/families" in result.stderr and "'fam-typo'" in result.stderr


def test_a_corpus_whose_cases_name_no_family_refuses_a_family_subset(tmp_path: Path) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(CONTROL_SPEC.format(version="v0.1", families=_families_line(["fam-a"])))
    code, message = invoke("freeze", str(spec), "--out", str(tmp_path / "run"))
    assert code == 2 and "corpus/families" in message and "no contrast family" in message


def test_a_spec_without_families_runs_every_case(tmp_path: Path) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(CONTROL_SPEC.format(version="v0.1", families=""))
    assert invoke("freeze", str(spec), "--out", str(tmp_path / "run"))[0] == 0
    manifest = read_manifest(tmp_path / "run")
    assert manifest.spec.corpus.families is None
    cases = load_corpus(builtin_corpus_root("0.1")).cases
    assert manifest.plan.cases == len(cases)  # `direct`: one scenario per case, every case


def test_a_trb_spec_refuses_families_its_traces_do_not_have(tmp_path: Path) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(
        'suite = "trb"\ntrack = "profile"\ntrials_per_case = 1\n\n'
        '[corpus]\nbuiltin = "reference-world"\nfamilies = ["fam-a"]\n\n'
        '[[candidates]]\nname = "uniform"\nkind = "inprocess"\nmodel = "oracle:uniform"\n'
    )
    code, message = invoke("freeze", str(spec), "--out", str(tmp_path / "run"))
    assert code == 2 and "corpus/families" in message and "corpus_sizes" in message
