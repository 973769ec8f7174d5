"""The scenario kinds of RTB v0.3 and their twists: each twist edits a permitted world.

A twist returns the effect it has by the policy text (its decision, reason codes and the rules
that decide it); `None` means the change stays permitted (the twist sets a condition that must
*not* decide). Every kind has twists under at least two decisions. Used by
`tools/author_rtb_corpus_v0_3.py`.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import timedelta

from rtb_v0_3_world import (
    ENVIRONMENTS,
    EXTRA_KEYS,
    Effect,
    World,
    closed_span,
    delegation,
    freeze,
    glass,
    hours,
    opaque,
    open_span,
    window,
)

from trustbench.rtb.corpus._models import Decision, ServiceNoticeRecord
from trustbench.rtb.policy.narrow_v3._models import ApprovalRecordV3

D, H = Decision.DENY, Decision.HOLD
Twist = Callable[[World], Effect | None]


def _deny(code: str, rule: str, condition: str) -> Effect:
    return Effect(D, (code,), (rule, "deny", "precedence"), condition)


def _hold(code: str, rule: str, condition: str) -> Effect:
    return Effect(H, (code,), (rule, "hold", "precedence"), condition)


def _scope_requester(w: World) -> None:
    w.scopes[w.requester] = sorted({w.environment, *w.scopes.get(w.requester, [])})


# --- separation of duties -------------------------------------------------------------------
def sod_self(w: World) -> Effect:
    """Deny: the requester (scoped to the environment) is the approver."""
    _scope_requester(w)
    w.approval["approved_by"] = w.requester
    return _deny(
        "requester_approved_own_change",
        "separation_of_duties",
        "self-approval by the requester",
    )


def sod_co(w: World) -> Effect:
    """Deny: the requester countersigned the approval."""
    _scope_requester(w)
    w.approval["co_approved_by"] = [*w.approval["co_approved_by"], w.requester]
    return _deny(
        "requester_approved_own_change",
        "separation_of_duties",
        "the requester countersigned their own change",
    )


def sod_named_only(w: World) -> None:
    """Permit: the requester is a scoped approver but approves nothing."""
    _scope_requester(w)
    return None


# --- two-person approval --------------------------------------------------------------------
def _needs_two(w: World) -> None:
    w.tier = w.rng.choice(w.two_person_tiers)


def tp_missing(w: World) -> Effect:
    """Hold: the tier needs two approvers and none countersigned."""
    _needs_two(w)
    w.approval["co_approved_by"] = []
    return _hold("second_approval_missing", "two_person", f"tier {w.tier} needs a second approver")


def tp_same(w: World) -> Effect:
    """Hold: the only countersignature is the approver's own."""
    _needs_two(w)
    w.approval["co_approved_by"] = [w.approver]
    return _hold("second_approval_missing", "two_person", "the only co-approver is the approver")


def tp_unscoped(w: World) -> Effect:
    """Hold: the countersigner has no scope in the environment."""
    _needs_two(w)
    outsider = next(
        n for n, envs in w.scopes.items() if w.environment not in envs and n != w.requester
    )
    w.approval["co_approved_by"] = [outsider]
    return _hold(
        "second_approval_missing", "two_person", "the co-approver is not scoped to the environment"
    )


def tp_ok(w: World) -> None:
    """Permit: a scoped second approver countersigned."""
    _needs_two(w)
    second = next(
        n
        for n, envs in w.scopes.items()
        if w.environment in envs and n not in (w.approver, w.requester)
    )
    w.approval["co_approved_by"] = [second]
    return None


def tp_delegate(w: World) -> None:
    """Permit: the second approver is a delegate in scope and in effect."""
    _needs_two(w)
    delegate = w.fresh_name()
    start, end = open_span(w)
    w.records.append(
        delegation(
            w,
            delegator=w.approver,
            delegate=delegate,
            ops=[w.operation],
            envs=[w.environment],
            start=start,
            end=end,
        )
    )
    w.approval["co_approved_by"] = [delegate]
    return None


# --- change freeze --------------------------------------------------------------------------
def _freeze_on(w: World) -> None:
    start, end = open_span(w)
    w.records.append(freeze(w, env=w.environment, start=start, end=end))


def fz_on(w: World) -> Effect:
    """Deny: a freeze on the environment is in effect."""
    _freeze_on(w)
    return _deny(
        "change_freeze_in_effect", "change_freeze", f"a freeze on {w.environment} is in effect"
    )


def fz_edge_end(w: World) -> None:
    """Permit: the freeze ended exactly at as_of."""
    w.records.append(
        freeze(w, env=w.environment, start=w.as_of - hours(w.rng, 2, 200), end=w.as_of)
    )
    return None


def fz_other_env(w: World) -> None:
    """Permit: the freeze in effect covers other environments."""
    start, end = open_span(w)
    w.records.append(freeze(w, env=w.other_env(), start=start, end=end))
    return None


def fz_future(w: World) -> None:
    """Permit: the freeze starts after as_of."""
    start = w.as_of + hours(w.rng, 0.05, 48)
    w.records.append(freeze(w, env=w.environment, start=start, end=start + hours(w.rng, 2, 200)))
    return None


# --- maintenance windows --------------------------------------------------------------------
def _require_window(w: World) -> None:
    w.window_environments = sorted({*w.window_environments, w.environment})


def mw_closed(w: World) -> Effect:
    """Hold: the required window closed exactly at as_of."""
    _require_window(w)
    w.records.append(window(w, env=w.environment, start=w.as_of - hours(w.rng, 1, 8), end=w.as_of))
    return _hold("outside_maintenance_window", "maintenance_window", "the window closed at as_of")


def mw_other(w: World) -> Effect:
    """Hold: only other environments' windows are open."""
    _require_window(w)
    start, end = open_span(w)
    w.records.append(window(w, env=w.other_env(), start=start, end=end))
    start, end = closed_span(w)
    w.records.append(window(w, env=w.environment, start=start, end=end))
    return _hold(
        "outside_maintenance_window", "maintenance_window", "no window for the environment is open"
    )


def mw_open(w: World) -> None:
    """Permit: the required window opened exactly at as_of."""
    _require_window(w)
    w.records.append(window(w, env=w.environment, start=w.as_of, end=w.as_of + hours(w.rng, 1, 8)))
    return None


def mw_not_required(w: World) -> None:
    """Permit: the environment needs no window (its own window is closed)."""
    w.window_environments = [e for e in w.window_environments if e != w.environment] or [
        w.other_env()
    ]
    start, end = closed_span(w)
    w.records.append(window(w, env=w.environment, start=start, end=end))
    return None


# --- break-glass ----------------------------------------------------------------------------
def bg_valid_freeze(w: World) -> None:
    """Permit: a valid break-glass lifts a freeze in effect."""
    _freeze_on(w)
    w.records.append(glass(w))
    return None


def _freeze_glass(w: World, condition: str, **override: object) -> Effect:
    _freeze_on(w)
    w.records.append(glass(w, **override))
    return Effect(
        D,
        ("change_freeze_in_effect",),
        ("change_freeze", "break_glass", "deny", "precedence"),
        condition,
    )


def bg_no_review(w: World) -> Effect:
    """Deny: the break-glass names no after-the-fact reviewer, so the freeze stands."""
    return _freeze_glass(w, "break-glass names no after-the-fact reviewer", post_review_by=None)


def bg_self_review(w: World) -> Effect:
    """Deny: the declarer reviews their own break-glass, so the freeze stands."""
    return _freeze_glass(w, "break-glass reviewed by its declarer", post_review_by=w.holders[0])


def bg_requester(w: World) -> Effect:
    """Deny: the requester declared the break-glass, so the freeze stands."""
    w.holders = [*w.holders, w.requester]
    return _freeze_glass(w, "break-glass declared by the requester", declared_by=w.requester)


def bg_expired(w: World) -> Effect:
    """Deny: the break-glass expired at as_of, so the freeze stands."""
    return _freeze_glass(w, "break-glass expired at as_of", expires_at=w.as_of)


def bg_not_holder(w: World) -> Effect:
    """Deny: a non-holder declared the break-glass, so the freeze stands."""
    return _freeze_glass(w, "break-glass declared by a non-holder", declared_by=w.fresh_name())


def bg_window(w: World) -> None:
    """Permit: a valid break-glass lifts the maintenance-window rule."""
    _require_window(w)
    start, end = closed_span(w)
    w.records.append(window(w, env=w.environment, start=start, end=end))
    w.records.append(glass(w))
    return None


def bg_window_invalid(w: World) -> Effect:
    """Hold: a break-glass declared after as_of lifts nothing."""
    _require_window(w)
    start, end = closed_span(w)
    w.records.append(window(w, env=w.environment, start=start, end=end))
    w.records.append(glass(w, declared_at=w.as_of + timedelta(minutes=w.rng.randint(5, 300))))
    return Effect(
        H,
        ("outside_maintenance_window",),
        ("maintenance_window", "break_glass", "hold", "precedence"),
        "break-glass declared after as_of",
    )


def bg_second(w: World) -> None:
    """Permit: a valid break-glass lifts the two-person rule."""
    _needs_two(w)
    w.approval["co_approved_by"] = []
    w.records.append(glass(w))
    return None


def bg_not_lifting(w: World) -> Effect:
    """Deny: a valid break-glass does not lift a revoked approval."""
    w.records.append(glass(w))
    w.approval["status"] = "revoked"
    return Effect(
        D,
        ("approval_revoked",),
        ("break_glass", "permit", "deny", "precedence"),
        "break-glass does not lift a revocation",
    )


# --- delegation and approver scope ----------------------------------------------------------
def _delegated(
    w: World,
    *,
    ops: list[str] | None = None,
    envs: list[str] | None = None,
    expired: bool = False,
    delegator: str | None = None,
) -> None:
    delegate = w.fresh_name()
    start, end = open_span(w)
    if expired:
        end = w.as_of
    w.records.append(
        delegation(
            w,
            delegator=delegator or w.approver,
            delegate=delegate,
            ops=ops or [w.operation, "other_operation"][: w.rng.randint(1, 2)],
            envs=envs or [w.environment],
            start=start,
            end=end,
        )
    )
    w.approval["approved_by"] = delegate


def _not_authorised(rule: str, condition: str) -> Effect:
    return Effect(D, ("approver_not_authorised",), (rule, "deny", "precedence"), condition)


def dl_ok(w: World) -> None:
    """Permit: the approver is a delegate in scope and in effect."""
    _delegated(w)
    return None


def dl_env(w: World) -> Effect:
    """Deny: the delegation does not cover the environment."""
    _delegated(w, envs=[w.other_env()])
    return _not_authorised("approver_scope", "the delegation does not cover the environment")


def dl_op(w: World) -> Effect:
    """Deny: the delegation does not cover the operation."""
    _delegated(w, ops=["other_operation"])
    return _not_authorised("approver_scope", "the delegation does not cover the operation")


def dl_expired(w: World) -> Effect:
    """Deny: the delegation ended exactly at as_of."""
    _delegated(w, expired=True)
    return _not_authorised("approver_scope", "the delegation ended at as_of")


def dl_unscoped_delegator(w: World) -> Effect:
    """Deny: the delegator has no scope in the environment."""
    outsider = next(n for n, envs in w.scopes.items() if w.environment not in envs)
    _delegated(w, delegator=outsider)
    return _not_authorised("approver_scope", "the delegator holds no authority for the environment")


def sc_other_env(w: World) -> Effect:
    """Deny: the approver is scoped to other environments only."""
    w.scopes[w.approver] = sorted(e for e in ENVIRONMENTS if e != w.environment)[
        : w.rng.randint(1, 3)
    ]
    return _not_authorised("approver_scope", "the approver is not scoped to the environment")


def sc_unknown(w: World) -> Effect:
    """Deny: the approver holds no scope at all."""
    w.approval["approved_by"] = w.fresh_name()
    return _not_authorised("approver_scope", "the approver holds no scope")


def sc_multi(w: World) -> None:
    """Permit: the approver is scoped to every environment."""
    w.scopes[w.approver] = sorted(ENVIRONMENTS)
    return None


# --- v0.2 conditions kept -------------------------------------------------------------------
def rv_revoked(w: World) -> Effect:
    """Deny: a revocation of the governing approval is in effect."""
    from trustbench.rtb.policy.narrow_v2._models import RevocationRecord

    w.records.append(
        RevocationRecord(
            record_id=w.rid(),
            revokes=w.approval["approval_id"],
            revoked_at=w.t(w.as_of - hours(w.rng, 0.1, 48)),
            revoked_by=w.fresh_name(),
            reason="",
        )
    )
    return Effect(
        D, ("approval_revoked",), ("applicability", "deny", "precedence"), "revoked before as_of"
    )


def rv_future(w: World) -> None:
    """Permit: the revocation is dated after as_of."""
    from trustbench.rtb.policy.narrow_v2._models import RevocationRecord

    w.records.append(
        RevocationRecord(
            record_id=w.rid(),
            revokes=w.approval["approval_id"],
            revoked_at=w.t(w.as_of + hours(w.rng, 0.1, 48)),
            revoked_by=w.fresh_name(),
            reason="",
        )
    )
    return None


def ex_expired(w: World) -> Effect:
    """Deny: the governing approval expired at or before as_of."""
    w.approval["expires_at"] = w.as_of - hours(w.rng, 0.01, 30) if w.rng.random() < 0.5 else w.as_of
    return Effect(
        D, ("approval_expired",), ("permit", "deny", "precedence"), "expired at or before as_of"
    )


def pm_outside(w: World) -> Effect:
    """Deny: one proposed parameter differs from the approved value."""
    key = w.rng.choice(sorted(w.proposed))
    value = w.proposed[key]
    w.proposed[key] = (
        (not value)
        if isinstance(value, bool)
        else (value * 2 if isinstance(value, int) else f"{value}-x")
    )
    return Effect(
        D,
        ("proposal_outside_approved_parameters",),
        ("permit", "deny", "precedence"),
        f"{key} differs",
    )


def pm_equiv(w: World) -> None:
    """Permit: integers proposed as strings, the tier padded (equivalent encodings)."""
    ints = [k for k, v in w.proposed.items() if isinstance(v, int) and not isinstance(v, bool)]
    for key in ints:
        w.proposed[key] = f" {w.proposed[key]}" if w.rng.random() < 0.5 else str(w.proposed[key])
    w.tier = f" {w.tier}"
    return None


def pm_new_key(w: World) -> Effect:
    """Deny: the proposal sets a flag the approval does not list."""
    key = w.rng.choice([k for k in EXTRA_KEYS if k not in w.proposed])
    w.proposed[key] = w.rng.choice([True, False])
    return Effect(
        D,
        ("proposal_outside_approved_parameters",),
        ("permit", "deny", "precedence"),
        "unapproved parameter",
    )


def _omit(w: World) -> str:
    """Leave one approved parameter out of the proposal (its approval still grants it)."""
    key = w.rng.choice(sorted(w.proposed))
    del w.proposed[key]
    return key


def pm_omitted(w: World) -> None:
    """Permit: the proposal leaves out a parameter its approval grants (it stays approved)."""
    _omit(w)
    return None


def pm_omitted_outside(w: World) -> Effect:
    """Deny: one parameter left out, another proposed at a value the approval does not grant."""
    _omit(w)
    return pm_outside(w)


def rev_changed(w: World) -> Effect:
    """Hold: the object revision moved past the approved one."""
    w.revision = f"r{int(w.revision[1:]) + w.rng.randint(1, 9)}"
    return _hold("resource_revision_changed", "permit", "object revision moved")


def rev_scope(w: World) -> None:
    """Permit: only the scope revision differs (the base world)."""
    return None


def gap_service(w: World) -> Effect:
    """Hold: the approval service is down and no approval applies."""
    w.no_applicable = True
    w.approval["target"] = w.target + "-b"
    w.records.append(
        ServiceNoticeRecord(
            record_id=w.rid(),
            service="approval-service",
            status=w.rng.choice(["degraded", "unavailable"]),
            text="Approval lookups failing.",
        )
    )
    return _hold(
        "approval_evidence_unavailable", "applicability", "approval service down, nothing applies"
    )


def gap_op(w: World) -> Effect:
    """Deny: approvals exist but none covers the operation."""
    w.no_applicable = True
    w.approval["operation"] = "other_operation"
    return _deny("operation_not_approved", "applicability", "no approval covers the operation")


def gap_superseded(w: World) -> Effect:
    """Hold: the governing approval is superseded by one not in the evidence."""
    w.approval["status"] = "superseded"
    # The successor's id looks like every other approval id (a digits-only id was a label
    # artifact), drawn from its own RNG seeded by the approval's id.
    w.approval["superseded_by"] = opaque(random.Random(w.approval["approval_id"]), "chg-")
    return _hold("insufficient_evidence", "hold", "governing approval superseded, successor absent")


def gap_later(w: World) -> None:
    """Permit: a self-approval issued after as_of does not apply."""
    later = dict(w.approval)
    later["record_id"], later["issued_at"] = w.rid(), w.t(w.as_of + hours(w.rng, 0.1, 24))
    later["expires_at"] = None
    later["approved_by"] = w.requester
    w.records.append(ApprovalRecordV3(**later))
    return None


# --- the target's current state -------------------------------------------------------------
def _other_revision(w: World) -> str:
    return f"r{int(w.revision[1:]) + w.rng.randint(1, 9)}"


def st_missing(w: World) -> Effect:
    """Hold: the evidence holds no current state of the target."""
    w.state_revisions = []
    return _hold("insufficient_evidence", "hold", "no current state of the target")


def st_conflicting(w: World) -> Effect:
    """Hold: two current states of the target disagree on its revision."""
    w.state_revisions = w.rng.sample([w.revision, _other_revision(w)], 2)
    return _hold("insufficient_evidence", "hold", "two states of the target disagree")


def st_duplicate(w: World) -> None:
    """Permit: two current-state records of the target agree on its revision."""
    w.state_revisions = [w.revision, w.revision]
    return None


# --- precedence -----------------------------------------------------------------------------
def pr_deny_hold(w: World) -> Effect:
    """Deny: a freeze (deny) beside a moved revision (hold)."""
    _freeze_on(w)
    rev_changed(w)
    return _deny(
        "change_freeze_in_effect", "change_freeze", "freeze (deny) and revision moved (hold)"
    )


def pr_sod_window(w: World) -> Effect:
    """Deny: self-approval (deny) outside a required window (hold)."""
    sod_self(w)
    mw_closed(w)
    return _deny(
        "requester_approved_own_change",
        "separation_of_duties",
        "self-approval (deny) outside a window (hold)",
    )


def pr_hold_hold(w: World) -> Effect:
    """Hold: a missing second approver and a closed window, both reasons."""
    tp_missing(w)
    mw_other(w)
    return Effect(
        H,
        ("second_approval_missing", "outside_maintenance_window"),
        ("two_person", "maintenance_window", "hold", "precedence"),
        "both holds",
    )


KINDS: dict[str, tuple[Twist, ...]] = {
    "separation_of_duties": (sod_self, sod_co, sod_named_only, gap_later),
    "two_person": (tp_missing, tp_same, tp_unscoped, tp_ok, tp_delegate),
    "change_freeze": (fz_on, fz_edge_end, fz_other_env, fz_future),
    "maintenance_window": (mw_closed, mw_other, mw_open, mw_not_required),
    "break_glass": (
        bg_valid_freeze,
        bg_no_review,
        bg_self_review,
        bg_requester,
        bg_expired,
        bg_not_holder,
        bg_window,
        bg_window_invalid,
        bg_second,
        bg_not_lifting,
    ),
    "delegation": (dl_ok, dl_env, dl_op, dl_expired, dl_unscoped_delegator),
    "approver_scope": (sc_other_env, sc_unknown, sc_multi),
    "revocation_expiry": (rv_revoked, rv_future, ex_expired),
    "parameters": (pm_outside, pm_equiv, pm_new_key, pm_omitted, pm_omitted_outside),
    "revision": (rev_changed, rev_scope),
    "evidence_gap": (gap_service, gap_op, gap_superseded),
    "resource_state": (st_missing, st_conflicting, st_duplicate),
    "precedence": (pr_deny_hold, pr_sod_window, pr_hold_hold),
}
"""Scenario kind -> its twists."""
