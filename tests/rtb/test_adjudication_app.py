"""`rtb adjudicate serve` over HTTP, in process: blind reviews, the adjudicator, the guards.

Each test copies a 12-case v0.3 corpus into tmp_path and freezes a protocol of three of its
cases (two reviews each, the `adjudicated` rule); the app runs in aiohttp's test server.
"""

from __future__ import annotations

import asyncio
import html
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from tests.support.child_env import child_env

from trustbench.errors import InputError
from trustbench.rtb.adjudication import (
    ReferenceReview,
    adjudication_report,
    apply_record,
    freeze_protocol,
    loaded_corpus,
    read_record,
    record_adjudication,
)
from trustbench.rtb.adjudication_app import open_adjudication, read_roster
from trustbench.rtb.corpus import find_leaks, grader_only_values, load_corpus, to_candidate_input
from trustbench.rtb.human._app import case_view
from trustbench.rtb.policy import policy_for

SMALL = Path(__file__).parent / "fixtures" / "rtb_v0_3_heldout"
CASES = {"ho-02": "permit", "ho-03": "hold", "ho-05": "deny"}
"""The protocol's cases and their authored labels."""
DISAGREEMENT = "ho-03"
"""The case the second reviewer decides otherwise (permit where the label is hold)."""
ROSTER = {
    "reviewers": [
        {"reviewer_id": "rev-a", "role": "platform engineer (test fixture)", "years": 7},
        {"reviewer_id": "rev-b", "role": "security engineer (test fixture)", "years": 4},
    ],
    "adjudicators": [{"reviewer_id": "adj-1", "role": "change manager (test fixture)"}],
}

Driver = Callable[[TestClient, dict[str, str]], Awaitable[Any]]


def adjudication_setup(tmp_path: Path, rule: str = "adjudicated") -> tuple[Path, Path, Path]:
    """A corpus copy, a record frozen on three of its cases, and the roster file."""
    corpus = tmp_path / "corpus"
    shutil.copytree(SMALL, corpus)
    listed = tmp_path / "cases.txt"
    listed.write_text("\n".join(CASES) + "\n")
    record = tmp_path / "record.jsonl"
    options = {"reviewers_per_case": 2, "adjudication_rule": rule}
    freeze_protocol(record, str(corpus), selection="listed", options=options, listed_file=listed)
    roster = tmp_path / "roster.json"
    roster.write_text(json.dumps(ROSTER))
    return corpus, record, roster


def serve(record: Path, roster: Path, driver: Driver) -> Any:
    """Open the record for serving, run `driver(client, {reviewer id: token})`, close it."""

    async def main() -> Any:
        with open_adjudication(record, roster) as served:
            assert served.app is not None
            tokens = {who: token for token, who in served.tokens.items()}
            async with TestClient(TestServer(served.app, host="127.0.0.1")) as client:
                # A browser sends the page's origin with every form post; the app requires it.
                client.session.headers["Origin"] = str(client.make_url("")).rstrip("/")
                return await driver(client, tokens)

    return asyncio.run(main())


def shown_case(page: str, corpus: Path) -> str:
    """Which case a page shows, found by comparing its exact-JSON block with each case's input."""
    shown = json.loads(html.unescape(re.findall(r"<pre>(\{.*?\})</pre>", page, re.DOTALL)[-1]))
    for case in load_corpus(corpus).cases:
        expected = to_candidate_input(case, shown["evaluation_id"]).model_dump(mode="json")
        if expected == shown:
            return case.case_id
    raise AssertionError("the page shows no case of the corpus")


def answer(page: str, corpus: Path, reviewer: str) -> list[tuple[str, str]]:
    """A scripted reviewer's form: the label's decision, except rev-b's on the disagreement."""
    case_id = shown_case(page, corpus)
    decision = CASES[case_id]
    if reviewer == "rev-b" and case_id == DISAGREEMENT:
        decision = "permit"
    evaluation_id = re.search(r'name="evaluation_id" value="([^"]+)"', page)
    assert evaluation_id is not None
    return [
        ("evaluation_id", evaluation_id.group(1)),
        ("decision", decision),
        ("governing_rules", "r5; r11" if decision == "hold" else "r9"),
        ("facts_relied_on", "a1"),
        ("evidence", f"{reviewer} reads a1 and decides {decision}"),
        ("confidence", "0.8"),
        ("notes", f"{reviewer} note"),
    ]


async def review_all(client: TestClient, token: str, corpus: Path, who: str) -> list[str]:
    """Complete one reviewer's session; return every page they were shown."""
    pages = [await (await client.get(f"/s/{token}")).text()]
    while "All cases reviewed" not in pages[-1]:
        response = await client.post(f"/s/{token}/submit", data=answer(pages[-1], corpus, who))
        assert response.status == 200
        pages.append(await response.text())
        assert "Not recorded" not in pages[-1], pages[-1]
    return pages


def adjudication_form(page: str, decision: str) -> list[tuple[str, str]]:
    evaluation_id = re.search(r'name="evaluation_id" value="([^"]+)"', page)
    assert evaluation_id is not None
    return [
        ("evaluation_id", evaluation_id.group(1)),
        ("decision", decision),
        ("governing_rules", "r5"),
        ("facts_relied_on", "a1"),
        ("evidence", f"adj-1 settles on {decision}: the high tier needs a second approver"),
        ("confidence", ""),
        ("notes", ""),
    ]


def test_two_blind_reviews_an_adjudication_and_apply_keep_both_rationales(tmp_path: Path) -> None:
    corpus, record, roster = adjudication_setup(tmp_path)

    async def driver(client: TestClient, tokens: dict[str, str]) -> tuple[str, str, str]:
        waiting = await (await client.get(f"/s/{tokens['adj-1']}")).text()
        await review_all(client, tokens["rev-a"], corpus, "rev-a")
        await review_all(client, tokens["rev-b"], corpus, "rev-b")
        page = await (await client.get(f"/s/{tokens['adj-1']}")).text()
        done = await client.post(
            f"/s/{tokens['adj-1']}/submit", data=adjudication_form(page, "hold")
        )
        return waiting, page, await done.text()

    waiting, adjudicator_page, after = serve(record, roster, driver)
    assert "Nothing to adjudicate" in waiting and "Nothing to adjudicate" in after
    assert shown_case(adjudicator_page, corpus) == DISAGREEMENT
    assert "rev-a reads a1 and decides hold" in adjudicator_page
    assert "rev-b reads a1 and decides permit" in adjudicator_page
    report = adjudication_report(record)
    assert report["status_counts"] == {"reviewed": 3}
    (disagreement,) = report["disagreements"]
    assert {r["reviewer"] for r in disagreement["rationales"]} == {"rev-a", "rev-b"}
    assert disagreement["adjudication"]["reviewer"] == "adj-1"
    assert all(r["source"].startswith("adjudicate-serve:") for r in disagreement["rationales"])
    apply_record(record)
    status = json.loads((corpus / "cases" / f"{DISAGREEMENT}.json").read_text())["reference_status"]
    assert status["status"] == "reviewed"
    assert status["reviewers"] == ["rev-a", "rev-b", "adj-1"]
    assert status["qualifications"][2].startswith("adjudicator adj-1: change manager")
    assert any("rev-b: permit where the label is hold" in d for d in status["disagreements"])
    assert any(d.startswith("adjudicated: upholds the label") for d in status["disagreements"])
    load_corpus(corpus)  # validates with the new statuses


def test_an_adjudication_against_the_label_leaves_the_case_disputed(tmp_path: Path) -> None:
    corpus, record, roster = adjudication_setup(tmp_path)

    async def driver(client: TestClient, tokens: dict[str, str]) -> None:
        await review_all(client, tokens["rev-a"], corpus, "rev-a")
        await review_all(client, tokens["rev-b"], corpus, "rev-b")
        page = await (await client.get(f"/s/{tokens['adj-1']}")).text()
        await client.post(f"/s/{tokens['adj-1']}/submit", data=adjudication_form(page, "permit"))

    serve(record, roster, driver)
    assert adjudication_report(record)["status_counts"] == {"reviewed": 2, "disputed": 1}
    apply_record(record)
    status = json.loads((corpus / "cases" / f"{DISAGREEMENT}.json").read_text())["reference_status"]
    assert status["status"] == "disputed"
    assert any(d.startswith("adjudicated: does not uphold") for d in status["disagreements"])


def test_reviewer_pages_never_show_a_label_a_variant_or_another_reviewers_answer(
    tmp_path: Path,
) -> None:
    corpus, record, roster = adjudication_setup(tmp_path)
    loaded = load_corpus(corpus)
    # The reason-code vocabulary is in the prompt every reviewer reads (the response format).
    shown_to_all = set(policy_for(loaded.policy_id).reason_codes)
    forbidden = set().union(*(grader_only_values(c) for c in loaded.cases)) - shown_to_all

    async def driver(client: TestClient, tokens: dict[str, str]) -> list[str]:
        first = await review_all(client, tokens["rev-a"], corpus, "rev-a")
        return first + await review_all(client, tokens["rev-b"], corpus, "rev-b")

    pages = serve(record, roster, driver)
    assert len(pages) == 8  # three cases and the closing page, per reviewer
    # The scan is not vacuous: a case id or a variant planted in a page is found.
    assert find_leaks(pages[0] + " ho-03", forbidden)
    assert find_leaks(pages[0] + " handwritten", forbidden)
    for page in pages:
        assert find_leaks(page, forbidden) == []
    for page in pages[4:]:  # rev-b's pages, after rev-a finished
        assert "rev-a" not in page


def test_a_case_page_depends_on_nothing_a_candidate_cannot_see(tmp_path: Path) -> None:
    case = next(c for c in load_corpus(SMALL).cases if c.case_id == DISAGREEMENT)
    relabelled = case.model_copy(
        update={
            "variant": "another-variant",
            "expectations": case.expectations.model_copy(update={"reference_decision": "permit"}),
        }
    )
    shown = case_view(to_candidate_input(case, "rtb-fixed"))
    assert shown == case_view(to_candidate_input(relabelled, "rtb-fixed"))


def test_a_second_review_by_one_reviewer_is_refused_on_the_page_and_nothing_is_rewritten(
    tmp_path: Path,
) -> None:
    corpus, record, roster = adjudication_setup(tmp_path)

    async def driver(client: TestClient, tokens: dict[str, str]) -> tuple[str, bytes, str]:
        token = tokens["rev-a"]
        page = await (await client.get(f"/s/{token}")).text()
        form = answer(page, corpus, "rev-a")
        await client.post(f"/s/{token}/submit", data=form)
        before = record.read_bytes()
        # The same form again (a second tab, a resubmitted page): refused by the record itself.
        again = await (await client.post(f"/s/{token}/submit", data=form)).text()
        return again, before, shown_case(page, corpus)

    again, before, case_id = serve(record, roster, driver)
    assert "Not recorded" in again
    assert f"rev-a already reviewed {case_id} (adjudicate-serve:" in again
    assert "a review is never replaced; nothing was recorded" in again
    assert "rev-a reads a1" not in again  # the next case's form is not filled with the old one
    assert record.read_bytes() == before
    assert len(read_record(record).reviews()) == 1


def test_a_review_the_record_refuses_is_shown_on_the_page_with_its_reason(tmp_path: Path) -> None:
    corpus, record, roster = adjudication_setup(tmp_path)

    async def driver(client: TestClient, tokens: dict[str, str]) -> list[str]:
        token = tokens["rev-a"]
        page = await (await client.get(f"/s/{token}")).text()
        form = dict(answer(page, corpus, "rev-a"))
        pages = []
        for bad in ({"confidence": "2"}, {"confidence": "high"}, {"facts_relied_on": "zz9"}):
            data = {**form, **bad}
            pages.append(await (await client.post(f"/s/{token}/submit", data=data)).text())
        return pages

    before = record.read_bytes()
    pages = serve(record, roster, driver)
    assert all("Not recorded" in page for page in pages)
    assert "confidence: Input should be less than or equal to 1" in pages[0]
    assert "confidence: could not convert" in pages[1]
    assert "zz9 is not a record of this case" in pages[2]
    assert 'value="high"' in pages[1]  # the form comes back as it was filled in
    assert record.read_bytes() == before


def test_wrong_token_wrong_host_a_post_without_the_apps_origin_and_a_broken_form_are_refused(
    tmp_path: Path,
) -> None:
    corpus, record, roster = adjudication_setup(tmp_path)

    async def driver(client: TestClient, tokens: dict[str, str]) -> list[int]:
        token = tokens["rev-a"]
        page = await (await client.get(f"/s/{token}")).text()
        form = answer(page, corpus, "rev-a")
        forged = token[:-2] + ("aa" if not token.endswith("aa") else "bb")
        statuses = [
            (await client.get(f"/s/{forged}")).status,
            (await client.get("/s/rev-a")).status,
            (await client.post(f"/s/{forged}/submit", data=form)).status,
            (await client.get(f"/s/{token}", headers={"Host": "evil.example"})).status,
        ]
        for headers in ({"Origin": ""}, {"Origin": "http://evil.example"}):
            response = await client.post(f"/s/{token}/submit", data=form, headers=headers)
            statuses.append(response.status)
        broken = b'--zz\r\nContent-Disposition: form-data; name="decision"\r\n\r\nhold\r\n--z'
        multipart = {"Content-Type": "multipart/form-data; boundary=zz"}
        response = await client.post(f"/s/{token}/submit", data=broken, headers=multipart)
        statuses.append(response.status)
        for path in ("/record.jsonl", "/roster.json", "/corpus/cases/ho-03.json"):
            statuses.append((await client.get(path)).status)
        return statuses

    before = record.read_bytes()
    assert serve(record, roster, driver) == [403, 403, 403, 403, 403, 403, 400, 404, 404, 404]
    assert record.read_bytes() == before


def test_adjudication_is_refused_where_the_protocol_settles_disagreements_by_its_rule(
    tmp_path: Path,
) -> None:
    _, record, roster = adjudication_setup(tmp_path, rule="unanimous")
    with (
        pytest.raises(InputError, match="adjudicators are listed, but the protocol's rule is"),
        open_adjudication(record, roster),
    ):
        pass
    loaded = loaded_corpus(read_record(record), None)
    adjudicator = read_roster(tmp_path / "roster.json").adjudicators[0]
    with pytest.raises(InputError, match="the protocol's rule is unanimous"):
        record_adjudication(
            read_record(record),
            loaded,
            "adjudicate-serve",
            adjudicator,
            ReferenceReview(case_id=DISAGREEMENT, decision="hold"),
        )


def test_a_roster_naming_one_person_twice_or_nobody_is_refused_naming_the_file(
    tmp_path: Path,
) -> None:
    roster = tmp_path / "roster.json"
    roster.write_text(json.dumps({**ROSTER, "adjudicators": ROSTER["reviewers"][:1]}))
    with pytest.raises(InputError, match=r"roster.json: reviewer id\(s\) listed twice: rev-a"):
        read_roster(roster)
    roster.write_text(json.dumps({"reviewers": [{"reviewer_id": "rev a", "role": "x"}]}))
    with pytest.raises(InputError, match=r"roster.json: reviewers.0.reviewer_id"):
        read_roster(roster)
    roster.write_text("{}")
    with pytest.raises(InputError, match="no reviewers and no adjudicators"):
        read_roster(roster)


def test_serve_with_a_bad_roster_exits_2_in_one_line_before_listening(tmp_path: Path) -> None:
    _, record, roster = adjudication_setup(tmp_path)
    roster.write_text(json.dumps({"reviewers": [{"reviewer_id": "rev-a"}]}))
    done = subprocess.run(
        [sys.executable, "-m", "trustbench", "rtb", "adjudicate", "serve", str(record),
         "--reviewers", str(roster), "--port", "0"],
        capture_output=True, text=True, check=False, env=child_env(tmp_path), timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    assert "roster.json: reviewers.0.role: Field required" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert "serving" not in done.stdout
