"""Fixtures of the human-review tests (a small AI run, a two-participant human run, a scripted
participant reading only the page) and the tests of the session protocol they rely on."""

from __future__ import annotations

import html
import json
import re
import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest

from trustbench.core import build_manifest, parse_spec, run_experiment, write_manifest
from trustbench.errors import InputError
from trustbench.rtb.corpus import CandidateInput, builtin_corpus_root, load_corpus
from trustbench.rtb.corpus import write_manifest as write_corpus_manifest
from trustbench.rtb.human import case_order
from trustbench.rtb.policy.narrow_v1 import ReferencePolicyReviewer

GROUPS = ("backup_retention", "cluster_deletion")
EXAMPLES = Path(__file__).parents[2] / "examples"


def small_corpus(root: Path) -> Path:
    """The built-in corpus cut to two groups (4 permit, 4 deny, 4 hold cases)."""
    shutil.copytree(builtin_corpus_root(), root)
    (root / "MANIFEST.json").unlink()
    for path in (root / "cases").glob("*.json"):
        if not path.name.startswith(GROUPS):
            path.unlink()
    write_corpus_manifest(root, version="0.1-human-fixture")
    return root


def ai_run(tmp: Path, corpus: Path, reference: str = "reference-policy") -> tuple[Path, str]:
    """Freeze and run the AI source run (the corpus policy's reference reviewer, named
    `reference`, and always-permit); return its hash."""
    spec = tmp / "ai.toml"
    spec.write_text(
        f'suite = "rtb"\ntrack = "review"\ntrials_per_case = 1\n[corpus]\npath = "{corpus}"\n'
        + "".join(
            f'[[candidates]]\nname = "{name}"\nkind = "inprocess"\n'
            f'entry = "trustbench.rtb.review.reviewers:chat_responder"\n'
            f'settings = {{ reviewer = "{name}" }}\n'
            for name in (reference, "always-permit")
        )
    )
    run_dir = tmp / "ai-run"
    manifest = build_manifest(spec)
    write_manifest(manifest, run_dir)
    run_experiment(run_dir)
    return run_dir, manifest.manifest_sha256


def participant(pid: str, sha: str, visible: bool, limit: float = 300) -> str:
    """Spec text of one human candidate paired with always-permit."""
    return (
        f'[[candidates]]\nname = "sre-cab-{pid.lower()}"\nkind = "human"\n'
        f"[candidates.participant]\n"
        f'id = "{pid}"\nteam = "platform-sre"\nworkflow = "change-advisory review"\n'
        f'qualifications = ["SRE, 5 years"]\nevidence_access = "the case evidence records only"\n'
        f"time_limit_s = {limit}\n"
        f'recommendation = {{ run = "ai-run", manifest_sha256 = "{sha}", '
        f'configuration = "always-permit", visible = {str(visible).lower()} }}\n'
    )


def human_run(tmp: Path, corpus: Path, sha: str, limit: float = 300) -> Path:
    """Freeze the two-participant human run (P01 sees the recommendation, P02 does not)."""
    spec = tmp / "human.toml"
    spec.write_text(
        f'suite = "rtb"\ntrack = "review"\ntrials_per_case = 1\norder_seed = 5\n'
        f'[corpus]\npath = "{corpus}"\n'
        f'[human_protocol]\nreference_suppliers = ["corpus-authors"]\n'
        + participant("P01", sha, True, limit)
        + participant("P02", sha, False, limit)
    )
    run_dir = tmp / "human-run"
    write_manifest(build_manifest(spec), run_dir)
    return run_dir


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, Path]:
    """(AI run, frozen human run) on the small corpus."""
    corpus = small_corpus(tmp_path / "corpus")
    ai_dir, sha = ai_run(tmp_path, corpus)
    return ai_dir, human_run(tmp_path, corpus, sha)


def page_input(page: str) -> CandidateInput:
    """The candidate input a review page shows (its exact-JSON block)."""
    found = re.search(r"<pre>(\{.*?\})</pre>", page, re.DOTALL)
    assert found, "no candidate input on the page"
    return CandidateInput.model_validate_json(html.unescape(found.group(1)))


def page_recommendation(page: str) -> str | None:
    """The AI decision shown on a page (`permit`/`deny`/`hold`), or None when none is shown."""
    found = re.search(r"decided: (PERMIT|DENY|HOLD)", page)
    return found.group(1).lower() if found else None


def participant_answer(page: str, follow_ai: bool) -> dict[str, Any]:
    """A scripted participant: applies the written policy to what the page shows, or follows a
    visible AI recommendation. Reads nothing but the page."""
    visible = page_input(page)
    prompt = html.unescape(re.search(r"<pre>(.*?)</pre>", page, re.DOTALL).group(1))
    finding = json.loads(ReferencePolicyReviewer().review(prompt, visible))
    shown = page_recommendation(page)
    if follow_ai and shown is not None and shown != finding["decision"]:
        finding["decision"] = shown
        finding["explanation"] = f"Following the AI recommendation ({shown})."
    return finding


def example_session() -> dict[str, Any]:
    """The example session spec as shipped (its AI-run hash is a placeholder of 64 zeros)."""
    return tomllib.loads((EXAMPLES / "rtb-human-session.toml").read_text())


def test_case_order_interleaves_variants_of_each_group() -> None:
    cases = load_corpus().cases
    order = case_order(cases, 3, "P01")
    assert sorted(order) == sorted(c.case_id for c in cases)
    groups = {c.case_id: c.group for c in cases}
    first_round = [groups[c] for c in order[:10]]
    assert len(set(first_round)) == 10  # every group once before any group twice
    assert case_order(cases, 3, "P01") == order  # reproducible from the manifest
    assert case_order(cases, 3, "P02") != order  # each participant has an own order


def test_participant_who_supplied_references_is_refused() -> None:
    data = example_session()
    data["human_protocol"]["reference_suppliers"].append("P02")
    with pytest.raises(InputError, match="P02"):
        parse_spec(data, source="spec.toml")


def test_human_candidate_takes_no_model_fields() -> None:
    data = example_session()
    data["candidates"][0]["model"] = "gpt-x"
    with pytest.raises(InputError, match="human candidate takes only"):
        parse_spec(data, source="spec.toml")
    del data["candidates"][0]["model"]
    del data["human_protocol"]
    with pytest.raises(InputError, match="human_protocol"):
        parse_spec(data, source="spec.toml")


def test_example_session_spec_declares_protocol_per_participant() -> None:
    spec = parse_spec(example_session(), source="example")
    visible = [c.participant.recommendation.visible for c in spec.candidates if c.participant]
    assert visible == [True, False]
    for candidate in spec.candidates:
        assert candidate.participant.team and candidate.participant.qualifications
