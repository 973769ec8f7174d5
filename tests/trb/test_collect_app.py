"""The TRB collection app over HTTP: sessions, ledger, guards, withdrawal, export."""

from __future__ import annotations

import asyncio
import html as html_lib
import json
import re
import socket
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.support.cli import invoke
from tests.trb.collect_fixtures import (
    PROTOCOL,
    counterfactual_plan,
    frozen_collection,
    nonce,
    page_kind,
    serve,
)

from trustbench.core import read_ledger
from trustbench.errors import CheckFailed
from trustbench.trb.collect import export_collection, freeze_protocol
from trustbench.trb.collect._export import split_shares
from trustbench.trb.corpus._generate import generate_split, generate_text_corpus
from trustbench.trb.corpus._store import read_corpus, write_corpus
from trustbench.trb.instruments._oracles import GovernedOracle
from trustbench.trb.measures._governance import governance_rows


async def step(client: TestClient, token: str, page: str, cause: str = "self") -> str:
    """Answer the page shown: the r' plan on an item, `cause` on an outcome."""
    if page_kind(page) == "item":
        data = {"nonce": nonce(page), "action": counterfactual_plan(page), "note": ""}
        response = await client.post(f"/s/{token}/answer", data=data)
    else:
        response = await client.post(f"/s/{token}/attribute",
                                     data={"nonce": nonce(page), "cause": cause})  # fmt: skip
    assert response.status == 200
    return await response.text()


async def complete(client: TestClient, token: str, limit: int = 100) -> int:
    """Answer every page of a session; return how many forms were posted."""
    page = await (await client.get(f"/s/{token}")).text()
    posted = 0
    while page_kind(page) != "complete" and posted < limit:
        page = await step(client, token, page)
        posted += 1
    return posted


def test_two_sessions_land_in_the_ledger_and_export_to_a_valid_human_corpus(
    tmp_path: Path,
) -> None:
    folder = frozen_collection(tmp_path)

    async def driver(client: TestClient, tokens: dict[str, str]) -> list[int]:
        return [await complete(client, tokens["p01"]), await complete(client, tokens["p02"])]

    assert serve(folder, driver) == [16, 16]  # 8 items each, each with an outcome page
    kinds = [e["kind"] for e in read_ledger(folder).events]
    assert kinds.count("collect_answer") == 16 and kinds.count("collect_attribution") == 16
    report = export_collection(folder, tmp_path / "out")
    manifest, splits = read_corpus(tmp_path / "out" / "human")
    assert manifest.kind == "human_paired" and manifest.provenance.cap_status == "met"
    assert manifest.provenance.human == 8 and manifest.provenance.synthetic == 0
    human = [cf for t in splits["eval"] for s in t.steps for cf in s.counterfactuals]
    assert all(cf.collected is not None and cf.collected.answers == 2 for cf in human)
    assert {p for cf in human for p in cf.collected.participants} == {"p01", "p02"}  # type: ignore[union-attr]
    assert report["agreement"]["pairwise_agreement"] == 1.0  # both follow r''s stated plan
    assert report["agreement"]["human_ceiling_G"] == 1.0
    assert len([t for t in splits["eval"] if "~" in t.trace_id]) == 16  # Track 3 outcomes
    assert report["attribution"]["answers"] == 16
    assert read_corpus(tmp_path / "out" / "synthetic")[0].kind == "reference_world"


def test_the_outcome_page_never_shows_the_gust_or_the_cause_label(tmp_path: Path) -> None:
    folder = frozen_collection(tmp_path)
    pages: list[str] = []

    async def driver(client: TestClient, tokens: dict[str, str]) -> None:
        page = await (await client.get(f"/s/{tokens['p01']}")).text()
        while page_kind(page) != "complete":
            pages.append(page)
            page = await step(client, tokens["p01"], page)

    serve(folder, driver)
    outcomes = [p for p in pages if page_kind(p) == "outcome"]
    assert len(outcomes) == 8
    for page in outcomes:
        assert "gust" not in page.lower() and "caused_by_self" not in page
        assert "eval-" not in page  # no trace id on any page


def test_a_cross_origin_post_is_refused(tmp_path: Path) -> None:
    folder = frozen_collection(tmp_path)

    async def driver(client: TestClient, tokens: dict[str, str]) -> tuple[int, int]:
        page = await (await client.get(f"/s/{tokens['p01']}")).text()
        data = {"nonce": nonce(page), "action": "stay"}
        evil = await client.post(f"/s/{tokens['p01']}/answer", data=data,
                                 headers={"Origin": "http://evil.example"})  # fmt: skip
        none = await client.post(f"/s/{tokens['p01']}/answer", data=data)
        return evil.status, none.status

    assert serve(folder, driver, origin=False) == (403, 403)
    assert not [e for e in read_ledger(folder).events if e["kind"] == "collect_answer"]


def test_a_foreign_origin_is_refused_whatever_sec_fetch_site_says(tmp_path: Path) -> None:
    folder = frozen_collection(tmp_path)

    async def driver(client: TestClient, tokens: dict[str, str]) -> int:
        page = await (await client.get(f"/s/{tokens['p01']}")).text()
        data = {"nonce": nonce(page), "action": "stay"}
        headers = {"Origin": "http://evil.example", "Sec-Fetch-Site": "same-origin"}
        return (await client.post(f"/s/{tokens['p01']}/answer", data=data, headers=headers)).status

    assert serve(folder, driver, origin=False) == 403
    assert not [e for e in read_ledger(folder).events if e["kind"] == "collect_answer"]


def test_a_host_header_naming_another_host_is_refused(tmp_path: Path) -> None:
    folder = frozen_collection(tmp_path)

    async def driver(client: TestClient, tokens: dict[str, str]) -> tuple[int, int]:
        port = client.make_url("").port
        bad = await client.get(f"/s/{tokens['p01']}", headers={"Host": f"evil.example:{port}"})
        good = await client.get(f"/s/{tokens['p01']}", headers={"Host": f"localhost:{port}"})
        return bad.status, good.status

    assert serve(folder, driver) == (403, 200)


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b"--x\r\nContent-Disposition: form-data; name=\"action\"\r\n\r\nstay",
         "multipart/form-data"),
        (b"action=stay", "multipart/form-data; boundary=zz"),
        (b"--b\r\nContent-Disposition: form-data; name=\"action\"; filename=\"a\"\r\n\r\n"
         b"x\r\n--b--\r\n", "multipart/form-data; boundary=b"),
    ],
)  # fmt: skip
def test_a_malformed_body_is_answered_400(tmp_path: Path, body: bytes, content_type: str) -> None:
    folder = frozen_collection(tmp_path)

    async def driver(client: TestClient, tokens: dict[str, str]) -> int:
        await client.get(f"/s/{tokens['p01']}")
        response = await client.post(f"/s/{tokens['p01']}/answer", data=body,
                                     headers={"Content-Type": content_type})  # fmt: skip
        return response.status

    assert serve(folder, driver) == 400


def test_a_body_its_content_encoding_does_not_decode_is_answered_400(tmp_path: Path) -> None:
    folder = frozen_collection(tmp_path)

    async def driver(client: TestClient, tokens: dict[str, str]) -> tuple[int, str]:
        await client.get(f"/s/{tokens['p01']}")
        response = await client.post(
            f"/s/{tokens['p01']}/answer",
            data=b"action=stay (not gzip at all)",
            headers={
                "Content-Type": "application/x-www-form-urlencoded",
                "Content-Encoding": "gzip",
            },
        )
        return response.status, await response.text()

    status, text = serve(folder, driver)
    assert status == 400
    assert text.startswith("malformed form")


def test_an_unknown_token_and_a_stale_form_are_refused(tmp_path: Path) -> None:
    folder = frozen_collection(tmp_path)

    async def driver(client: TestClient, tokens: dict[str, str]) -> tuple[int, str]:
        unknown = await client.get("/s/not-a-token")
        await client.get(f"/s/{tokens['p01']}")
        stale = await client.post(f"/s/{tokens['p01']}/answer",
                                  data={"nonce": "00", "action": "stay"})  # fmt: skip
        return unknown.status, await stale.text()

    status, page = serve(folder, driver)
    assert status == 403 and "no longer open" in page
    assert [e["kind"] for e in read_ledger(folder).events].count("collect_rejected") == 1


def test_a_withdrawn_session_is_left_out_of_the_export(tmp_path: Path) -> None:
    folder = frozen_collection(tmp_path)

    async def driver(client: TestClient, tokens: dict[str, str]) -> str:
        await complete(client, tokens["p01"])
        await complete(client, tokens["p02"], limit=3)
        response = await client.post(f"/s/{tokens['p02']}/withdraw", data={"confirm": "yes"})
        return await response.text()

    assert page_kind(serve(folder, driver)) == "withdrawn"
    report = export_collection(folder, tmp_path / "out")
    assert report["sessions"]["p02"]["withdrawn"] is True
    _, splits = read_corpus(tmp_path / "out" / "human")
    human = [cf for t in splits["eval"] for s in t.steps for cf in s.counterfactuals]
    assert {p for cf in human if cf.collected for p in cf.collected.participants} == {"p01"}
    assert report["agreement"]["items"] == 0  # one session left: no agreement to report


def test_an_export_with_no_answer_is_refused(tmp_path: Path) -> None:
    folder = frozen_collection(tmp_path)
    serve(folder, lambda client, tokens: asyncio.sleep(0))
    with pytest.raises(CheckFailed, match="0 human counterfactuals"):
        export_collection(folder, tmp_path / "out")


def test_a_participant_without_the_required_qualification_is_refused_at_freeze(
    tmp_path: Path,
) -> None:
    protocol = PROTOCOL.replace('id = "p01"\nsplit = "eval"\nqualifications = ["consent"]',
                                'id = "p01"\nsplit = "eval"\nqualifications = []')  # fmt: skip
    assert protocol != PROTOCOL
    (tmp_path / "protocol.toml").write_text(protocol, encoding="utf-8")
    code, output = invoke("trb", "collect", "freeze", str(tmp_path / "protocol.toml"),
                          "--out", str(tmp_path / "c"))  # fmt: skip
    assert code == 2
    assert "p01 lacks qualification" in output


def test_a_hand_edited_protocol_is_refused(tmp_path: Path) -> None:
    folder = frozen_collection(tmp_path)
    path = folder / "protocol.json"
    data = json.loads(path.read_text())
    data["protocol"]["session"]["show_model_continuation"] = True
    path.write_text(json.dumps(data))
    with pytest.raises(CheckFailed, match="differs from its recorded hash"):
        serve(folder, lambda client, tokens: asyncio.sleep(0))


def test_track_1_counts_split_g_by_where_phi_came_from(tmp_path: Path) -> None:
    protocol = PROTOCOL.replace('r_prime_slots = ["goal", "belief", "planned_next", "confidence"]',
                                'r_prime_slots = ["goal", "belief"]')  # fmt: skip
    folder = frozen_collection(tmp_path, protocol)

    async def driver(client: TestClient, tokens: dict[str, str]) -> None:
        await complete(client, tokens["p01"])

    serve(folder, driver)
    report = export_collection(folder, tmp_path / "out")
    _, splits = read_corpus(tmp_path / "out" / "human")
    rows = governance_rows(GovernedOracle(), splits["eval"])
    human = sum(r["human_phi_items"] for r in rows)
    assert (human, sum(r["synthetic_phi_items"] for r in rows)) == (4, 4)
    assert sum(r["synthetic_phi_tv_sum"] for r in rows) == pytest.approx(0.0)  # its own Phi
    g_human = 1 - sum(r["human_phi_tv_sum"] for r in rows) / human
    assert g_human == pytest.approx(report["reference_agent"]["G_against_human"])
    assert report["splits"]["eval"]["label"] == "cap 3:1 met"


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(text=st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_a_malformed_protocol_file_is_one_clear_error_never_a_traceback(
    tmp_path: Path, text: bytes
) -> None:
    (tmp_path / "p.toml").write_bytes(text)
    code, _ = invoke("trb", "collect", "freeze", str(tmp_path / "p.toml"),
                     "--out", str(tmp_path / "c"))  # fmt: skip
    assert code == 2


def test_a_split_over_the_cap_is_labelled_so(tmp_path: Path) -> None:
    traces = generate_split("eval", 1, seed=11)
    step = traces[0].steps[0]
    human = step.counterfactuals[0].model_copy(
        update={"provenance": "paired_session", "continuation_source": "human"}
    )
    steps = (step.model_copy(update={"counterfactuals": (human, *step.counterfactuals[1:])}),
             *traces[0].steps[1:])  # fmt: skip
    over = [traces[0].model_copy(update={"steps": steps})]  # 1 human, 23 synthetic
    shares = split_shares({"eval": over})
    assert shares["eval"]["over_cap"] is True
    assert shares["eval"]["label"] == "OVER the 3:1 synthetic:human cap"


def test_the_model_continuation_is_shown_only_when_the_protocol_says_so(tmp_path: Path) -> None:
    async def first_page(client: TestClient, tokens: dict[str, str]) -> str:
        return await (await client.get(f"/s/{tokens['p01']}")).text()

    hidden = serve(frozen_collection(tmp_path / "a"), first_page)
    shown_protocol = PROTOCOL.replace("show_model_continuation = false",
                                      "show_model_continuation = true")  # fmt: skip
    shown = serve(frozen_collection(tmp_path / "b", shown_protocol), first_page)
    assert 'id="model-continuation"' in shown and 'id="model-continuation"' not in hidden


def test_serving_on_a_port_in_use_is_refused_at_once(tmp_path: Path) -> None:
    folder = frozen_collection(tmp_path)
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        code, output = invoke("trb", "collect", "serve", str(folder), "--port", str(port))
    assert code == 2 and f"cannot listen on 127.0.0.1:{port}" in output


def test_a_text_world_collection_shows_the_task_in_words_and_exports_a_text_corpus(
    tmp_path: Path,
) -> None:
    (tmp_path / "source").mkdir()
    text_eval = generate_text_corpus({"train": 0, "dev": 0, "eval": 2, "transfer": 0}, seed=4)
    write_corpus(tmp_path / "source", {"eval": text_eval["eval"]})
    (tmp_path / "protocol.toml").write_text(PROTOCOL, encoding="utf-8")
    folder = tmp_path / "collection"
    freeze_protocol(tmp_path / "protocol.toml", folder)
    pages: list[str] = []

    async def driver(client: TestClient, tokens: dict[str, str]) -> None:
        for who in ("p01", "p02"):
            page = await (await client.get(f"/s/{tokens[who]}")).text()
            while page_kind(page) != "complete":
                pages.append(page)
                if page_kind(page) == "item":
                    plan = re.search(r"<th>Next step</th><td>[^<]*</td><td[^>]*>([^<]*)</td>", page)
                    assert plan, page[:2000]
                    words = html_lib.unescape(plan.group(1))
                    action = re.search(
                        rf'value="(\w+)" required> {re.escape(html_lib.escape(words))}', page
                    )
                    assert action, page[:3000]
                    data = {"nonce": nonce(page), "action": action.group(1), "note": ""}
                    response = await client.post(f"/s/{tokens[who]}/answer", data=data)
                else:
                    data = {"nonce": nonce(page), "cause": "self"}
                    response = await client.post(f"/s/{tokens[who]}/attribute", data=data)
                page = await response.text()

    serve(folder, driver)
    item = next(p for p in pages if page_kind(p) == "item")
    assert 'id="situation"' in item and "corridor" not in item.split("<main", 1)[-1]
    assert "Task: " in item and "Options:" not in item  # the model's instruction is not shown
    assert any(p for p in pages if page_kind(p) == "outcome" and "The level was" in p)
    export_collection(folder, tmp_path / "out")
    manifest, splits = read_corpus(tmp_path / "out" / "human")
    assert manifest.world_id == "text-ops"
    assert all(t.task is not None for t in splits["eval"])
