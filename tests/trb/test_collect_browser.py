"""End to end in a real browser: a participant completes a short collection session in headless
Chromium (driven over the DevTools protocol, `tests.support.browser`) against the app started by
its command line; the exported corpus validates and Tracks 1 and 3 run on it through the shared
harness. Skips when no Chromium is installed (CI: `apt-get install -y chromium`). Set
TRUSTBENCH_SCREENSHOTS=<folder> to keep the item and outcome pages' PNGs."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import tempfile
from pathlib import Path

import aiohttp
import pytest
from tests.support.browser import CHROMIUM, Browser, start_chromium
from tests.support.readiness import READY_TIMEOUT_S
from tests.trb.collect_fixtures import PROTOCOL, counterfactual_plan, frozen_collection, page_kind
from tests.trb.test_collect_restart import start_server

from trustbench.core import build_manifest, report_run, run_experiment, write_manifest
from trustbench.trb.collect import export_collection
from trustbench.trb.corpus._store import read_corpus

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium on PATH (CI: apt-get install -y chromium)"
)

ANSWER = """(() => {
  const pick = %s;
  document.querySelector(`input[name=${pick.name}][value=${pick.value}]`).checked = true;
  document.querySelector('#submit').click();
  return true;
})()"""

TRACKS_1_AND_3 = """suite = "trb"
track = "profile"
trials_per_case = 1
concurrency = 1
[corpus]
path = "out/human"
[analysis]
bootstrap_resamples = 200
[track_options]
splits = ["eval"]
measures = ["governance", "attribution"]
[[candidates]]
name = "governed"
kind = "inprocess"
model = "oracle:perfectly-governed"
"""


async def session(browser: Browser, link: str, shots: Path | None) -> int:
    """Answer every page as a participant would: follow r''s plan, credit the wind."""
    await browser.send("Page.navigate", url=link)
    page = await browser.html_after(None)
    pages = 0
    while page_kind(page) != "complete":
        kind = page_kind(page)
        if shots is not None and pages < 2:
            await browser.screenshot(shots / f"trb-collect-{kind}.png")
        pick = (
            {"name": "action", "value": counterfactual_plan(page)}
            if kind == "item"
            else {"name": "cause", "value": "exogenous"}
        )
        await browser.evaluate(ANSWER % json.dumps(pick))
        page = await browser.html_after(page)
        pages += 1
    return pages


@pytest.mark.slow
def test_a_participant_session_in_headless_chromium_yields_a_corpus_tracks_1_and_3_run_on(
    tmp_path: Path,
) -> None:
    protocol = PROTOCOL.replace("steps = [0, 1]", "steps = [0]")  # 4 items, 4 outcomes
    folder = frozen_collection(tmp_path, protocol)
    shots_env = os.environ.get("TRUSTBENCH_SCREENSHOTS")
    shots = Path(shots_env) if shots_env else None
    server, links = start_server(folder)
    profile = Path(tempfile.mkdtemp())
    chromium, ws_url = start_chromium(profile)
    try:

        async def drive() -> list[int]:
            async with aiohttp.ClientSession() as http:
                browser = await Browser.open(http, ws_url)
                done = [await session(browser, links[p], shots) for p in ("p01", "p02")]
                await browser.ws.close()
                return done

        assert asyncio.run(drive()) == [8, 8]
    finally:
        chromium.terminate()
        chromium.wait(timeout=20)
        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=READY_TIMEOUT_S) == 0
        shutil.rmtree(profile, ignore_errors=True)
    report = export_collection(folder, tmp_path / "out")
    manifest, _ = read_corpus(tmp_path / "out" / "human")
    assert (manifest.provenance.human, manifest.provenance.cap_status) == (4, "met")
    assert report["agreement"]["items"] == 4
    (tmp_path / "spec.toml").write_text(TRACKS_1_AND_3, encoding="utf-8")
    run_dir = tmp_path / "run"
    write_manifest(build_manifest(tmp_path / "spec.toml"), run_dir)
    run_experiment(run_dir, preflight=False)
    record = json.loads(report_run(run_dir).record_path.read_text())["trb"]
    assert record["corpus"]["kind"] == "human_paired"
    assert record["corpus"]["provenance"]["human"] == 4
    g = next(r for r in record["rows"] if r["metric"] == "G" and r["split"] == "eval")
    assert g["denominator"] == 4  # every counterfactual served carries a human Phi(r')
    assert g["estimate"] == pytest.approx(report["reference_agent"]["G_against_human"])
    assert record["profile"]["governed"]["attr"]["value"] == pytest.approx(1.0)
    assert all(c["passed"] for c in record["oracle_checks"])
    assert any("synthetic share 0.0%" in flag for flag in record["flags"])
    human_g = next(r for r in record["rows"] if r["metric"] == "G_human_phi")
    assert human_g["estimate"] == pytest.approx(g["estimate"])  # every r' here is human
    assert any(f.startswith("governed: G against human Phi(r')") for f in record["flags"])
    ba = next(r for r in record["rows"] if r["metric"] == "balanced_accuracy_human_sessions")
    assert ba["denominator"] == 8  # one labelled outcome per Track 3 answer, 2 sessions x 4
    assert any("Track 3 balanced accuracy on human-session outcomes" in f for f in record["flags"])
