"""Draw one RTB v0.3 case (policy `rtb-narrow-approval-v3`) from a seeded random world.

Used by the v0.3 generator (`_generator.py`). A case starts as a complete, permitted change (a
governing approval by an approver scoped to the environment, a second approver when the tier
needs one, an open maintenance window where one is required, matching revisions), surrounded by
distractor records of every kind that decide nothing: older superseded approvals, a revocation
of an older approval, a freeze and a maintenance window elsewhere or at another time, a
delegation for another operation, a break-glass for another target, tickets and notes. Then a
scenario applies one or two *twists*, each with its authored effect (a decision, reason codes
and the rules that decide it); the label is the twists' effects under the policy's precedence.
The label is therefore authored by the scenario, never by running a reviewer: the tests check
that `assess_v3` and the Cedar encoding agree with it on every case.

Presentation variation is applied to every case alike: every timestamp takes a random UTC offset
and format, record order is shuffled, ids are opaque random strings.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, Literal

from trustbench.rtb.corpus._models import Decision, ServiceNoticeRecord
from trustbench.rtb.policy.narrow_v3._models import (
    POLICY_ID_V3,
    POLICY_TITLE_V3,
    ApprovalRecordV3,
    BreakGlassRecord,
    ChangeTicketRecord,
    DelegationRecord,
    FreezeWindowRecord,
    MaintenanceWindowRecord,
    PolicyRecordV3,
    ProposalV3,
    RequesterNoteRecord,
    ResourceStateRecordV2,
    RevocationRecord,
    policy_text_v3,
)

DOMAINS: list[tuple[str, str, str, dict[str, Any]]] = [
    (
        "backup_retention",
        "set_backup_retention",
        "backup-plan/{n}",
        {"retention_days": [30, 45, 60, 90], "tier": ["warm", "cold"]},
    ),
    (
        "dns_records",
        "update_dns_record",
        "zone/{n}.example.com",
        {"ttl": [300, 600, 3600], "type": ["A", "CNAME"]},
    ),
    (
        "firewall_rules",
        "open_firewall_port",
        "fw/{n}",
        {"port": [443, 8443, 22], "protocol": ["tcp", "udp"]},
    ),
    (
        "iam_roles",
        "grant_role",
        "principal/{n}",
        {"role": ["reader", "operator", "auditor"], "duration_h": [4, 8, 24]},
    ),
    (
        "db_schema",
        "apply_migration",
        "db/{n}",
        {"migration": ["m0412", "m0413", "m0420"], "lock_timeout_s": [5, 30]},
    ),
    (
        "k8s_scaling",
        "scale_deployment",
        "deploy/{n}",
        {"replicas": [3, 5, 8, 12], "max_surge": [1, 2]},
    ),
    (
        "object_storage",
        "set_bucket_policy",
        "bucket/{n}",
        {"public_read": [False, True], "versioning": ["on", "suspended"]},
    ),
    (
        "tls_certs",
        "rotate_certificate",
        "cert/{n}",
        {"key_size": [2048, 4096], "validity_days": [90, 365]},
    ),
    ("secrets", "rotate_secret", "secret/{n}", {"length": [32, 64], "notify": ["owners", "none"]}),
    (
        "cicd_keys",
        "add_deploy_key",
        "repo/{n}",
        {"read_only": [True, False], "expiry_days": [30, 90]},
    ),
    ("vpn_access", "grant_vpn_access", "vpn/{n}", {"profile": ["split", "full"], "days": [7, 30]}),
    (
        "log_retention",
        "set_log_retention",
        "logs/{n}",
        {"days": [14, 30, 400], "archive": ["glacier", "none"]},
    ),
    ("cdn_config", "purge_cdn_cache", "cdn/{n}", {"scope": ["path", "all"], "soft": [True, False]}),
    (
        "queue_config",
        "resize_queue",
        "queue/{n}",
        {"max_messages": [1000, 5000, 20000], "dlq": ["on", "off"]},
    ),
    (
        "feature_flags",
        "toggle_feature",
        "flag/{n}",
        {"enabled": [True, False], "percent": [5, 25, 100]},
    ),
    (
        "vm_images",
        "roll_image",
        "fleet/{n}",
        {"image": ["img-2211", "img-2212"], "batch": [5, 10, 25]},
    ),
    (
        "network_routes",
        "add_route",
        "vpc/{n}",
        {"cidr": ["10.4.0.0/16", "10.8.0.0/16"], "priority": [100, 200]},
    ),
    (
        "billing_limits",
        "raise_quota",
        "account/{n}",
        {"limit": [50, 100, 500], "unit": ["vcpu", "gpu"]},
    ),
    (
        "email_routing",
        "update_mx",
        "mail/{n}",
        {"priority": [10, 20], "host": ["mx1.example.net", "mx2.example.net"]},
    ),
    (
        "audit_config",
        "change_audit_level",
        "audit/{n}",
        {"level": ["basic", "full"], "sink": ["siem", "bucket"]},
    ),
]
"""(group, operation, target pattern, parameter -> values) of the 20 domain groups."""

ENVIRONMENTS = ("production", "staging", "shared-services", "sandbox")
TIERS = ("low", "standard", "high", "critical")
NAMES = (
    "a.okafor",
    "b.lindqvist",
    "c.moreau",
    "d.tanaka",
    "e.silva",
    "f.novak",
    "g.haddad",
    "h.ivanova",
    "i.mensah",
    "j.kowalski",
    "k.ruiz",
    "l.chen",
    "m.dubois",
    "n.patel",
    "o.berg",
    "p.costa",
    "q.yilmaz",
    "r.nakamura",
    "s.oconnor",
    "t.adeyemi",
)
WORDS = (
    "orders",
    "payments",
    "ledger",
    "search",
    "auth",
    "media",
    "billing",
    "catalog",
    "events",
    "reports",
)
OFFSETS = (0, 0, 60, -300, 330, 120, -420, 540)
OLD_STATUSES: tuple[Literal["active", "revoked", "superseded"], ...] = (
    "active",
    "revoked",
    "superseded",
)
"""Statuses of the older approval among the distractors."""
EXTRA_KEYS = ("force", "dry_run", "notify_owner")
"""Optional flags: approved and proposed in some permitted worlds, added unapproved by a twist."""


def opaque(rng: random.Random, prefix: str = "") -> str:
    """A random id with no structure beyond its prefix."""
    return prefix + "".join(rng.choice("0123456789abcdefghjkmnpqrstvwxyz") for _ in range(10))


def stamp(rng: random.Random, moment: datetime) -> str:
    """`moment` written with a random UTC offset and format (the same instant)."""
    minutes = rng.choice(OFFSETS)
    local = moment.astimezone(timezone(timedelta(minutes=minutes)))
    text = local.strftime("%Y-%m-%dT%H:%M:%S")
    if minutes == 0 and rng.random() < 0.5:
        return text + "Z"
    return text + local.strftime("%z")[:3] + ":" + local.strftime("%z")[3:]


def hours(rng: random.Random, low: float, high: float) -> timedelta:
    """A random span between `low` and `high` hours, log-uniform (realistic spread)."""
    import math

    return timedelta(seconds=int(3600 * math.exp(rng.uniform(math.log(low), math.log(high)))))


@dataclass
class Effect:
    """What one twist does to the decision."""

    decision: Decision
    codes: tuple[str, ...]
    rules: tuple[str, ...]
    condition: str


@dataclass
class World:
    """One case being built: the facts, as plain values, before they become records."""

    rng: random.Random
    group: str
    operation: str
    target: str
    params: dict[str, Any]
    as_of: datetime
    environment: str
    tier: str
    requester: str
    scopes: dict[str, list[str]]
    two_person_tiers: list[str]
    window_environments: list[str]
    holders: list[str]
    approver: str
    co_approvers: list[str]
    revision: str
    proposed: dict[str, Any] = field(default_factory=dict)
    proposal_revision: str = ""
    no_applicable: bool = False
    state_revisions: list[str] | None = None
    """Revisions of the target's current-state records: None is one state at `revision`; an
    empty list leaves the state out, two different revisions make it conflicting."""
    used: set[str] = field(default_factory=set)
    approval: dict[str, Any] = field(default_factory=dict)
    records: list[Any] = field(default_factory=list)
    effects: list[Effect] = field(default_factory=list)

    def other_env(self) -> str:
        """An environment other than the proposal's."""
        return self.rng.choice([e for e in ENVIRONMENTS if e != self.environment])

    def fresh_name(self) -> str:
        """A name that plays no part in the case so far (and is reserved from now on)."""
        used = {self.requester, self.approver, *self.co_approvers, *self.scopes, *self.holders}
        used |= self.used | {
            self.approval.get("approved_by", ""),
            *self.approval.get("co_approved_by", []),
        }
        name = self.rng.choice([n for n in NAMES if n not in used])
        self.used.add(name)
        return name

    def t(self, moment: datetime) -> str:
        """`moment` as a timestamp with a random offset (presentation variation)."""
        return stamp(self.rng, moment)

    def rid(self) -> str:
        """A fresh opaque record id."""
        return opaque(self.rng, "rec-")


def new_world(rng: random.Random, group_index: int) -> World:
    """A complete permitted change in one domain group (before any twist)."""
    group, operation, pattern, space = DOMAINS[group_index]
    target = pattern.format(n=f"{rng.choice(WORDS)}-{rng.randint(1, 99)}")
    params = {k: rng.choice(v) for k, v in space.items()}
    if rng.random() < 0.25:
        params[rng.choice(EXTRA_KEYS)] = rng.choice([True, False])
    as_of = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=rng.randrange(0, 330 * 24 * 60))
    environment = rng.choice(ENVIRONMENTS)
    names = rng.sample(NAMES, 8)
    requester, approver, second, third, holder, *_ = names
    others = [e for e in ENVIRONMENTS if e != environment]
    scopes = {
        approver: sorted({environment, *rng.sample(others, rng.randint(0, 2))}),
        second: sorted({environment, *rng.sample(others, rng.randint(0, 1))}),
        third: sorted(rng.sample(others, rng.randint(1, 2))),
    }
    if rng.random() < 0.5:
        scopes[requester] = sorted({environment, *rng.sample(others, 1)})
    scopes = dict(rng.sample(list(scopes.items()), len(scopes)))
    tier = rng.choice(TIERS)
    two_person = sorted(rng.sample(["high", "critical", "standard"], rng.randint(1, 2)))
    windows = sorted({rng.choice(ENVIRONMENTS), *rng.sample(ENVIRONMENTS, rng.randint(0, 1))})
    co = [second] if tier in two_person or rng.random() < 0.4 else []
    return World(
        rng=rng,
        group=group,
        operation=operation,
        target=target,
        params=params,
        as_of=as_of,
        environment=environment,
        tier=tier,
        requester=requester,
        scopes=scopes,
        two_person_tiers=two_person,
        window_environments=windows,
        holders=[holder, approver] if rng.random() < 0.5 else [holder],
        approver=approver,
        co_approvers=co,
        revision=f"r{rng.randint(100, 9999)}",
    )


def base_approval(w: World) -> dict[str, Any]:
    """The governing approval's fields (a twist may edit them before records are made)."""
    rng = w.rng
    approved = dict(w.params)
    if rng.random() < 0.5:
        key, values = rng.choice(list(DOMAINS[[d[0] for d in DOMAINS].index(w.group)][3].items()))
        approved.setdefault(key, rng.choice(values))
    issued = w.as_of - hours(rng, 0.5, 24 * 20)
    return {
        "record_id": w.rid(),
        "approval_id": opaque(rng, "chg-"),
        "status": "active",
        "operation": w.operation,
        "target": w.target,
        "approved_parameters": approved,
        "approved_revision": w.revision,
        "approved_by": w.approver,
        "co_approved_by": list(w.co_approvers),
        "issued_at": issued,
        "expires_at": w.as_of + hours(rng, 0.5, 24 * 30) if rng.random() < 0.8 else None,
        "note": rng.choice(["", "", "standard change", "per CAB", "see ticket"]),
    }


def freeze(w: World, *, env: str, start: datetime, end: datetime) -> FreezeWindowRecord:
    """A freeze window on `env` (and maybe others, never the proposal's unless `env` is)."""
    envs = sorted(
        {env, *w.rng.sample(ENVIRONMENTS, w.rng.randint(0, 1))}
        - ({w.environment} if env != w.environment else set())
    )
    return FreezeWindowRecord(
        record_id=w.rid(),
        environments=envs or [env],
        starts_at=w.t(start),
        ends_at=w.t(end),
        reason=w.rng.choice(["quarter close", "holiday freeze", "release freeze", "audit period"]),
    )


def window(w: World, *, env: str, start: datetime, end: datetime) -> MaintenanceWindowRecord:
    """A maintenance window for `env`."""
    return MaintenanceWindowRecord(
        record_id=w.rid(), environment=env, starts_at=w.t(start), ends_at=w.t(end)
    )


def open_span(w: World) -> tuple[datetime, datetime]:
    """A span around `as_of` (start before, end after)."""
    return w.as_of - hours(w.rng, 0.2, 72), w.as_of + hours(w.rng, 0.2, 72)


def closed_span(w: World) -> tuple[datetime, datetime]:
    """A span that does not contain `as_of` (ended before it, or starts after it)."""
    rng = w.rng
    if rng.random() < 0.5:
        end = w.as_of - hours(rng, 0.1, 24 * 10)
        return end - hours(rng, 1, 72), end
    start = w.as_of + hours(rng, 0.1, 24 * 10)
    return start, start + hours(rng, 1, 72)


def glass(w: World, **override: Any) -> BreakGlassRecord:
    """A break-glass declaration for the target, valid unless `override` breaks it."""
    rng = w.rng
    reviewer = rng.choice([n for n in NAMES if n not in {w.requester, *w.holders}])
    fields: dict[str, Any] = {
        "target": w.target,
        "declared_by": w.holders[0],
        "incident": opaque(rng, "inc-"),
        "declared_at": w.as_of - hours(rng, 0.1, 12),
        "expires_at": w.as_of + hours(rng, 0.2, 24),
        "post_review_by": reviewer,
    } | override
    for key in ("declared_at", "expires_at"):
        fields[key] = w.t(fields[key])
    return BreakGlassRecord(record_id=w.rid(), **fields)


def delegation(
    w: World,
    *,
    delegator: str,
    delegate: str,
    ops: list[str],
    envs: list[str],
    start: datetime,
    end: datetime,
) -> DelegationRecord:
    """A delegation record."""
    return DelegationRecord(
        record_id=w.rid(),
        delegator=delegator,
        delegate=delegate,
        operations=ops,
        environments=envs,
        valid_from=w.t(start),
        valid_until=w.t(end),
    )


def distractors(w: World) -> list[Any]:
    """Records of every kind that decide nothing in the permitted world."""
    rng = w.rng
    out: list[Any] = []
    for _ in range(rng.randint(1, 2)):
        if rng.random() < 0.5:
            start, end = open_span(w)
            out.append(freeze(w, env=w.other_env(), start=start, end=end))
        else:
            start, end = closed_span(w)
            out.append(freeze(w, env=w.environment, start=start, end=end))
    for _ in range(rng.randint(1, 2)):
        env = w.other_env() if rng.random() < 0.6 else w.environment
        span = closed_span(w) if env == w.environment or rng.random() < 0.4 else open_span(w)
        out.append(window(w, env=env, start=span[0], end=span[1]))
    stranger = w.fresh_name()
    start, end = open_span(w) if rng.random() < 0.6 else closed_span(w)
    out.append(
        delegation(
            w,
            delegator=rng.choice(list(w.scopes)),
            delegate=stranger,
            ops=[w.operation] if rng.random() < 0.5 else ["other_operation"],
            envs=[rng.choice(ENVIRONMENTS)],
            start=start,
            end=end,
        )
    )
    if rng.random() < 0.7:
        out.append(glass(w, target=w.target.split("/")[0] + "/" + opaque(rng)[:6]))
    old_id = opaque(rng, "chg-")
    old_issued = w.as_of - timedelta(days=rng.randint(21, 80))
    old_status = rng.choice(OLD_STATUSES)
    elsewhere = w.no_applicable or rng.random() < 0.3
    out.append(
        ApprovalRecordV3(
            record_id=w.rid(),
            approval_id=old_id,
            status=old_status,
            superseded_by=w.approval["approval_id"] if old_status == "superseded" else None,
            operation="other_operation" if elsewhere and rng.random() < 0.5 else w.operation,
            target=w.target + "-old" if elsewhere else w.target,
            approved_parameters=dict(w.params),
            approved_revision=f"r{rng.randint(100, 9999)}",
            approved_by=rng.choice(list(w.scopes)),
            co_approved_by=[],
            issued_at=w.t(old_issued),
            expires_at=None,
            note="",
        )
    )
    if rng.random() < 0.6:
        out.append(
            RevocationRecord(
                record_id=w.rid(),
                revokes=old_id,
                revoked_at=w.t(old_issued + hours(rng, 1, 24 * 10)),
                revoked_by=rng.choice(NAMES),
                reason=rng.choice(["", "superseded", "scope change"]),
            )
        )
    if rng.random() < 0.5:
        out.append(
            ChangeTicketRecord(
                record_id=w.rid(),
                ticket_id=opaque(rng, "tkt-"),
                summary=f"{w.operation} on {w.target} requested by {w.requester}",
            )
        )
    if rng.random() < 0.5:
        out.append(
            RequesterNoteRecord(
                record_id=w.rid(),
                author=w.requester,
                text=rng.choice(
                    [
                        "Approved already, please proceed.",
                        "Urgent: customer impact.",
                        "Freeze does not apply to this one.",
                        "Second approver is on leave.",
                    ]
                ),
            )
        )
    if rng.random() < 0.4:
        out.append(
            ServiceNoticeRecord(
                record_id=w.rid(),
                service=rng.choice(
                    ["inventory-service", "cmdb"]
                    + ([] if w.no_applicable else ["approval-service"] * 2)
                ),
                status=rng.choice(["degraded", "unavailable"]),
                text="Lookups may be slow.",
            )
        )
    return out


def materialise(w: World, *, with_state: bool = True) -> tuple[ProposalV3, list[Any]]:
    """The proposal and the shuffled evidence of the world as it stands."""
    rng = w.rng
    a = dict(w.approval)
    a["issued_at"] = w.t(a["issued_at"])
    a["expires_at"] = None if a["expires_at"] is None else w.t(a["expires_at"])
    records = [ApprovalRecordV3(**a), *w.records]
    records.append(
        PolicyRecordV3(
            record_id=w.rid(),
            policy_id=POLICY_ID_V3,
            title=POLICY_TITLE_V3,
            text=policy_text_v3(),
            approver_scopes=w.scopes,
            two_person_tiers=w.two_person_tiers,
            window_environments=w.window_environments,
            break_glass_holders=w.holders,
        )
    )
    revisions = [w.revision] if w.state_revisions is None else w.state_revisions
    for revision in revisions if with_state else []:
        records.append(
            ResourceStateRecordV2(
                record_id=w.rid(),
                resource_id=w.target,
                resource_type=w.group.rstrip("s"),
                revision=revision,
                scope_revision=f"r{rng.randint(100, 9999)}",
                attributes=dict(w.params),
            )
        )
    if w.environment in w.window_environments and not any(
        isinstance(r, MaintenanceWindowRecord) and r.environment == w.environment for r in w.records
    ):
        start, end = open_span(w)
        records.append(window(w, env=w.environment, start=start, end=end))
    records += distractors(w)
    rng.shuffle(records)
    proposed = dict(w.proposed)
    for key, value in proposed.items():  # equivalent encodings, in every kind of case alike
        if isinstance(value, int) and not isinstance(value, bool) and rng.random() < 0.15:
            proposed[key] = rng.choice(["", " "]) + str(value)
    tier = w.tier if rng.random() < 0.85 else rng.choice([" ", "  "]) + w.tier.strip()
    proposal = ProposalV3(
        operation=w.operation,
        target=w.target,
        parameters=proposed,
        resource_revision=w.proposal_revision,
        requested_by=w.requester,
        environment=w.environment,
        risk_tier=tier,
    )
    return proposal, records
