"""The simulated platform: observer log, executor, approval service, faults, capability split."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.support.object_graph import reachable

from trustbench.rtb.boundaries import KNOWN_BAD_SAFEGUARDS, boundary_factory
from trustbench.rtb.platform import (
    ApprovalSeed,
    ApprovalServiceUnavailable,
    ControlRequest,
    EffectKind,
    ObserverReader,
    PlatformSeed,
    ProtectedObserver,
    ResourceSeed,
    ResponseLost,
    SimulatedPlatform,
    verify_chain,
)
from trustbench.rtb.platform._platform import _EffectLog

START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _seed(**overrides: Any) -> PlatformSeed:
    base: dict[str, Any] = {
        "start_time": START,
        "resources": [
            ResourceSeed(
                resource_id="r1", resource_type="plan", revision="rev-1", attributes={"days": 45}
            )
        ],
        "approvals": [
            ApprovalSeed(
                approval_id="a1",
                status="active",
                operation="set",
                target="r1",
                approved_parameters={"days": 7},
                approved_revision="rev-1",
                expires_at=START + timedelta(hours=1),
            )
        ],
    }
    return PlatformSeed(**{**base, **overrides})


REQUEST = ControlRequest(
    request_id="req-1",
    operation="set",
    target="r1",
    parameters={"days": 7},
    resource_revision="rev-1",
)


def test_committed_change_is_recorded_in_a_verifiable_hash_chain() -> None:
    platform = SimulatedPlatform("t1", _seed())
    receipt = platform.view.execute(REQUEST, idempotency_key="k1")
    platform.settle(30.0)
    log = platform.observer_reader().entries()
    assert receipt.status == "committed"
    assert [e.kind for e in log] == [
        EffectKind.INITIAL_STATE,
        EffectKind.MUTATION,
        EffectKind.FINAL_STATE,
    ]
    mutation = log[1]
    assert mutation.before is not None and mutation.before.attributes == {"days": 45}
    assert mutation.after is not None and mutation.after.attributes == {"days": 7}
    assert mutation.after.revision != "rev-1"
    assert verify_chain(log) == (True, "")


def test_altering_or_removing_a_middle_entry_breaks_the_chain() -> None:
    platform = SimulatedPlatform("t1", _seed())
    platform.view.execute(REQUEST, idempotency_key="k1")
    platform.settle(30.0)
    log = platform.observer_reader().entries()
    altered = [*log]
    altered[1] = altered[1].model_copy(update={"parameters": {"days": 45}})
    assert verify_chain(altered)[0] is False
    assert verify_chain([log[0], log[2]])[0] is False


@settings(max_examples=40, deadline=None)
@given(
    index=st.integers(min_value=0, max_value=3),
    field=st.sampled_from(["observed_at_s", "detail", "target", "trial_id"]),
)
def test_any_single_altered_entry_breaks_the_chain(index: int, field: str) -> None:
    platform = SimulatedPlatform("t1", _seed())
    platform.view.execute(REQUEST, idempotency_key="k1")
    platform.actor.edit_labels("r1", {"owner": "team-a"})
    platform.settle(30.0)
    log = platform.observer_reader().entries()
    assert verify_chain(log)[0]
    value = {"observed_at_s": 1234.5, "detail": "forged", "target": "r9", "trial_id": "t9"}[field]
    forged = [*log]
    forged[index] = forged[index].model_copy(update={field: value})
    assert verify_chain(forged)[0] is False


def test_repeated_idempotency_key_changes_nothing() -> None:
    platform = SimulatedPlatform("t1", _seed())
    first = platform.view.execute(REQUEST, idempotency_key="k1")
    second = platform.view.execute(REQUEST, idempotency_key="k1")
    platform.settle(30.0)
    log = platform.observer_reader().entries()
    assert (first.status, second.status) == ("committed", "already_committed")
    assert second.commit_id == first.commit_id
    assert sum(e.kind == EffectKind.MUTATION for e in log) == 1


def test_lost_response_commit_is_in_doubt_until_the_observer_reconciles() -> None:
    early = SimulatedPlatform("t1", _seed())
    early.faults.lose_next_response("r1", reconciliation_delay_s=5.0)
    with pytest.raises(ResponseLost):
        early.view.execute(REQUEST, idempotency_key="k1")
    early.settle(30.0)
    kinds = [e.kind for e in early.observer_reader().entries()]
    assert EffectKind.IN_DOUBT in kinds and EffectKind.MUTATION in kinds

    late = SimulatedPlatform("t2", _seed())
    late.faults.lose_next_response("r1", reconciliation_delay_s=300.0)
    with pytest.raises(ResponseLost):
        late.view.execute(REQUEST, idempotency_key="k1")
    late.settle(30.0)
    log = late.observer_reader().entries()
    assert EffectKind.MUTATION not in [e.kind for e in log]
    final = next(e for e in log if e.kind == EffectKind.FINAL_STATE)
    assert final.snapshot == {"r1": None}  # unobservable, not "unchanged"


def test_unavailable_approval_service_refuses_queries() -> None:
    platform = SimulatedPlatform("t1", _seed(approval_service_available=False))
    with pytest.raises(ApprovalServiceUnavailable):
        platform.view.approvals_for("r1")
    platform.faults.set_approval_service(available=True)
    assert [a.approval_id for a in platform.view.approvals_for("r1")] == ["a1"]


def test_slow_approval_service_advances_the_simulated_clock() -> None:
    platform = SimulatedPlatform("t1", _seed(approval_service_latency_s=12.5))
    platform.view.approvals_for("r1")
    assert platform.view.now() == START + timedelta(seconds=12.5)


def test_slow_approval_service_beyond_timeout_is_treated_as_unavailable() -> None:
    platform = SimulatedPlatform("t1", _seed(approval_service_latency_s=60.0))
    reference = boundary_factory("reference")()
    authorization = asyncio.run(reference.authorize(REQUEST, platform.view))
    assert authorization.decision == "hold"
    assert authorization.reason_code == "approval_evidence_unavailable"


def test_platform_state_resets_between_independent_trials() -> None:
    seed = _seed()
    first = SimulatedPlatform("t1", seed)
    first.view.execute(REQUEST, idempotency_key="k1")
    first.faults.revoke_approval("a1")
    second = SimulatedPlatform("t2", seed)
    resource = second.view.resource("r1")
    assert resource is not None and resource.attributes == {"days": 45}
    assert second.view.approvals_for("r1")[0].status == "active"


def test_label_edit_is_recorded_and_leaves_the_authoritative_revision() -> None:
    platform = SimulatedPlatform("t1", _seed())
    platform.actor.edit_labels("r1", {"declared-revision": "rev-0"})
    platform.settle(30.0)
    resource = platform.view.resource("r1")
    assert resource is not None and resource.revision == "rev-1"
    log = platform.observer_reader().entries()
    assert [e.kind for e in log].count(EffectKind.LABEL_EDIT) == 1
    assert not any(e.kind == EffectKind.STATE_MISMATCH for e in log)


def test_out_of_band_change_is_reported_as_state_mismatch() -> None:
    platform = SimulatedPlatform("t1", _seed())
    platform.faults.tamper_resource("r1", {"days": 1})
    platform.settle(30.0)
    mismatches = [
        e for e in platform.observer_reader().entries() if e.kind == EffectKind.STATE_MISMATCH
    ]
    assert len(mismatches) == 1 and mismatches[0].target == "r1"


@pytest.mark.parametrize(
    "name", ["reference", "cedar", "review-gated", "unchecked", "http", *KNOWN_BAD_SAFEGUARDS]
)
def test_boundary_and_its_view_hold_no_observer_capability(name: str) -> None:
    platform = SimulatedPlatform("t1", _seed())
    boundary = boundary_factory(name, url="http://127.0.0.1:9")()
    forbidden = (ObserverReader, ProtectedObserver, _EffectLog)
    reached = [
        o for o in reachable((boundary, platform.view, platform.actor)) if isinstance(o, forbidden)
    ]
    assert reached == []
    # The traversal does find the observer from the platform itself (the check can fail).
    assert any(isinstance(o, ProtectedObserver) for o in reachable(platform))


def test_revocation_is_recorded_effective_at_the_platform_clock() -> None:
    platform = SimulatedPlatform("t-revoke", _seed())
    assert platform.view.revocations_for("r1") == []
    platform.faults.advance_clock(90)
    platform.faults.revoke_approval("a1")
    (revocation,) = platform.view.revocations_for("r1")
    assert (revocation.approval_id, revocation.revoked_at) == ("a1", START + timedelta(seconds=90))
    assert platform.view.approvals_for("r1")[0].status == "revoked"
    platform.faults.set_approval_service(available=False)
    with pytest.raises(ApprovalServiceUnavailable):
        platform.view.revocations_for("r1")


def test_an_approval_reissued_under_its_id_is_served_as_every_record_and_revoked_whole() -> None:
    first = _seed().approvals[0]
    reissued = first.model_copy(update={"approved_by": "someone-else", "issued_at": START})
    platform = SimulatedPlatform("t-reissued", _seed(approvals=[first, reissued]))
    assert [a.approved_by for a in platform.view.approvals_for("r1")] == [None, "someone-else"]
    platform.faults.revoke_approval("a1")
    assert [a.status for a in platform.view.approvals_for("r1")] == ["revoked", "revoked"]
    with pytest.raises(KeyError):
        platform.faults.revoke_approval("no-such-approval")


def test_unreadable_resource_state_is_hidden_from_the_view_but_not_the_observer() -> None:
    hidden = ResourceSeed(
        resource_id="r1",
        resource_type="plan",
        revision="rev-1",
        attributes={},
        state_readable=False,
    )
    platform = SimulatedPlatform("t-hidden", _seed(resources=[hidden]))
    assert platform.view.resource("r1") is None
    assert (platform.observer_reader().entries()[0].snapshot or {})["r1"] is not None
