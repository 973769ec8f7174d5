"""The review app under hostile or broken input: malformed forms, foreign origins, SIGTERM."""

from __future__ import annotations

import signal
from pathlib import Path

import aiohttp
from aiohttp.test_utils import TestClient
from tests.rtb.test_human_app import serve
from tests.rtb.test_human_browser import start_server
from tests.rtb.test_human_fixtures import runs  # noqa: F401

from trustbench.core import read_ledger

BROKEN_MULTIPART = b'--zzz\r\nContent-Disposition: form-data; name="decision"\r\n\r\npermit\r\n--zz'


def _submissions(run_dir: Path) -> int:
    if not (run_dir / "ledger.sqlite").exists():
        return 0
    return len(read_ledger(run_dir).attempts)


def test_malformed_or_non_text_forms_are_answered_400_and_record_nothing(
    runs: tuple[Path, Path],  # noqa: F811
) -> None:
    _, human_dir = runs

    async def driver(client: TestClient, tokens: dict[str, str]) -> list[int]:
        url = f"/s/{tokens['sre-cab-p01']}/submit"
        await client.get(f"/s/{tokens['sre-cab-p01']}")
        statuses = []
        for content_type, body in [
            ("multipart/form-data; boundary=zzz", BROKEN_MULTIPART),
            ("multipart/form-data", b"no boundary at all"),
        ]:
            response = await client.post(url, data=body, headers={"Content-Type": content_type})
            statuses.append(response.status)
        upload = aiohttp.FormData()
        upload.add_field("decision", b"permit", filename="decision.txt")
        statuses.append((await client.post(url, data=upload)).status)
        return statuses

    before = _submissions(human_dir)
    statuses = serve(human_dir, driver)
    assert statuses == [400, 400, 400]
    assert _submissions(human_dir) == before


def test_posts_without_this_apps_origin_are_refused_403(
    runs: tuple[Path, Path],  # noqa: F811
) -> None:
    _, human_dir = runs

    async def driver(client: TestClient, tokens: dict[str, str]) -> list[int]:
        own = str(client.make_url("")).rstrip("/")
        base = f"/s/{tokens['sre-cab-p01']}"
        await client.get(base)
        statuses = []
        for headers in [
            {"Origin": ""},
            {"Origin": "null"},
            {"Origin": "http://evil.example"},
            {"Origin": own.replace("127.0.0.1", "localhost")},
            {"Origin": "", "Referer": "http://evil.example/page"},
            {"Origin": "null", "Sec-Fetch-Site": "cross-site"},
        ]:
            response = await client.post(f"{base}/pause", headers=headers)
            statuses.append(response.status)
        allowed = await client.post(
            f"{base}/pause", headers={"Origin": "", "Referer": f"{own}{base}"}
        )
        statuses.append(allowed.status)
        browser = await client.post(
            f"{base}/resume", headers={"Origin": "null", "Sec-Fetch-Site": "same-origin"}
        )
        statuses.append(browser.status)
        return statuses

    statuses = serve(human_dir, driver)
    assert statuses == [403, 403, 403, 403, 403, 403, 200, 200]
    paused = [e for e in read_ledger(human_dir).events if e["kind"] == "human_paused"]
    assert len(paused) >= 1, "the same-origin pause went through"


def test_a_foreign_origin_is_refused_403_whatever_sec_fetch_site_says(
    runs: tuple[Path, Path],  # noqa: F811
) -> None:
    _, human_dir = runs

    async def driver(client: TestClient, tokens: dict[str, str]) -> list[int]:
        base = f"/s/{tokens['sre-cab-p01']}"
        await client.get(base)
        statuses = []
        for headers in [
            {"Origin": "http://evil.example", "Sec-Fetch-Site": "same-origin"},
            {"Origin": "null", "Referer": "http://evil.example/", "Sec-Fetch-Site": "same-origin"},
        ]:
            statuses.append((await client.post(f"{base}/pause", headers=headers)).status)
        return statuses

    assert serve(human_dir, driver) == [403, 403]


def test_sigterm_pauses_open_cases_like_ctrl_c_and_signs_the_ledger_off(
    runs: tuple[Path, Path],  # noqa: F811
) -> None:
    import asyncio

    _, human_dir = runs
    server, links = start_server(human_dir)
    try:

        async def open_case() -> int:
            async with aiohttp.ClientSession() as http, http.get(links["sre-cab-p01"]) as got:
                return got.status

        assert asyncio.run(open_case()) == 200
        server.send_signal(signal.SIGTERM)
        output, _ = server.communicate(timeout=30)
    finally:
        if server.poll() is None:
            server.kill()
    assert server.returncode == 0, output
    events = read_ledger(human_dir).events
    shown = [e for e in events if e["kind"] == "human_case_shown"]
    paused = [e for e in events if e["kind"] == "human_paused"]
    assert shown and paused and paused[-1]["seq"] > shown[-1]["seq"]
    assert events[-1]["kind"] == "run_finished"


def test_a_body_its_content_encoding_does_not_decode_is_answered_400_and_records_nothing(
    runs: tuple[Path, Path],  # noqa: F811
) -> None:
    _, human_dir = runs

    async def driver(client: TestClient, tokens: dict[str, str]) -> tuple[int, str]:
        url = f"/s/{tokens['sre-cab-p01']}/submit"
        await client.get(f"/s/{tokens['sre-cab-p01']}")
        response = await client.post(
            url,
            data=b"decision=deny (not gzip at all)",
            headers={
                "Content-Type": "application/x-www-form-urlencoded",
                "Content-Encoding": "gzip",
            },
        )
        return response.status, await response.text()

    before = _submissions(human_dir)
    status, text = serve(human_dir, driver)
    assert status == 400
    assert text.startswith("malformed form")
    assert _submissions(human_dir) == before
