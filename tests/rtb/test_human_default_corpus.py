"""The human review app on the reviewer-side default corpus (`DEFAULT_VERSION`): a participant
is offered that corpus's reason codes and a field for its structured discrepancies, answers by its
policy, and every answer is recorded and graded supported."""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from tests.rtb.test_human_app import serve, submit
from tests.rtb.test_human_fixtures import ai_run, human_run
from tests.support.records import full_record

from trustbench.core import report_run
from trustbench.rtb.corpus import builtin_corpus_root, load_corpus
from trustbench.rtb.corpus import write_manifest as write_corpus_manifest
from trustbench.rtb.corpus._load import DEFAULT_VERSION
from trustbench.rtb.human._store import (
    DiscrepancyLineError,
    discrepancy_lines,
    parse_discrepancies,
)
from trustbench.rtb.policy import parse_candidate_input, policy_for, policy_of


def _one_group(root: Path) -> Path:
    """The default corpus cut to its first domain group (24 cases on v0.4), its policy kept."""
    source = load_corpus(builtin_corpus_root(DEFAULT_VERSION))
    group = source.cases[0].group
    shutil.copytree(builtin_corpus_root(DEFAULT_VERSION), root)
    (root / "MANIFEST.json").unlink()
    for case in source.cases:
        if case.group != group:
            (root / "cases" / f"{case.case_id}.json").unlink()
    version = f"{DEFAULT_VERSION}-human-fixture"
    write_corpus_manifest(root, version=version, policy_id=source.policy_id)
    return root


def _answer(page: str) -> dict[str, Any]:
    """A scripted participant applying the corpus policy to what the page shows."""
    found = re.search(r"<pre>(\{.*?\})</pre>", page, re.DOTALL)
    assert found, "no candidate input on the page"
    visible = parse_candidate_input(html.unescape(found.group(1)))
    prompt = html.unescape(re.search(r"<pre>(.*?)</pre>", page, re.DOTALL).group(1))
    reviewers = policy_of(visible).reviewers  # the policy whose input the page shows
    reviewer = next(f(0) for n, f in reviewers.items() if n.startswith("reference-policy"))
    return json.loads(reviewer.review(prompt, visible) or "{}")


def test_a_session_on_the_default_corpus_offers_its_reason_codes_and_is_graded(
    tmp_path: Path,
) -> None:
    corpus = _one_group(tmp_path / "corpus")
    loaded = load_corpus(corpus)
    policy = policy_for(loaded.policy_id)
    answers = 2 * len(loaded.cases)  # the two participants of `human_run` answer every case
    # The AI source run names the corpus policy's own reference reviewer.
    reference = next(name for name in policy.reviewers if name.startswith("reference-policy"))
    ai_dir, sha = ai_run(tmp_path, corpus, reference=reference)
    human_dir = human_run(tmp_path, corpus, sha)
    offered: list[set[str]] = []

    async def driver(client: TestClient, tokens: dict[str, str]) -> None:
        for token in tokens.values():
            page = await (await client.get(f"/s/{token}")).text()
            while "Session complete" not in page:
                offered.append(set(re.findall(r'name="reason_codes" value="([^"]+)"', page)))
                answer = _answer(page)
                lines = discrepancy_lines(answer["discrepancies"])
                page = await submit(client, token, answer, lines)
                assert "not recorded yet" not in page, page  # every answer is recorded

    serve(human_dir, driver)
    assert len(offered) == answers and all(codes == set(policy.reason_codes) for codes in offered)
    result = report_run(human_dir)
    assert result.complete
    trials = full_record(human_dir)["review"]["trials"]
    human = [t for t in trials if t["configuration"].startswith("sre-cab-")]
    assert len(human) == answers and all(t["supported"] for t in human)
    assert ai_dir.is_dir()


def test_discrepancy_lines_read_back_as_the_discrepancies_written() -> None:
    written = [
        {"record_id": "rec-1", "field": "/approved_parameters/days", "proposed_value": 30,
         "evidence_value": "14"},
        {"record_id": "rec-2", "field": "/status", "proposed_value": None,
         "evidence_value": ["a", "b"]},
    ]  # fmt: skip
    assert parse_discrepancies(discrepancy_lines(written)) == written
    assert parse_discrepancies("rec-3 | /status |  | unavailable\n\n") == [
        {"record_id": "rec-3", "field": "/status", "proposed_value": None,
         "evidence_value": "unavailable"},
    ]  # fmt: skip
    with pytest.raises(DiscrepancyLineError, match="line 1 has 2 part"):
        parse_discrepancies("rec-4 | /status")
