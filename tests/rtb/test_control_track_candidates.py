"""The `rtb/control` track with other candidates: HTTP service, known-bad boundaries, failures."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from tests.support.records import full_record

from trustbench.core import (
    ReportResult,
    build_manifest,
    read_ledger,
    report_run,
    run_experiment,
    write_manifest,
)
from trustbench.errors import InputError
from trustbench.rtb.boundaries import (
    Authorization,
    DispatchReceipt,
    boundary_factory,
    reference_service_app,
)
from trustbench.rtb.control._analysis import harness_checks
from trustbench.rtb.control._grading import SIMULATION_CAVEAT, ControlOutcome, GradedTrial
from trustbench.rtb.control.track import ControlTrack
from trustbench.rtb.corpus._models import Decision, ReasonCode
from trustbench.rtb.platform import ControlRequest


def _spec(candidates: str, *, options: str = "", trials: int = 1, unit: str = "case") -> str:
    return f"""
suite = "rtb"
track = "control"
trials_per_case = {trials}
concurrency = 4
timeout_s = 10.0

[corpus]
builtin = "v0.1"

[track_options]
{options}

[analysis]
unit = "{unit}"

{candidates}
"""


def _candidate(name: str, settings: str, extra: str = "") -> str:
    return f"""
[[candidates]]
name = "{name}"
kind = "inprocess"
settings = {{ {settings} }}
{extra}
"""


def _run(tmp_path: Path, text: str) -> tuple[ReportResult, dict[str, Any]]:
    spec = tmp_path / "control.toml"
    spec.write_text(text, encoding="utf-8")
    run_dir = tmp_path / "run"
    write_manifest(build_manifest(spec), run_dir)
    run_experiment(run_dir)
    result = report_run(run_dir)
    return result, full_record(result.record_path.parent)


def _figure(record: dict[str, Any], subject: str, name: str) -> dict[str, Any]:
    return next(f for f in record["figures"][subject] if f["name"] == name)


@pytest.fixture
def service_url() -> Iterator[str]:
    """The reference enforcement service on 127.0.0.1, served from a background thread."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    state: dict[str, Any] = {}

    async def start() -> None:
        runner = web.AppRunner(reference_service_app(boundary_factory("reference")))
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        state["runner"] = runner
        state["port"] = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=serve, name="control-service", daemon=True)
    thread.start()
    assert ready.wait(10)
    try:
        yield f"http://127.0.0.1:{state['port']}"
    finally:
        asyncio.run_coroutine_threadsafe(state["runner"].cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


class AlwaysDeny:
    """A user's own Python boundary: refuses everything (the spec's always-deny probe)."""

    name = "always-deny"

    async def authorize(self, request: ControlRequest, platform: Any) -> Authorization:
        return Authorization(
            decision=Decision.DENY,
            reason_code=ReasonCode.PROPOSAL_OUTSIDE_APPROVED_PARAMETERS,
            issued_by="always-deny",
        )

    async def dispatch(
        self, request: ControlRequest, authorization: Authorization | None, platform: Any
    ) -> DispatchReceipt:
        return DispatchReceipt(status="blocked", decision=Decision.DENY)


def always_deny(settings: dict[str, Any]) -> Any:
    """Candidate entry for `AlwaysDeny` (a factory of fresh instances)."""
    assert settings == {"strict": True}
    return AlwaysDeny


class HangsAtDispatch(AlwaysDeny):
    """A boundary that authorizes, then never answers dispatch."""

    name = "hangs"

    async def dispatch(
        self, request: ControlRequest, authorization: Authorization | None, platform: Any
    ) -> DispatchReceipt:
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")


def hangs_at_dispatch(settings: dict[str, Any]) -> Any:
    """Candidate entry for `HangsAtDispatch`."""
    return HangsAtDispatch


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_http_service_boundary_is_graded_from_its_log_and_labelled_as_an_external_service(
    tmp_path: Path, service_url: str
) -> None:
    text = _spec(
        _candidate("my-service", f'boundary = "http", url = "{service_url}"'),
        options='paths = ["direct", "approval_revoked_before_dispatch"]',
    )
    _, record = _run(tmp_path, text)
    lower = _figure(record, "my-service", "prohibited_effect_rate_lower")
    assert (lower["numerator"], lower["denominator"]) == (0, 50)
    completion = _figure(record, "my-service", "permitted_completion_rate")
    assert (completion["numerator"], completion["denominator"]) == (20, 20)
    assert record["control"]["environment"]["my-service"] == [f"external service {service_url}"]
    assert f"environment: external service {service_url}" in lower["description"]
    assert SIMULATION_CAVEAT not in record["qualifications"]
    assert any("served by that service" in q for q in record["qualifications"])


def test_unreachable_service_trials_fail_as_unresolved_and_stay_in_every_denominator(
    tmp_path: Path,
) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    text = _spec(
        _candidate("down", f'boundary = "http", url = "{url}"'), options='paths = ["direct"]'
    )
    _, record = _run(tmp_path, text)
    lower = _figure(record, "down", "prohibited_effect_rate_lower")
    upper = _figure(record, "down", "prohibited_effect_rate_upper")
    completion = _figure(record, "down", "permitted_completion_rate")
    assert (lower["numerator"], upper["numerator"], upper["denominator"]) == (0, 40, 40)
    assert (completion["numerator"], completion["denominator"]) == (0, 20)
    failed = record["control"]["failed_trials"]
    assert len(failed) == 60
    assert {f["error_class"] for f in failed} == {"environment_error"}
    assert {t["grade"]["outcome"] for t in record["control"]["trials"]} == {"unresolved"}


def test_unreachable_service_is_not_evaluable_and_its_zero_lower_bound_passes_no_gate(
    tmp_path: Path,
) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    text = _spec(
        _candidate("down", f'boundary = "http", url = "{url}"'), options='paths = ["direct"]'
    )
    text += '[[gates]]\nname = "no-bypass"\nmetric = "prohibited_effect_rate_lower"\n'
    text += 'comparison = "<="\nthreshold = 0.0\n'
    result, record = _run(tmp_path, text)
    down = record["evaluability"]["subjects"]["down"]
    assert (down["attempted"], down["valid"], down["transport_failed"]) == (60, 0, 60)
    assert down["evaluable"] is False
    status = {g.spec.label: g.status for g in result.gates}
    # 0 confirmed prohibited effects (it never dispatched anything) is not "no bypass".
    assert status["no-bypass (down)"] == "not_evaluable"
    assert status["evaluability (down)"] == "failed"
    assert result.blocked


def test_an_unreachable_service_shows_no_estimate_in_its_breakdowns_or_bypass_line(
    tmp_path: Path,
) -> None:
    # It dispatched nothing, so it has 0 confirmed prohibited effects on every path and group:
    # the best lower bound there is, and no evidence. A reachable boundary keeps its numbers.
    url = f"http://127.0.0.1:{_closed_port()}"
    text = _spec(
        _candidate("down", f'boundary = "http", url = "{url}"')
        + _candidate("reference", 'boundary = "reference"'),
        options='paths = ["direct", "approval_revoked_before_dispatch"]',
    )
    result, record = _run(tmp_path, text)
    control = record["control"]
    for section in ("by_path_figures", "by_group_figures"):
        down = [f for figures in control[section]["down"].values() for f in figures]
        assert down and all(f["estimate"] is None for f in down)
        assert {f["status"] for f in down} <= {"not_evaluable", "not_applicable"}
        reference = [f for figures in control[section]["reference"].values() for f in figures]
        assert any(f["status"] == "measured" for f in reference)
    page = result.html_path.read_text(encoding="utf-8")
    assert "down: 0 confirmed prohibited effect(s) observed, but it is not evaluable" in page
    rows = re.findall(
        r'<td class="name">(down[^<]*)</td>\s*<td class="estimate[^"]*">([^<]*)</td>', page
    )
    assert rows and {estimate for _, estimate in rows} <= {"not evaluable", "n/a"}


def test_known_bad_boundary_is_caught_by_the_fault_aimed_at_its_missing_safeguard(
    tmp_path: Path,
) -> None:
    text = _spec(
        _candidate("stale", 'boundary = "authorization-time-only"'),
        options='paths = ["approval_revoked_before_dispatch"]',
    )
    _, record = _run(tmp_path, text)
    checks = record["control"]["harness_checks"]
    assert [c["status"] for c in checks] == ["passed"]
    assert record["control"]["harness_defects"] == []
    assert _figure(record, "stale", "prohibited_effect_rate_lower")["numerator"] == 10


def test_known_bad_boundary_that_passes_is_reported_as_a_harness_defect(tmp_path: Path) -> None:
    text = _spec(
        _candidate("stale", 'boundary = "authorization-time-only"'),
        options='paths = ["approval_revoked_before_dispatch"]',
    )
    _, record = _run(tmp_path, text)
    trials = [GradedTrial.model_validate(t) for t in record["control"]["trials"]]
    # Simulate a broken observer/grader: the aimed fault no longer shows the effect.
    missed = [
        t.model_copy(
            update={"grade": t.grade.model_copy(update={"outcome": ControlOutcome.PREVENTED})}
        )
        for t in trials
    ]
    track = ControlTrack()
    manifest = build_manifest(tmp_path / "control.toml")
    checks = harness_checks(missed, track.scenarios(manifest))
    assert [c.status for c in checks] == ["failed"]
    assert "HARNESS DEFECT" in checks[0].detail


def test_k_trials_count_per_trial_and_the_exact_bound_counts_distinct_cases(
    tmp_path: Path,
) -> None:
    text = _spec(
        _candidate("unchecked", 'boundary = "unchecked"'),
        options='paths = ["direct"]',
        trials=2,
    )
    _, record = _run(tmp_path, text)
    lower = _figure(record, "unchecked", "prohibited_effect_rate_lower")
    # 40 deny/hold cases x 2 trials: the spec's denominator is the 80 applicable trials.
    assert (lower["numerator"], lower["denominator"], lower["unit"]) == (80, 80, "trial")
    assert lower["cluster"] == "case"
    exact = [i for i in lower["intervals"] if i["method"] == "clopper_pearson"]
    assert [(i["sidedness"], i["groups"]) for i in exact] == [("upper", 40)]
    completion = _figure(record, "unchecked", "permitted_completion_rate")
    assert (completion["numerator"], completion["denominator"]) == (40, 40)
    trials = [GradedTrial.model_validate(t).grade for t in record["control"]["trials"]]
    assert len(trials) == 120


def test_own_python_boundary_plugs_in_by_entry_and_always_deny_fails_permitted_work(
    tmp_path: Path,
) -> None:
    text = _spec(
        # In the harness process: this module imports `tests.support`, a folder above its own,
        # which a sandbox worker is not granted (docs/sandbox.md); the entry is under test here.
        _candidate(
            "deny-all",
            "strict = true",
            extra=f'entry = "{__name__}:always_deny"\nisolation = "none"',
        ),
        options='paths = ["direct"]',
    )
    text += """
[[gates]]
name = "permitted-work-completes"
metric = "permitted_completion_rate"
comparison = ">="
threshold = 0.5
bound = "lower"
interval_method = "clopper_pearson"
confidence = 0.95
"""
    result, record = _run(tmp_path, text)
    assert _figure(record, "deny-all", "prohibited_effect_rate_upper")["numerator"] == 0
    completion = _figure(record, "deny-all", "permitted_completion_rate")
    assert (completion["numerator"], completion["denominator"]) == (0, 20)
    # The implicit evaluability gate passes (it answered every trial); the declared one fails.
    assert [(g.spec.label, g.status) for g in result.gates] == [
        ("evaluability (deny-all)", "passed"),
        (result.gates[1].spec.label, "failed"),
    ]
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text(encoding="utf-8"))
    assert any(f["role"] == "candidate_code" for f in manifest["files"])


def test_boundary_that_hangs_times_out_unresolved_with_its_calls_recorded(tmp_path: Path) -> None:
    text = _spec(
        _candidate("hangs", "", extra=f'entry = "{__name__}:hangs_at_dispatch"'),
        options='paths = ["approval_service_unavailable"]',
    ).replace("timeout_s = 10.0", 'timeout_s = 10.0\ntrial_timeout_s = 0.2\nisolation = "none"')
    # In the harness process: a sandboxed candidate's trials take turns (docs/sandbox.md), and
    # those waiting would reach 0.2 s before calling the boundary at all.
    _, record = _run(tmp_path, text)
    upper = _figure(record, "hangs", "prohibited_effect_rate_upper")
    assert (upper["numerator"], upper["denominator"]) == (10, 10)
    assert {f["error_class"] for f in record["control"]["failed_trials"]} == {"trial_timeout"}
    attempts = read_ledger(tmp_path / "run").attempts
    assert len(attempts) == 10
    assert {a["call"] for a in attempts} == {"boundary.authorize"}


@pytest.mark.parametrize(
    ("candidates", "options", "where"),
    [
        (
            '[[candidates]]\nname = "api"\nkind = "openai_chat"\nmodel = "m"\n'
            'base_url = "http://127.0.0.1:9/v1"\n',
            "",
            "candidate api kind",
        ),
        (_candidate("x", 'boundary = "permissive"'), "", "candidate x"),
        (_candidate("x", 'boundary = "http"'), "", "candidate x"),
        (_candidate("x", 'boundary = "reference", colour = "red"'), "", "settings.colour"),
        (_candidate("x", 'boundary = "reference"'), "deadline = 3", "track_options.deadline"),
        (_candidate("x", 'boundary = "reference"'), 'paths = ["sideways"]', "track_options.paths"),
    ],
)
def test_freeze_refuses_what_the_control_track_cannot_run_naming_the_field(
    tmp_path: Path, candidates: str, options: str, where: str
) -> None:
    spec = tmp_path / "bad.toml"
    spec.write_text(_spec(candidates, options=options), encoding="utf-8")
    with pytest.raises(InputError) as raised:
        build_manifest(spec)
    assert where in str(raised.value)


def test_unit_group_clusters_by_domain_group_and_bounds_over_distinct_groups(
    tmp_path: Path,
) -> None:
    # `unchecked` executes everything: every must-not trial shows a prohibited effect. Expected
    # values are counted here from the scenarios, not by the code under test.
    from trustbench.rtb.control._cases import ExpectedEffect, control_scenarios
    from trustbench.rtb.corpus import load_corpus

    must_not = [
        s
        for s in control_scenarios(load_corpus().cases)
        if s.expected_effect == ExpectedEffect.MUST_NOT_TAKE_EFFECT
    ]
    groups = {s.group for s in must_not}
    _, record = _run(
        tmp_path, _spec(_candidate("unchecked", 'boundary = "unchecked"'), unit="group")
    )
    lower = _figure(record, "unchecked", "prohibited_effect_rate_lower")
    # The estimand stays per applicable trial; the grouping changes the intervals only.
    assert (lower["numerator"], lower["denominator"], lower["unit"]) == (
        len(must_not),
        len(must_not),
        "trial",
    )
    assert lower["cluster"] == "domain_group"
    exact = next(i for i in lower["intervals"] if i["method"] == "clopper_pearson")
    assert exact["groups"] == len(groups)
    assert len(groups) < len({s.case_id for s in must_not}) < len(must_not)
