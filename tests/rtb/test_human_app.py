"""The human review app over HTTP: sessions, tokens, validation, pause/resume, ledger, report."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from tests.rtb.test_human_fixtures import page_input, participant_answer, runs  # noqa: F401
from tests.support.records import full_record

from trustbench.core import read_ledger, report_run, run_experiment
from trustbench.errors import InputError
from trustbench.rtb.corpus import ReasonCode, find_leaks, grader_only_values, load_corpus
from trustbench.rtb.human._app import SessionRun, open_session_run

Driver = Callable[[TestClient, dict[str, str]], Awaitable[Any]]


def serve(run_dir: Path, driver: Driver) -> Any:
    """Open the run for serving, run `driver(client, {candidate: token})`, then close it."""

    async def main() -> Any:
        with open_session_run(run_dir) as served:
            assert served.app is not None
            tokens = {candidate: token for token, candidate in served.tokens.items()}
            async with TestClient(TestServer(served.app, host="127.0.0.1")) as client:
                # A browser sends the page's origin with every form post; the app requires it.
                client.session.headers["Origin"] = str(client.make_url("")).rstrip("/")
                return await driver(client, tokens)

    return asyncio.run(main())


async def submit(
    client: TestClient, token: str, answer: dict[str, Any], discrepancies: str | None = None
) -> str:
    """Post a finding as the form does (`discrepancies`: the lines, where the policy asks)."""
    data = [
        ("evaluation_id", answer["evaluation_id"]),
        ("decision", answer["decision"]),
        ("explanation", answer["explanation"]),
        *[("reason_codes", c) for c in answer["reason_codes"]],
        *[("evidence_refs", r) for r in answer["evidence_refs"]],
        *([("discrepancies", discrepancies)] if discrepancies is not None else []),
    ]
    response = await client.post(f"/s/{token}/submit", data=data)
    assert response.status == 200
    return await response.text()


async def complete(client: TestClient, token: str, follow_ai: bool, pages: list[str]) -> int:
    """Review every case of a session like a participant; return the number of cases."""
    page = await (await client.get(f"/s/{token}")).text()
    count = 0
    while "Session complete" not in page:
        pages.append(page)
        page = await submit(client, token, participant_answer(page, follow_ai))
        count += 1
    pages.append(page)
    return count


def session_pages(human_dir: Path) -> list[str]:
    pages: list[str] = []

    async def driver(client: TestClient, tokens: dict[str, str]) -> None:
        await complete(client, tokens["sre-cab-p01"], True, pages)
        token = tokens["sre-cab-p02"]
        page = await (await client.get(f"/s/{token}")).text()
        pages.append(await (await client.post(f"/s/{token}/pause")).text())
        pages.append(await (await client.post(f"/s/{token}/resume")).text())
        refused = {**participant_answer(page, False), "evidence_refs": ["no-such-record"]}
        pages.append(await submit(client, token, refused))
        pages.append(await (await client.get("/")).text())
        pages.append(await (await client.get("/s/not-a-token")).text())
        await complete(client, token, False, pages)

    serve(human_dir, driver)
    return pages


def test_two_participants_yield_a_report_with_both_configurations_timings_and_visibility_split(
    runs: tuple[Path, Path],  # noqa: F811
) -> None:
    _, human_dir = runs
    pages = session_pages(human_dir)
    # 12 review pages + the finished page, twice; paused, resumed, refused, landing, 403 pages
    assert len(pages) == 31
    result = report_run(human_dir)
    assert result.complete
    review = full_record(result.record_path.parent)["review"]
    paired_ai = next(name for name in review["configurations"] if name.startswith("always-permit"))
    assert {"sre-cab-p01", "sre-cab-p02", paired_ai} <= set(review["configurations"])
    p01 = review["configurations"]["sre-cab-p01"]
    assert p01["members"][0]["reviewer"].startswith("participant P01 (platform-sre;")
    human = review["human"]
    # P01 saw always-permit's recommendation and followed it; P02 did not see it.
    assert human["agreement_by_visibility"]["visible"] == {
        "agree": 12, "ai_decisions": 12, "followed_ai_errors": 8, "ai_errors": 8,
    }  # fmt: skip
    assert human["agreement_by_visibility"]["not_visible"] == {
        "agree": 4, "ai_decisions": 12, "followed_ai_errors": 0, "ai_errors": 8,
    }  # fmt: skip
    assert all(t >= 0 for t in human["participants"]["sre-cab-p02"]["time_on_task_s"])
    assert len(human["participants"]["sre-cab-p02"]["time_on_task_s"]) == 12
    pairs = {(p["first"], p["second"]) for p in review["paired"]}
    assert ("sre-cab-p02", paired_ai) in pairs or (paired_ai, "sre-cab-p02") in pairs
    trials = [t for t in review["trials"] if t["configuration"] == "sre-cab-p02"]
    assert {t["outcome"] for t in trials} == {"permit", "deny", "hold"}
    assert all(t["supported"] for t in trials)  # the policy, applied by hand, is supported
    halves = human["participants"]["sre-cab-p02"]["supported_by_session_half"]
    assert halves == {
        "positions 1-6": {"supported": 6, "cases": 6},
        "positions 7-12": {"supported": 6, "cases": 6},
    }
    page = result.html_path.read_text()
    assert "supported_finding_rate [sre-cab-p02; positions 1-6]" in page
    assert "Agreement with the AI recommendation, by visibility" in page
    assert "team platform-sre" in page


def test_every_page_served_is_free_of_grader_only_values(runs: tuple[Path, Path]) -> None:  # noqa: F811
    _, human_dir = runs
    corpus = load_corpus(
        Path(json.loads((human_dir / "manifest.json").read_text())["corpus"]["root"])
    )
    # The reason-code vocabulary is shown to every reviewer (it is the response format).
    forbidden = set().union(*(grader_only_values(c) for c in corpus.cases)) - {
        code.value for code in ReasonCode
    }
    pages = session_pages(human_dir)
    # The scan is not vacuous: a case id or a variant name planted in a page is found.
    assert find_leaks(pages[0] + corpus.cases[0].case_id, forbidden)
    assert find_leaks(pages[0] + " revoked_approval", forbidden)
    for page in pages:
        assert find_leaks(page, forbidden) == []
        assert "reference" not in page.lower().replace("reference-policy", "")


def test_a_participant_token_cannot_read_another_session(runs: tuple[Path, Path]) -> None:  # noqa: F811
    _, human_dir = runs

    async def driver(client: TestClient, tokens: dict[str, str]) -> None:
        own = await (await client.get(f"/s/{tokens['sre-cab-p01']}")).text()
        other = await (await client.get(f"/s/{tokens['sre-cab-p02']}")).text()
        assert page_input(own).evaluation_id != page_input(other).evaluation_id
        forged = tokens["sre-cab-p02"][:-2] + (
            "aa" if not tokens["sre-cab-p02"].endswith("aa") else "bb"
        )
        for path in (f"/s/{forged}", "/s/", "/s/sre-cab-p02", "/s/P02"):
            response = await client.get(path)
            assert response.status in (403, 404)
            assert "evidence" not in (await response.text()).lower()
        response = await client.post(f"/s/{forged}/submit", data={"decision": "permit"})
        assert response.status == 403
        for path in ("/manifest.json", "/ledger.sqlite", "/record.json", "/../manifest.json"):
            assert (await client.get(path)).status == 404

    serve(human_dir, driver)


def test_invalid_form_is_refused_with_its_reason_and_the_refusal_counted(
    runs: tuple[Path, Path],  # noqa: F811
) -> None:
    _, human_dir = runs

    async def driver(client: TestClient, tokens: dict[str, str]) -> None:
        token = tokens["sre-cab-p02"]
        page = await (await client.get(f"/s/{token}")).text()
        answer = participant_answer(page, follow_ai=False)
        forged = {**answer, "evidence_refs": ["approval-record-that-does-not-exist"]}
        refused = await submit(client, token, forged)
        assert "Your answer was not recorded yet" in refused
        assert "resolves to no record of this input" in refused
        blank = {**answer, "explanation": "   "}
        assert "explanation is blank" in await submit(client, token, blank)
        accepted = await submit(client, token, answer)
        assert "case 2 of 12" in accepted

    serve(human_dir, driver)
    ledger = read_ledger(human_dir)
    assert len(ledger.trials) == 1
    outcome = ledger.trials[0]["outcome"]
    assert outcome["rejected_submissions"] == 2
    assert outcome["participant"] == "P02" and outcome["recommendation_shown"] is None
    assert ledger.attempts[0]["kind"] == "human_response"


def test_closed_browser_and_restarted_server_lose_nothing_submitted(
    runs: tuple[Path, Path],  # noqa: F811
) -> None:
    _, human_dir = runs
    shown: dict[str, str] = {}

    async def first(client: TestClient, tokens: dict[str, str]) -> None:
        token = tokens["sre-cab-p01"]
        for _ in range(2):
            page = await (await client.get(f"/s/{token}")).text()
            await submit(client, token, participant_answer(page, True))
        page = await (await client.get(f"/s/{token}")).text()  # third case shown, browser closed
        shown["id"] = page_input(page).evaluation_id

    serve(human_dir, first)

    async def second(client: TestClient, tokens: dict[str, str]) -> None:
        token = tokens["sre-cab-p01"]
        page = await (await client.get(f"/s/{token}")).text()
        assert "Session paused" in page  # stopping the server paused the open case
        assert "evidence" not in page.lower()
        page = await (await client.post(f"/s/{token}/resume")).text()
        assert "case 3 of 12" in page
        assert page_input(page).evaluation_id == shown["id"]

    serve(human_dir, second)
    ledger = read_ledger(human_dir)
    assert len(ledger.trials) == 2
    kinds = [e["kind"] for e in ledger.events]
    assert kinds.count("run_started") == 2 and kinds[-1] == "run_finished"


def test_pause_stops_the_clock_and_an_overrun_is_recorded(tmp_path: Path) -> None:
    from tests.rtb.test_human_fixtures import ai_run, human_run, small_corpus

    corpus = small_corpus(tmp_path / "corpus")
    _, sha = ai_run(tmp_path, corpus)
    human_dir = human_run(tmp_path, corpus, sha, limit=0.05)

    async def driver(client: TestClient, tokens: dict[str, str]) -> None:
        token = tokens["sre-cab-p01"]
        page = await (await client.get(f"/s/{token}")).text()
        paused = await (await client.post(f"/s/{token}/pause")).text()
        assert "Session paused" in paused
        refused = await submit(client, token, participant_answer(page, True))
        assert "Session paused" in refused  # a paused case accepts no answer and stays hidden
        await asyncio.sleep(0.3)  # paused time is not time on task
        page = await (await client.post(f"/s/{token}/resume")).text()
        await asyncio.sleep(0.1)
        await submit(client, token, participant_answer(page, True))

    serve(human_dir, driver)
    outcome = read_ledger(human_dir).trials[0]["outcome"]
    assert 0.1 <= outcome["time_on_task_s"] < 0.3
    assert outcome["overran_time_limit"] is True
    assert outcome["recommendation_shown"]["configuration"] == "always-permit"


def test_trustbench_run_is_refused_while_the_app_serves(runs: tuple[Path, Path]) -> None:  # noqa: F811
    _, human_dir = runs
    with SessionRun(run_dir=human_dir) as served:
        assert served.store is not None
        with pytest.raises(InputError):
            run_experiment(human_dir)
        # The app holds the run folder's lock, the same one `trustbench run` takes.
        with pytest.raises(InputError, match="another `trustbench run` is using this folder"):
            open_session_run(human_dir).__enter__()


def test_links_carry_one_distinct_token_per_participant(runs: tuple[Path, Path]) -> None:  # noqa: F811
    _, human_dir = runs
    with open_session_run(human_dir) as served:
        links = served.links("http://127.0.0.1:8765")
    assert set(links) == {"sre-cab-p01", "sre-cab-p02"}
    tokens = {re.sub(r".*/s/", "", link) for link in links.values()}
    assert len(tokens) == 2 and all(len(t) >= 32 for t in tokens)


def test_a_run_of_ai_reviewers_cannot_be_served_to_participants(runs: tuple[Path, Path]) -> None:  # noqa: F811
    ai_dir, _ = runs
    with pytest.raises(InputError, match="only human candidates"):
        open_session_run(ai_dir).__enter__()
    assert read_ledger(ai_dir).events[-1]["kind"] != "run_started"  # nothing was written


def test_trustbench_run_refuses_a_run_of_human_candidates(runs: tuple[Path, Path]) -> None:  # noqa: F811
    _, human_dir = runs
    with pytest.raises(InputError, match="rtb human serve"):
        run_experiment(human_dir)
    assert not (human_dir / "ledger.sqlite").exists()


def test_a_recommendation_source_other_than_the_frozen_one_is_refused_at_freeze(
    tmp_path: Path,
) -> None:
    from tests.rtb.test_human_fixtures import ai_run, human_run, small_corpus

    corpus = small_corpus(tmp_path / "corpus")
    ai_run(tmp_path, corpus)
    # The example's unreplaced placeholder: refused when frozen, not when a participant comes.
    with pytest.raises(InputError, match="000000000000… is not the manifest of 'ai-run'"):
        human_run(tmp_path, corpus, "0" * 64)
    assert not (tmp_path / "human-run" / "manifest.json").exists()


def test_a_recommendation_source_folder_that_does_not_exist_is_refused_at_freeze(
    tmp_path: Path,
) -> None:
    from tests.rtb.test_human_fixtures import human_run, small_corpus

    corpus = small_corpus(tmp_path / "corpus")
    with pytest.raises(InputError, match="run folder 'ai-run' does not exist") as error:
        human_run(tmp_path, corpus, "ab" * 32)
    assert str(error.value.location).endswith("human.toml#/candidates/0/participant/recommendation")
