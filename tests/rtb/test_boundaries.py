"""Boundaries under test, graded from the observer on fixture cases and fault scenarios."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import cedarpy
import pytest
from aiohttp import web
from test_control_fixtures import make_case, make_cases

from trustbench.errors import InputError
from trustbench.rtb.boundaries import (
    KNOWN_BAD_FOR_FAULT,
    Boundary,
    CedarBoundary,
    HttpBoundary,
    HttpEnvironment,
    boundary_factory,
    reference_service_app,
)
from trustbench.rtb.control._audit import BoundaryEvaluation, evaluate_boundary
from trustbench.rtb.control._cases import (
    DIRECT_PATH,
    UNRECONCILED_SUFFIX,
    ControlScenario,
    control_scenarios,
    direct_scenarios,
)
from trustbench.rtb.control._grading import ControlOutcome
from trustbench.rtb.corpus._models import Variant
from trustbench.rtb.platform import FaultType, SimulatedPlatform
from trustbench.rtb.policy.narrow_v1._cedar import forbid_reasons, load_policy_text
from trustbench.rtb.policy.narrow_v1._control import evaluate_policy

SCENARIOS = control_scenarios(make_cases(), seed=7)
UNRECONCILED = [s for s in SCENARIOS if s.path.endswith(UNRECONCILED_SUFFIX)]


def _evaluate(name: str, scenarios: list[ControlScenario] = SCENARIOS) -> BoundaryEvaluation:
    return asyncio.run(evaluate_boundary(scenarios, boundary_factory(name)))


@pytest.mark.parametrize("name", ["reference", "cedar"])
def test_correct_boundaries_show_no_prohibited_effect_and_complete_permitted_work(
    name: str,
) -> None:
    counts = _evaluate(name).counts
    assert counts.prohibited_trials > 0 and counts.permitted_trials > 0
    assert counts.prohibited_confirmed == 0 and counts.prohibited_unresolved == 0
    assert counts.prevented == counts.prohibited_trials
    # Only the lost-response variant reconciled after the deadline may stay unresolved.
    assert counts.permitted_unresolved == len(UNRECONCILED) > 0
    assert counts.permitted_completed == counts.permitted_trials - len(UNRECONCILED)
    assert counts.bypasses == []
    assert counts.environment_strengths == ["simulated platform"]


@pytest.mark.parametrize("name", ["reference", "cedar", "unchecked", "retry-without-idempotency"])
def test_unreconciled_lost_response_is_unresolved_for_every_boundary(name: str) -> None:
    grades = _evaluate(name, UNRECONCILED).grades
    assert {g.outcome for g in grades} == {ControlOutcome.UNRESOLVED}


def test_unchecked_boundary_shows_every_prohibited_effect() -> None:
    counts = _evaluate("unchecked").counts
    assert counts.prohibited_confirmed == counts.prohibited_trials > 0
    assert {b.case_id for b in counts.bypasses} >= {
        c.case_id for c in make_cases() if c.expectations.reference_decision != "permit"
    }


def test_review_gated_boundary_bypasses_on_direct_requests_although_its_review_refused() -> None:
    direct = [s for s in SCENARIOS if s.path == DIRECT_PATH]
    evaluation = _evaluate("review-gated", direct)
    bypassed = [
        (run, grade)
        for run, grade in zip(evaluation.runs, evaluation.grades, strict=True)
        if grade.outcome == ControlOutcome.PROHIBITED_EFFECT
    ]
    assert len(bypassed) == evaluation.counts.prohibited_trials > 0
    # The reviewer caught every one of them; the executor ran them anyway.
    assert all(run.authorization and run.authorization.decision != "permit" for run, _ in bypassed)
    assert all(b.path == DIRECT_PATH for b in evaluation.counts.bypasses)


@pytest.mark.parametrize("fault", list(FaultType))
def test_each_fault_catches_its_known_bad_boundary_while_reference_passes(
    fault: FaultType,
) -> None:
    aimed = [s for s in SCENARIOS if s.path == fault.value]
    assert aimed, f"no scenario for {fault}"
    bad = _evaluate(KNOWN_BAD_FOR_FAULT[fault], aimed)
    good = _evaluate("reference", aimed)
    assert {g.outcome for g in bad.grades} == {ControlOutcome.PROHIBITED_EFFECT}
    assert ControlOutcome.PROHIBITED_EFFECT not in {g.outcome for g in good.grades}
    assert all(b.path == fault.value for b in bad.counts.bypasses)


def test_retry_without_idempotency_shows_a_duplicate_effect() -> None:
    aimed = [s for s in SCENARIOS if s.path == FaultType.RESPONSE_LOST_AFTER_COMMIT.value]
    grades = _evaluate("retry-without-idempotency", aimed).grades
    assert all(g.duplicate_effect for g in grades)


def test_known_bad_boundaries_behave_like_reference_on_unaffected_direct_requests() -> None:
    direct = direct_scenarios(make_cases())
    reference = [g.outcome for g in _evaluate("reference", direct).grades]
    for name in ("ignores-expiry", "authorization-time-only", "trusts-recovered-checkpoint"):
        assert [g.outcome for g in _evaluate(name, direct).grades] == reference


def test_cedar_and_reference_decide_every_fixture_case_alike() -> None:
    for case in make_cases():
        scenario = direct_scenarios([case])[0]
        platform = SimulatedPlatform("t", scenario.script.seed)
        expected = evaluate_policy(scenario.script.request, platform.view, approval_timeout_s=10)
        cedar = asyncio.run(CedarBoundary().authorize(scenario.script.request, platform.view))
        assert (cedar.decision, cedar.reason_code) == (expected.decision, expected.reason_code), (
            case.case_id
        )


def test_cedar_links_one_template_per_active_approval_and_unlinks_on_revocation() -> None:
    scenario = direct_scenarios([make_case("dns_changes", Variant.PERMITTED)])[0]
    platform = SimulatedPlatform("t", scenario.script.seed)
    boundary = CedarBoundary()
    request = scenario.script.request
    first = asyncio.run(boundary.authorize(request, platform.view))
    assert first.decision == "permit"
    assert boundary.linked_approval_ids() == ["APR-dns_changes"]
    platform.faults.revoke_approval("APR-dns_changes")
    second = asyncio.run(boundary.authorize(request, platform.view))
    assert boundary.linked_approval_ids() == []
    assert (second.decision, second.reason_code) == ("deny", "approval_revoked")


def test_cedar_policy_file_gives_every_forbid_a_reason_code() -> None:
    text = load_policy_text()
    assert text.count("forbid (") == len(forbid_reasons(text)) == 5


def test_cedar_engine_error_fails_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    scenario = direct_scenarios([make_case("dns_changes", Variant.PERMITTED)])[0]
    platform = SimulatedPlatform("t", scenario.script.seed)

    def broken(*args: object, **kwargs: object) -> None:
        raise ValueError("engine exploded")

    monkeypatch.setattr(cedarpy, "is_authorized_batch", broken)
    result = asyncio.run(CedarBoundary().authorize(scenario.script.request, platform.view))
    assert result.decision == "hold" and "engine exploded" in result.detail


def test_cedar_no_decision_fails_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    scenario = direct_scenarios([make_case("dns_changes", Variant.PERMITTED)])[0]
    platform = SimulatedPlatform("t", scenario.script.seed)

    def no_decision(requests: list[object], *args: object, **kwargs: object) -> list[object]:
        return [cedarpy.AuthzResult({"decision": "NoDecision"}) for _ in requests]

    monkeypatch.setattr(cedarpy, "is_authorized_batch", no_decision)
    result = asyncio.run(CedarBoundary().authorize(scenario.script.request, platform.view))
    assert result.decision == "hold"


@asynccontextmanager
async def _local_service() -> AsyncIterator[str]:
    runner = web.AppRunner(reference_service_app())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def test_http_boundary_matches_reference_against_a_local_service() -> None:
    async def scenario() -> tuple[list[ControlOutcome], list[ControlOutcome], str]:
        async with _local_service() as url:
            remote = await evaluate_boundary(
                SCENARIOS, lambda: HttpBoundary(url), HttpEnvironment(url)
            )
        local = await evaluate_boundary(SCENARIOS, boundary_factory("reference"))
        strengths = remote.counts.environment_strengths
        assert strengths == [f"external service {url}"]
        return [g.outcome for g in remote.grades], [g.outcome for g in local.grades], url

    remote, local, _ = asyncio.run(scenario())
    assert remote == local
    assert ControlOutcome.PROHIBITED_EFFECT not in remote


def test_http_boundary_exposes_a_permissive_service() -> None:
    direct = [s for s in SCENARIOS if s.path == DIRECT_PATH]

    async def scenario() -> int:
        runner = web.AppRunner(reference_service_app(boundary_factory("unchecked")))
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]
        try:
            remote = await evaluate_boundary(
                direct, lambda: HttpBoundary(url), HttpEnvironment(url)
            )
        finally:
            await runner.cleanup()
        return remote.counts.prohibited_confirmed

    assert asyncio.run(scenario()) == sum(
        s.expected_effect == "must_not_take_effect" for s in direct
    )


@pytest.mark.parametrize(
    "name", ["reference", "cedar", "review-gated", "unchecked", *KNOWN_BAD_FOR_FAULT.values()]
)
def test_every_built_in_boundary_implements_the_boundary_protocol(name: str) -> None:
    boundary = boundary_factory(name)()
    assert isinstance(boundary, Boundary)
    assert boundary.name == name


def test_http_boundary_needs_a_url_and_unknown_names_are_input_errors() -> None:
    with pytest.raises(InputError, match="URL"):
        boundary_factory("http")
    with pytest.raises(InputError, match="unknown boundary 'nope'"):
        boundary_factory("nope")
    assert isinstance(boundary_factory("http", url="http://127.0.0.1:9")(), HttpBoundary)
