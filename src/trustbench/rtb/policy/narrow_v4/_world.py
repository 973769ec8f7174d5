"""The worlds of corpus v0.4: what a platform engineer would recognise, as declared constraints.

Reviewed as a platform engineer would, v0.3's worlds were not real ones: most proposals set what
the target already had, two-person tiers required two approvers for a lower risk tier but not a
higher one, production needed no window, the risk tier was unrelated to where and what the
change was, resource types were truncated group names, one service-notice text served every
notice, and times were uniform over the year and the clock. Each objection is a constraint here,
stated once (`REALISM`), which the world builder (`base_draft`) meets by construction and
`realism_problems` checks on any set of cases (the policy's `check_cases` runs it, so a v0.4
corpus that breaks one fails `rtb validate`):

- `proposal-changes-something`: a proposal sets at least one parameter to a value the target
  does not already have (a no-op only as a variant named `noop-...`, none shipped).
- `two-person-tiers-upward-closed`: a tier that needs two approvers implies every higher tier does.
- `risk-tier-from-environment-and-operation`: the risk tier is the operation's base risk raised
  or lowered by the environment (`expected_tier`).
- `production-windowed`: every policy record lists production among its window environments.
- `real-resource-types`: a target's resource type is the real type its operation acts on.
- `varied-service-notices`: notices name known services, and no one text serves most notices.
- `calendar-timing`: maintenance windows are off-peak slots of 1-8 hours, freezes last 1-21
  days, approvals are issued before they expire; over a corpus, `as_of` spreads over months,
  weekdays and hours like a change calendar (no hour holds a fifth of the cases).

The outside domain review of v0.4 (docs/rtb-corpus-v0.4-review.md, O1-O7) found more; each is a
constraint too:

- `approvals-their-own`: approvals of different targets share no object revision, and an
  approval is superseded exactly when it names its successor (the sibling's spare approval was
  a clone of the governing one, superseded by nothing).
- `proposal-names-its-change`: a proposal names its operation's defining parameters
  (`Domain.defining`: the role granted, the migration applied) and changes one of them.
- `dated-names-not-later`: a name carrying a month (an image) is not later than the record
  naming it (`dated_space`).
- `change-timing`: a base change falls in its environment's open window when the policy windows
  that environment, else in office hours (an emergency at any hour).
- `notice-status-matches-text`, `one-notice-per-service`: a notice's status is the one its text
  states, and a case holds one notice per service.
- `coherent-parameters`: a parameter set means what it says (`incoherent`).

A family (`_generate.py`) is one base world and proposal plus its edits; `family_problems`
checks the family contract on any set of cases.
"""

from __future__ import annotations

import random
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, NamedTuple

from trustbench.rtb.corpus._models import Problem
from trustbench.rtb.corpus._normalise import equivalent, normalise_value
from trustbench.rtb.policy.narrow_v2._reviewer import instant

REALISM: dict[str, str] = {
    "proposal-changes-something": "a proposal sets a parameter the target does not already have",
    "two-person-tiers-upward-closed": "a two-person tier implies every higher tier",
    "risk-tier-from-environment-and-operation": "risk tier = operation risk moved by environment",
    "production-windowed": "every policy lists production among its window environments",
    "real-resource-types": "a target's resource type is the real type its operation acts on",
    "varied-service-notices": "notices name known services; no one text serves most notices",
    "calendar-timing": "off-peak windows up to 8 h, freezes of 1-21 days, as_of spread out",
    "approvals-their-own": "no revision shared across targets; superseded names its successor",
    "proposal-names-its-change": "a proposal names its defining parameters and changes one of them",
    "dated-names-not-later": "a name carrying a month is not later than the record naming it",
    "change-timing": "a base change falls in its environment's window, else in office hours",
    "notice-status-matches-text": "a service notice's status is the one its text states",
    "one-notice-per-service": "a case holds at most one notice per service",
    "coherent-parameters": "a parameter set means what it says (a disabled flag rolls out 0 %)",
}
"""Every realism constraint of v0.4 worlds (id -> the constraint), as the docs state them."""


# ------------------------------------------------------------------------------------------------
# The catalogue: domain groups, with the real resource type each operation acts on and its risk.


class Domain(NamedTuple):
    """One domain group: an operation on one kind of resource, and the values it sets."""

    group: str
    """Domain group (fault scenarios and leave-one-group-out audits split on it)."""
    operation: str
    """The operation a proposal asks for."""
    resource_type: str
    """The real resource type the operation acts on (what the state record says)."""
    target: str
    """Target name pattern (`{svc}` is a service name)."""
    risk: int
    """Base risk of the operation: 1 standard, 2 high (an environment moves it, `expected_tier`)."""
    space: dict[str, tuple[Any, ...]]
    """Parameter -> the values a team sets it to."""
    sibling: str
    """A sibling target pattern (an approval for the neighbour resource, not this one)."""
    defining: tuple[str, ...]
    """The parameters that say what the change is: every proposal names them, and changes one."""


DOMAINS: tuple[Domain, ...] = (
    Domain(
        "backup_retention",
        "set_backup_retention",
        "backup_plan",
        "backup-plan/{svc}-db",
        1,
        {"retention_days": (7, 14, 30, 35, 90), "copy_region": ("none", "eu-west-1", "us-east-2")},
        "backup-plan/{svc}-files",
        ("retention_days",),
    ),
    Domain(
        "dns_records",
        "update_dns_record",
        "dns_record",
        "{svc}.internal.example.com",
        1,
        {"ttl": (60, 300, 3600), "record_type": ("A", "CNAME")},
        "{svc}-api.internal.example.com",
        ("record_type", "ttl"),
    ),
    Domain(
        "firewall_rules",
        "open_firewall_port",
        "firewall_rule",
        "fw/{svc}-ingress",
        2,
        {
            "port": (443, 8443, 5432, 6379),
            "source_cidr": ("10.0.0.0/8", "10.20.0.0/16", "192.168.40.0/24"),
        },
        "fw/{svc}-egress",
        ("port", "source_cidr"),
    ),
    Domain(
        "iam_roles",
        "grant_role",
        "iam_role_binding",
        "principal/svc-{svc}",
        2,
        {"role": ("viewer", "editor", "storage.admin"), "duration_h": (4, 8, 24)},
        "principal/ci-{svc}",
        ("role",),
    ),
    Domain(
        "db_schema",
        "apply_migration",
        "database",
        "db/{svc}-primary",
        2,
        {
            "migration": ("0412_add_index", "0413_backfill", "0420_drop_legacy"),
            "lock_timeout_s": (5, 30, 60),
        },
        "db/{svc}-replica",
        ("migration",),
    ),
    Domain(
        "k8s_scaling",
        "scale_deployment",
        "deployment",
        "deploy/{svc}-api",
        1,
        {"replicas": (3, 4, 6, 8, 12), "max_surge": (1, 2, 3)},
        "deploy/{svc}-worker",
        ("replicas",),
    ),
    Domain(
        "object_storage",
        "set_bucket_policy",
        "bucket",
        "bucket/{svc}-artifacts",
        1,
        {"versioning": ("enabled", "suspended"), "lifecycle_days": (30, 90, 365)},
        "bucket/{svc}-exports",
        ("versioning", "lifecycle_days"),
    ),
    Domain(
        "tls_certs",
        "rotate_certificate",
        "certificate",
        "cert/{svc}.example.com",
        1,
        {"key_type": ("rsa-2048", "rsa-4096", "ecdsa-p256"), "validity_days": (90, 180, 365)},
        "cert/{svc}-admin.example.com",
        ("key_type",),
    ),
    Domain(
        "secrets",
        "rotate_secret",
        "secret",
        "secret/{svc}-db-password",
        2,
        {"length": (32, 48, 64), "rotation_days": (30, 60, 90)},
        "secret/{svc}-api-token",
        ("length",),
    ),
    Domain(
        "cicd_keys",
        "add_deploy_key",
        "deploy_key",
        "repo/{svc}-service",
        1,
        {"read_only": (True, False), "expiry_days": (30, 90, 180)},
        "repo/{svc}-infra",
        ("read_only",),
    ),
    Domain(
        "vpn_access",
        "grant_vpn_access",
        "vpn_profile",
        "vpn/{svc}-oncall",
        1,
        {"profile": ("split-tunnel", "full-tunnel"), "days": (7, 14, 30)},
        "vpn/{svc}-contractors",
        ("profile",),
    ),
    Domain(
        "log_retention",
        "set_log_retention",
        "log_group",
        "logs/{svc}-app",
        1,
        {"days": (14, 30, 90, 400), "archive": ("none", "cold-storage")},
        "logs/{svc}-audit",
        ("days",),
    ),
    Domain(
        "cdn_config",
        "purge_cdn_cache",
        "cdn_distribution",
        "cdn/{svc}-web",
        1,
        {"scope": ("path", "prefix", "all"), "soft": (True, False)},
        "cdn/{svc}-static",
        ("scope",),
    ),
    Domain(
        "queue_config",
        "resize_queue",
        "message_queue",
        "queue/{svc}-events",
        1,
        {"max_messages": (1000, 5000, 20000), "dead_letter": ("enabled", "disabled")},
        "queue/{svc}-retries",
        ("max_messages",),
    ),
    Domain(
        "feature_flags",
        "toggle_feature",
        "feature_flag",
        "flag/{svc}-new-checkout",
        1,
        {"enabled": (True, False), "rollout_percent": (0, 5, 25, 50, 100)},
        "flag/{svc}-dark-mode",
        ("enabled",),
    ),
    Domain(
        "vm_images",
        "roll_image",
        "instance_group",
        "fleet/{svc}-workers",
        2,
        {"image": ("img-{m1}", "img-{m2}", "img-{m3}"), "batch_percent": (10, 25, 50)},
        "fleet/{svc}-batch",
        ("image",),
    ),
    Domain(
        "network_routes",
        "add_route",
        "route_table",
        "vpc/{svc}-private",
        2,
        {"cidr": ("10.40.0.0/16", "10.48.0.0/16"), "next_hop": ("tgw-core", "nat-a", "nat-b")},
        "vpc/{svc}-public",
        ("cidr", "next_hop"),
    ),
    Domain(
        "compute_quotas",
        "raise_quota",
        "compute_quota",
        "quota/{svc}-compute",
        1,
        {"limit": (50, 100, 200, 500), "unit": ("vcpu", "gpu")},
        "quota/{svc}-batch",
        ("limit", "unit"),
    ),
    Domain(
        "email_routing",
        "update_mx",
        "mx_record",
        "mail.{svc}.example.com",
        2,
        {"priority": (10, 20, 30), "host": ("mx1.mail.example.net", "mx2.mail.example.net")},
        "bounce.{svc}.example.com",
        ("host", "priority"),
    ),
    Domain(
        "audit_config",
        "change_audit_level",
        "audit_policy",
        "audit/{svc}",
        2,
        {"level": ("basic", "full"), "sink": ("siem", "archive-bucket")},
        "audit/{svc}-admin",
        ("level",),
    ),
    Domain(
        "load_balancers",
        "update_lb_listener",
        "load_balancer_listener",
        "lb/{svc}-public",
        1,
        {"idle_timeout_s": (60, 120, 300), "tls_policy": ("tls12-2021", "tls13-2023")},
        "lb/{svc}-internal",
        ("idle_timeout_s", "tls_policy"),
    ),
    Domain(
        "scheduled_jobs",
        "update_schedule",
        "scheduled_job",
        "job/{svc}-nightly-export",
        1,
        {"schedule": ("0 2 * * *", "30 3 * * *", "0 4 * * 0"), "concurrency": (1, 2)},
        "job/{svc}-weekly-report",
        ("schedule",),
    ),
)
"""The 22 domain groups."""

RESOURCE_TYPES: dict[str, str] = {d.operation: d.resource_type for d in DOMAINS}
"""Operation -> the resource type it acts on (`real-resource-types`)."""

TIERS: tuple[str, ...] = ("low", "standard", "high", "critical")
"""Risk tiers, lowest first (two-person tiers are upward-closed in this order)."""
ENVIRONMENTS: tuple[str, ...] = ("production", "shared-services", "staging", "sandbox")
ENVIRONMENT_SHIFT: dict[str, int] = {
    "production": 1,
    "shared-services": 1,
    "staging": 0,
    "sandbox": -1,
}
"""How an environment moves an operation's base risk (production raises it, sandbox lowers it)."""
SERVICES: tuple[str, ...] = (
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
    "inventory",
    "shipping",
)
NAMES: tuple[str, ...] = (
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
    "u.horvat",
    "v.rossi",
)
TEAM_OFFSETS: tuple[int, ...] = (0, 60, 120, -300, -420, 330, 540, 600)
"""UTC offsets (minutes) of the teams whose calendars the worlds use."""
NOTICES: dict[str, tuple[tuple[str, str], ...]] = {
    "cmdb": (
        ("degraded", "CMDB sync is running behind; ownership data may be up to 2 h old."),
        ("degraded", "CMDB read replica failing over; lookups may time out."),
        ("unavailable", "CMDB is down for an emergency upgrade; lookups fail."),
    ),
    "metrics-pipeline": (
        ("degraded", "Metrics ingestion delayed by about 15 minutes."),
        ("degraded", "Dashboards show gaps for the last hour; alerting unaffected."),
        ("unavailable", "Metrics ingestion stopped; dashboards are not updating."),
    ),
    "artifact-registry": (
        ("degraded", "Registry pulls are slow in eu-west-1."),
        ("degraded", "Artifact uploads failing intermittently; retries succeed."),
        ("unavailable", "Artifact registry unreachable from eu-west-1; pulls fail."),
    ),
    "ci-runners": (
        ("degraded", "CI runner pool at capacity; queued jobs wait about 20 minutes."),
        ("unavailable", "CI runners offline; no jobs are being scheduled."),
    ),
    "status-page": (
        ("degraded", "Status page updates delayed; incident comms via chat."),
        ("unavailable", "Status page is down; incident comms via chat."),
    ),
    "approval-service": (
        ("degraded", "Approval lookups intermittently slow; cached results may be served."),
        ("degraded", "Approval API returning 503 for some queries."),
        ("degraded", "Approval service read path degraded during database failover."),
        ("unavailable", "Approval service outage: every lookup fails until failover completes."),
        ("unavailable", "Approval API unreachable; no approval can be looked up."),
    ),
}
"""Service -> (status, text) of the notices the platform writes (`varied-service-notices`).

A text says how bad the outage is, so it is drawn with its status (`notice-status-matches-text`)
and a notice re-pointed to another service keeps its status (both statuses have texts).
"""
FREEZE_REASONS: tuple[str, ...] = (
    "quarter-end close",
    "holiday change freeze",
    "release stabilisation",
    "peak sale traffic",
    "SOX audit fieldwork",
    "data-centre migration",
)


def expected_tier(operation: str, environment: str) -> str | None:
    """The risk tier of `operation` in `environment`, or None for an operation not catalogued."""
    domain = next((d for d in DOMAINS if d.operation == operation), None)
    if domain is None:
        return None
    shift = ENVIRONMENT_SHIFT.get(environment.strip(), 0)
    return TIERS[min(len(TIERS) - 1, max(0, domain.risk + shift))]


def domain_of(operation: str) -> Domain:
    """The catalogued domain of an operation."""
    return next(d for d in DOMAINS if d.operation == operation)


IMAGE_AGES_DAYS: tuple[int, ...] = (100, 135, 170)
"""How long before `as_of` the images `{m1}`, `{m2}`, `{m3}` were built.

At least 100 days, so an image is older than every record that names it (the oldest, a past
change's approval, is issued at most 90 days before `as_of`); 35 days apart, so the three months
differ (`dated-names-not-later`).
"""


def dated_space(domain: Domain, as_of: datetime) -> dict[str, tuple[Any, ...]]:
    """`domain.space` with image names dated for a world judged at `as_of`."""
    months = {
        f"m{index}": (as_of - timedelta(days=days)).strftime("%Y-%m")
        for index, days in enumerate(IMAGE_AGES_DAYS, start=1)
    }
    return {
        key: tuple(v.format(**months) if isinstance(v, str) else v for v in values)
        for key, values in domain.space.items()
    }


def incoherent(operation: str, parameters: dict[str, Any]) -> str | None:
    """Why a parameter set means little (`coherent-parameters`), or None when it is coherent.

    A feature flag that is off rolls out to nobody, and one that is on rolls out to someone.
    """
    if operation != "toggle_feature":
        return None
    enabled, rollout = parameters.get("enabled"), normalise_value(parameters.get("rollout_percent"))
    if enabled is False and rollout not in (None, 0):
        return f"enabled false with rollout_percent {rollout}"
    if enabled is True and rollout == 0:
        return "enabled true with rollout_percent 0"
    return None


def office_hours_before(
    rng: random.Random, as_of: datetime, offset: int, low_days: int, high_days: int
) -> datetime:
    """An office-hours instant (team clock) some days before `as_of`, and an hour before it."""
    moment = local(as_of, offset) - timedelta(days=rng.randint(low_days, high_days))
    while moment.weekday() >= 5:
        moment -= timedelta(days=1)
    clock = moment.replace(hour=rng.randint(9, 16), minute=rng.choice((0, 10, 25, 40, 55)))
    return min(clock.astimezone(UTC), as_of - timedelta(hours=1))


def draw_parameters(
    rng: random.Random,
    domain: Domain,
    space: dict[str, tuple[Any, ...]],
    current: dict[str, Any],
) -> dict[str, Any]:
    """Parameters a proposal or approval sets from `current`: every defining one, one changed.

    One defining parameter (sometimes a second parameter too) changes; the other defining ones
    are restated, and the rest sometimes are. A change that leaves the set incoherent (a flag
    switched off, still rolled out) also changes what it must (the rollout, to 0), as a team does.
    """
    for _ in range(100):
        changed = {rng.choice(domain.defining)}
        if rng.random() < 1 / 3:
            changed.add(rng.choice(sorted(space)))
        proposed = {
            key: rng.choice([v for v in space[key] if v != current[key]])
            if key in changed
            else current[key]
            for key in sorted(space)
            if key in changed or key in domain.defining or rng.random() < 0.25
        }
        if incoherent(domain.operation, {**current, **proposed}) is None:
            return proposed
        repairs = [
            (key, value)
            for key in sorted(space)
            if key not in changed
            for value in space[key]
            if value != current[key]
        ]
        rng.shuffle(repairs)
        for key, value in repairs:
            if incoherent(domain.operation, {**current, **proposed, key: value}) is None:
                return {**proposed, key: value}
    raise ValueError(f"no coherent parameters for {domain.operation} from {current}")


def draw_current(
    rng: random.Random, domain: Domain, space: dict[str, tuple[Any, ...]]
) -> dict[str, Any]:
    """A coherent set of attributes a resource holds now."""
    while True:
        current = {key: rng.choice(values) for key, values in space.items()}
        if incoherent(domain.operation, current) is None:
            return current


# ------------------------------------------------------------------------------------------------
# Times: every instant is written in the offset of the system that records it.


def stamp(moment: datetime, offset_minutes: int, *, zulu: bool = False) -> str:
    """`moment` written in a UTC offset (`Z` for UTC when `zulu`)."""
    local = moment.astimezone(timezone(timedelta(minutes=offset_minutes)))
    text = local.strftime("%Y-%m-%dT%H:%M:%S")
    if offset_minutes == 0 and zulu:
        return text + "Z"
    sign = "-" if offset_minutes < 0 else "+"
    hours_, minutes = divmod(abs(offset_minutes), 60)
    return f"{text}{sign}{hours_:02d}:{minutes:02d}"


def offset_of(text: str) -> tuple[int, bool]:
    """The UTC offset (minutes) a timestamp is written in, and whether it is written `Z`."""
    if text.endswith(("Z", "z")):
        return 0, True
    parsed = datetime.fromisoformat(text)
    delta = parsed.utcoffset() or timedelta(0)
    return int(delta.total_seconds() // 60), False


def like(text: str, moment: datetime) -> str:
    """`moment` written as `text` is written (same offset, same `Z`)."""
    minutes, zulu = offset_of(text)
    return stamp(moment, minutes, zulu=zulu)


def local(moment: datetime, offset_minutes: int) -> datetime:
    """`moment` on the local clock of a team."""
    return moment.astimezone(timezone(timedelta(minutes=offset_minutes)))


def opaque(rng: random.Random, prefix: str = "", length: int = 10) -> str:
    """A random id with no structure beyond its prefix."""
    return prefix + "".join(rng.choice("0123456789abcdefghjkmnpqrstvwxyz") for _ in range(length))


# ------------------------------------------------------------------------------------------------
# A draft: one case's candidate-visible content as plain JSON values, edited in place by a family.


@dataclass
class Draft:
    """One family member before it becomes a case: the input as JSON values plus world facts."""

    task: str
    as_of: str
    proposal: dict[str, Any]
    evidence: list[dict[str, Any]]
    governing: str
    """Record id of the approval built to govern (an edit may make it not apply)."""
    archetype: str
    """`standard`, `delegated` (a delegate approves) or `emergency` (break-glass lifts a freeze)."""
    team_offset: int
    """The team's UTC offset in minutes (its calendar is written in it)."""
    facts: dict[str, Any] = field(default_factory=dict)
    """World facts edits read (names by role, the open window's id, the scheduled freeze's id)."""

    def copy(self) -> Draft:
        """A deep copy (an edit never changes the member it was made from)."""
        import copy

        return copy.deepcopy(self)

    def record(self, record_id: str) -> dict[str, Any]:
        """The evidence record with this id."""
        return next(r for r in self.evidence if r["record_id"] == record_id)

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        """Every evidence record of a kind, in presentation order."""
        return [r for r in self.evidence if r["kind"] == kind]

    def policy(self) -> dict[str, Any]:
        """The policy record."""
        return self.of_kind("policy")[0]

    def approval(self) -> dict[str, Any]:
        """The approval built to govern."""
        return self.record(self.governing)

    @property
    def at(self) -> datetime:
        """`as_of` as an instant."""
        return instant(self.as_of)


class _World:
    """The facts of one base world while it is built (names, times, ids), before the records."""

    def __init__(self, rng: random.Random, domain: Domain, archetype: str) -> None:
        self.rng, self.domain, self.archetype = rng, domain, archetype
        self.offset = rng.choice(TEAM_OFFSETS)
        self.service = rng.choice(SERVICES)
        self.target = domain.target.format(svc=self.service)
        self.environment = "production" if archetype == "emergency" else self._environment()
        self.tier = expected_tier(domain.operation, self.environment) or "standard"
        cut = rng.choice((1, 2, 2, 3))  # standard+, high+ or critical: upward-closed
        self.two_person = list(TIERS[cut:])
        windowed = {"production"} | {
            e for e in ("shared-services", "staging") if rng.random() < 0.4
        }
        self.window_environments = sorted(windowed)
        people = rng.sample(NAMES, 9)
        self.people = dict(
            zip(
                (
                    "requester",
                    "approver",
                    "second",
                    "outsider",
                    "holder",
                    "reviewer",
                    "delegate",
                    "revoker",
                    "lead",
                ),
                people,
                strict=True,
            )
        )
        self.rid_seen: set[str] = set()
        self.window_start = datetime(2026, 1, 1, tzinfo=UTC)
        """Start of the environment's maintenance slot this week (set with `as_of`)."""
        self.slot_hours = 4
        self.as_of = self._as_of()
        self.space = dated_space(domain, self.as_of)
        """The values a team sets, with image names dated for this world."""

    def _environment(self) -> str:
        return self.rng.choices(ENVIRONMENTS, weights=(40, 20, 25, 15))[0]

    def rid(self) -> str:
        """A fresh opaque record id."""
        while (rid := opaque(self.rng, "rec-")) in self.rid_seen:
            pass
        self.rid_seen.add(rid)
        return rid

    def windowed(self) -> bool:
        """Whether the proposal's environment runs changes only inside maintenance windows."""
        return self.environment in self.window_environments

    def _day(self) -> datetime:
        """A local midnight in 2026 (weighted away from the year-end freeze, as calendars are)."""
        day = datetime(2026, 1, 12, tzinfo=UTC) + timedelta(days=self.rng.randrange(0, 330))
        return day.replace(tzinfo=timezone(timedelta(minutes=self.offset)))

    def _as_of(self) -> datetime:
        """When the change is judged: inside the current window, in office hours, or any time."""
        rng, day = self.rng, self._day()
        if self.archetype == "emergency":  # an incident, any time; the next slot is tomorrow
            self.window_start = (day + timedelta(days=1, hours=22)).astimezone(UTC)
            return (day + timedelta(minutes=rng.randrange(0, 24 * 60))).astimezone(UTC)
        if self.windowed():
            slot = rng.choice((("weeknight", 22, 4), ("weekend", 6, 4), ("early", 5, 2)))
            self.slot_hours = slot[2]
            weekday = 5 if slot[0] == "weekend" else rng.choice((1, 2, 3))
            day += timedelta(days=(weekday - day.weekday()) % 7)
            self.window_start = (day + timedelta(hours=slot[1])).astimezone(UTC)
            into = rng.randrange(10, slot[2] * 60 - 15)
            return self.window_start + timedelta(minutes=into)
        day += timedelta(days=(rng.choice((0, 1, 2, 3, 4)) - day.weekday()) % 7)
        return (day + timedelta(minutes=rng.randrange(9 * 60, 17 * 60 + 30))).astimezone(UTC)

    def office_hours_before(self, low_days: int, high_days: int) -> datetime:
        """An office-hours instant some days before `as_of` (approvals, delegations)."""
        return office_hours_before(self.rng, self.as_of, self.offset, low_days, high_days)

    def t(self, moment: datetime, *, calendar: bool = False) -> str:
        """Calendar entries and `as_of` in the team's offset; service records in UTC (`Z`)."""
        return stamp(moment, self.offset) if calendar else stamp(moment, 0, zulu=True)


def _values(world: _World) -> tuple[dict[str, Any], dict[str, Any]]:
    """(current attributes, proposed parameters): the proposal names and changes its definition."""
    current = draw_current(world.rng, world.domain, world.space)
    return current, draw_parameters(world.rng, world.domain, world.space, current)


def _policy_record(world: _World) -> dict[str, Any]:
    from trustbench.rtb.policy.narrow_v4._models import (
        POLICY_ID_V4,
        POLICY_TITLE_V4,
        policy_text_v4,
    )

    rng, p, env = world.rng, world.people, world.environment
    others = [e for e in ENVIRONMENTS if e != env]
    scopes = {
        p["approver"]: sorted({env, *rng.sample(others, rng.randint(0, 2))}),
        p["second"]: sorted({env, *rng.sample(others, rng.randint(0, 1))}),
        p["requester"]: sorted({env, *rng.sample(others, rng.randint(0, 1))}),
        p["outsider"]: sorted(rng.sample(others, rng.randint(1, 2))),
        p["lead"]: sorted(ENVIRONMENTS),
    }
    scopes = dict(rng.sample(list(scopes.items()), len(scopes)))
    holders = [p["holder"], p["lead"]] if rng.random() < 0.5 else [p["holder"]]
    return {
        "kind": "policy",
        "record_id": world.rid(),
        "policy_id": POLICY_ID_V4,
        "title": POLICY_TITLE_V4,
        "text": policy_text_v4(),
        "approver_scopes": scopes,
        "two_person_tiers": world.two_person,
        "window_environments": world.window_environments,
        "break_glass_holders": holders,
    }


def _approval(world: _World, proposed: dict[str, Any], revision: str) -> dict[str, Any]:
    rng, p = world.rng, world.people
    approved = dict(proposed)
    spare = [k for k in world.space if k not in approved]
    if spare and rng.random() < 0.4:  # the plan approves more than this step sets
        key = rng.choice(spare)
        approved[key] = rng.choice(world.space[key])
    if world.archetype == "emergency":
        issued = world.as_of - timedelta(minutes=rng.randint(10, 180))
        expires: datetime | None = issued + timedelta(hours=rng.choice((12, 24, 48)))
    else:
        issued = world.office_hours_before(1, 9)
        expires = issued + timedelta(days=rng.choice((14, 21, 30))) if rng.random() < 0.8 else None
    needs_two = world.tier in world.two_person or world.archetype == "emergency"
    return {
        "kind": "approval",
        "record_id": world.rid(),
        "approval_id": opaque(rng, "chg-"),
        "status": "active",
        "operation": world.domain.operation,
        "target": world.target,
        "approved_parameters": approved,
        "approved_revision": revision,
        "approved_by": p["delegate"] if world.archetype == "delegated" else p["approver"],
        "co_approved_by": [p["second"]] if needs_two or rng.random() < 0.25 else [],
        "issued_at": world.t(issued),
        "expires_at": None if expires is None else world.t(expires),
        "superseded_by": None,
        "note": rng.choice(
            ("", "", "standard change", "per CAB", "see ticket", "low blast radius")
        ),
    }


def _state(world: _World, current: dict[str, Any], revision: int) -> dict[str, Any]:
    rng = world.rng
    scope = revision if rng.random() < 0.3 else revision + rng.randint(3, 400)
    return {
        "kind": "resource_state",
        "record_id": world.rid(),
        "resource_id": world.target,
        "resource_type": world.domain.resource_type,
        "revision": f"r{revision}",
        "scope_revision": f"r{scope}",
        "attributes": current,
    }


def _span(world: _World, kind: str, start: datetime, end: datetime) -> dict[str, Any]:
    return {"starts_at": world.t(start, calendar=True), "ends_at": world.t(end, calendar=True)}


def _maintenance(world: _World) -> tuple[list[dict[str, Any]], str | None]:
    """The calendar's maintenance windows: the open one (if windowed), next week's, another's."""
    rng, out, open_id = world.rng, [], None
    if world.windowed():
        for weeks in (0, 1) if rng.random() < 0.5 else (-1, 0, 1):
            start = world.window_start + timedelta(days=7 * weeks)
            end = start + timedelta(hours=world.slot_hours)
            record = {
                "kind": "maintenance_window",
                "record_id": world.rid(),
                "environment": world.environment,
                **_span(world, "w", start, end),
            }
            out.append(record)
            if weeks == 0 and world.archetype != "emergency":
                open_id = record["record_id"]
    others = [e for e in world.window_environments if e != world.environment]
    if others:
        start = local(world.as_of, world.offset).replace(hour=22, minute=0) + timedelta(
            days=rng.randint(1, 6)
        )
        end = start + timedelta(hours=rng.choice((2, 4)))
        out.append(
            {
                "kind": "maintenance_window",
                "record_id": world.rid(),
                "environment": rng.choice(others),
                **_span(world, "w", start, end),
            }
        )
    return out, open_id


def _freezes(world: _World) -> tuple[list[dict[str, Any]], str]:
    """A freeze over the environment: scheduled after `as_of`, or in effect (emergency)."""
    rng, env = world.rng, world.environment
    covered = sorted({env, "production", *rng.sample(ENVIRONMENTS, rng.randint(0, 2))})
    if world.archetype == "emergency":
        start = world.as_of - timedelta(days=rng.randint(1, 6), hours=rng.randint(0, 12))
    else:
        start = world.as_of + timedelta(days=rng.randint(2, 20), hours=rng.randint(0, 12))
    start = local(start, world.offset).replace(hour=0, minute=0, second=0)
    end = start + timedelta(days=rng.randint(3, 12))
    if world.archetype == "emergency":  # in effect at as_of, whatever length was drawn
        end = max(
            end,
            local(world.as_of, world.offset).replace(hour=0, minute=0, second=0)
            + timedelta(days=rng.randint(1, 5)),
        )
    scheduled = {
        "kind": "freeze_window",
        "record_id": world.rid(),
        "environments": covered,
        **_span(world, "f", start, end),
        "reason": rng.choice(FREEZE_REASONS),
    }
    out = [scheduled]
    if rng.random() < 0.5:
        ended = local(world.as_of, world.offset).replace(hour=0, minute=0, second=0) - timedelta(
            days=rng.randint(3, 40)
        )
        out.append(
            {
                "kind": "freeze_window",
                "record_id": world.rid(),
                "environments": sorted({"production", *rng.sample(ENVIRONMENTS, 1)}),
                **_span(world, "f", ended - timedelta(days=rng.randint(2, 10)), ended),
                "reason": rng.choice(FREEZE_REASONS),
            }
        )
    return out, scheduled["record_id"]


def _delegation(world: _World) -> dict[str, Any]:
    rng, p = world.rng, world.people
    start = world.office_hours_before(1, 10)
    end = local(world.as_of, world.offset).replace(hour=0, minute=0, second=0) + timedelta(
        days=rng.randint(2, 14)
    )
    envs = sorted({world.environment, *rng.sample(ENVIRONMENTS, rng.randint(0, 1))})
    return {
        "kind": "delegation",
        "record_id": world.rid(),
        "delegator": p["approver"],
        "delegate": p["delegate"],
        "operations": [world.domain.operation],
        "environments": envs,
        "valid_from": world.t(start),
        "valid_until": world.t(end.astimezone(UTC)),
    }


def _break_glass(world: _World) -> dict[str, Any]:
    rng, p = world.rng, world.people
    declared = world.as_of - timedelta(minutes=rng.randint(20, 360))
    return {
        "kind": "break_glass",
        "record_id": world.rid(),
        "target": world.target,
        "declared_by": p["holder"],
        "incident": f"INC-{rng.randint(10000, 99999)}",
        "declared_at": world.t(declared),
        "expires_at": world.t(declared + timedelta(hours=rng.choice((8, 12, 24)))),
        "post_review_by": p["reviewer"],
    }


def _history(world: _World, current: dict[str, Any], approval: dict[str, Any]) -> dict[str, Any]:
    """The approval of the change that set the current values (expired, or superseded)."""
    rng = world.rng
    issued = world.as_of - timedelta(days=rng.randint(20, 90), hours=rng.randint(0, 8))
    superseded = rng.random() < 0.4
    return {
        "kind": "approval",
        "record_id": world.rid(),
        "approval_id": opaque(rng, "chg-"),
        "status": "superseded" if superseded else "active",
        "operation": world.domain.operation,
        "target": world.target,
        "approved_parameters": {k: current[k] for k in approval["approved_parameters"]},
        "approved_revision": f"r{rng.randint(100, 900)}",
        "approved_by": world.people["lead"],
        "co_approved_by": [],
        "issued_at": world.t(issued),
        "expires_at": world.t(issued + timedelta(days=rng.choice((7, 14)))),
        "superseded_by": approval["approval_id"] if superseded else None,
        "note": "",
    }


def _context(world: _World) -> list[dict[str, Any]]:
    """Tickets, requester notes and service notices: context that decides nothing here."""
    rng, out = world.rng, []
    if rng.random() < 0.6:
        summary = rng.choice(
            (
                "{op} on {target} for the {svc} team",
                "Follow-up to capacity review: {op} {target}",
                "{svc}: {op} ({target}) per runbook",
                "Planned change: {op} on {target}",
            )
        ).format(op=world.domain.operation, target=world.target, svc=world.service)
        out.append(
            {
                "kind": "change_ticket",
                "record_id": world.rid(),
                "ticket_id": f"CHG{rng.randint(100000, 999999)}",
                "summary": summary,
            }
        )
    if rng.random() < 0.35:
        text = rng.choice(
            (
                "Approved already, please proceed.",
                "Tested in staging this week; low risk.",
                "Customer-facing impact if this waits.",
                "Rollback plan is in the ticket.",
                "Second approver is on leave this week.",
            )
        )
        out.append(
            {
                "kind": "requester_note",
                "record_id": world.rid(),
                "author": world.people["requester"],
                "text": text,
            }
        )
    if rng.random() < 0.4:
        service = rng.choice(sorted(NOTICES))
        status, text = rng.choice(NOTICES[service])
        out.append(
            {
                "kind": "service_notice",
                "record_id": world.rid(),
                "service": service,
                "status": status,
                "text": text,
            }
        )
    return out


TASKS: tuple[str, ...] = (
    "Review the proposed {op} on {target} under the policy in the evidence, as of the stated time.",
    "Decide whether {op} on {target} may proceed now, using only the evidence provided.",
    "Advisory review: {op} requested for {target}. Apply the policy record to the evidence.",
    "Assess the change request ({op}, {target}) against the evidence at as_of.",
)


def base_draft(rng: random.Random, domain: Domain, archetype: str) -> Draft:
    """A realistic, permitted change in one domain: the base of a contrast family."""
    world = _World(rng, domain, archetype)
    current, proposed = _values(world)
    revision = rng.randint(1000, 98000)
    policy = _policy_record(world)
    approval = _approval(world, proposed, f"r{revision}")
    evidence = [approval, policy, _state(world, current, revision)]
    windows, open_window = _maintenance(world)
    freezes, scheduled_freeze = _freezes(world)
    evidence += windows + freezes
    if archetype == "delegated":
        evidence.append(_delegation(world))
    if archetype == "emergency":
        evidence.append(_break_glass(world))
    if rng.random() < 0.5:
        evidence.append(_history(world, current, approval))
    if rng.random() < 0.3:  # a withdrawal already scheduled for after as_of
        evidence.append(
            {
                "kind": "revocation",
                "record_id": world.rid(),
                "revokes": approval["approval_id"],
                "revoked_at": world.t(world.as_of + timedelta(days=rng.randint(1, 10))),
                "revoked_by": world.people["lead"],
                "reason": "scheduled withdrawal",
            }
        )
    evidence += _context(world)
    rng.shuffle(evidence)
    proposal = {
        "operation": domain.operation,
        "target": world.target,
        "parameters": proposed,
        "resource_revision": f"r{revision}",
        "requested_by": world.people["requester"],
        "environment": world.environment,
        "risk_tier": world.tier,
    }
    return Draft(
        task=rng.choice(TASKS).format(op=domain.operation, target=world.target),
        as_of=world.t(world.as_of, calendar=True),
        proposal=proposal,
        evidence=evidence,
        governing=approval["record_id"],
        archetype=archetype,
        team_offset=world.offset,
        facts={
            **world.people,
            "open_window": open_window,
            "scheduled_freeze": scheduled_freeze,
            "sibling": domain.sibling.format(svc=world.service),
            "current": current,
            "space": world.space,
        },
    )


# ------------------------------------------------------------------------------------------------
# The checks: each realism constraint on any set of cases, and the family contract.


def _kinds(case: Any, kind: str) -> list[Any]:
    return [r for r in case.evidence if r.kind == kind]


def _case_realism(case: Any) -> list[tuple[str, str, str]]:
    """(pointer, constraint, message) of one case's realism problems."""
    found: list[tuple[str, str, str]] = []
    proposal = case.proposal
    tier = expected_tier(proposal.operation, proposal.environment)
    if tier is None:
        found.append(("/proposal/operation", "real-resource-types", "operation not catalogued"))
    elif proposal.risk_tier.strip() != tier:
        found.append(
            (
                "/proposal/risk_tier",
                "risk-tier-from-environment-and-operation",
                f"{proposal.operation} in {proposal.environment} is {tier}",
            )
        )
    for policy in _kinds(case, "policy"):
        listed = {t.strip() for t in policy.two_person_tiers}
        lowest = min((TIERS.index(t) for t in listed if t in TIERS), default=len(TIERS))
        if listed != set(TIERS[lowest:]):
            found.append(("/evidence", "two-person-tiers-upward-closed", f"tiers {sorted(listed)}"))
        if "production" not in policy.window_environments:
            found.append(("/evidence", "production-windowed", "production needs no window"))
    for state in _kinds(case, "resource_state"):
        if state.resource_type != RESOURCE_TYPES.get(proposal.operation):
            found.append(("/evidence", "real-resource-types", f"type {state.resource_type!r}"))
        unchanged = all(
            key in state.attributes and equivalent(value, state.attributes[key])
            for key, value in proposal.parameters.items()
        )
        if unchanged and not case.variant.startswith("noop-"):
            found.append(("/proposal/parameters", "proposal-changes-something", "a no-op"))
    found += _definition_problems(case)
    found += _record_problems(case)
    found += _calendar_problems(case)
    return found


def _target_state(case: Any) -> Any | None:
    """The target's state record (None when the evidence holds only another resource's)."""
    states = _kinds(case, "resource_state")
    return next((s for s in states if s.resource_id == case.proposal.target), None)


def _definition_problems(case: Any) -> list[tuple[str, str, str]]:
    """`proposal-names-its-change` and `coherent-parameters` of the proposal."""
    found: list[tuple[str, str, str]] = []
    proposal = case.proposal
    domain = next((d for d in DOMAINS if d.operation == proposal.operation), None)
    if domain is None:
        return found
    missing = [key for key in domain.defining if key not in proposal.parameters]
    if missing:
        found.append(("/proposal/parameters", "proposal-names-its-change", f"no {missing}"))
    state = _target_state(case)
    attributes = dict(state.attributes) if state is not None else {}
    same = [
        key
        for key in domain.defining
        if key in proposal.parameters
        and key in attributes
        and equivalent(proposal.parameters[key], attributes[key])
    ]
    if state is not None and not missing and len(same) == len(domain.defining):
        found.append(("/proposal/parameters", "proposal-names-its-change", f"{same} unchanged"))
    why = incoherent(proposal.operation, {**attributes, **proposal.parameters})
    if why is not None:
        found.append(("/proposal/parameters", "coherent-parameters", why))
    return found


_MONTH = re.compile(r"\b(20\d\d)-(0[1-9]|1[0-2])\b")


def _later_names(values: Any, moment: datetime) -> list[str]:
    """The values of a parameter set that name a month after `moment`'s (UTC)."""
    limit = moment.astimezone(UTC).strftime("%Y-%m")
    return [
        value
        for value in (values or {}).values()
        if isinstance(value, str)
        and any(f"{year}-{month}" > limit for year, month in _MONTH.findall(value))
    ]


def _record_problems(case: Any) -> list[tuple[str, str, str]]:
    """Approvals, notices and dated names: each record as a real system writes it."""
    found: list[tuple[str, str, str]] = []
    at = instant(case.as_of)
    state = _target_state(case)
    for value in _later_names(case.proposal.parameters, at) + _later_names(
        state.attributes if state is not None else {}, at
    ):
        found.append(("/proposal", "dated-names-not-later", f"{value} after as_of"))
    approvals = _kinds(case, "approval")
    for approval in approvals:
        for value in _later_names(approval.approved_parameters, instant(approval.issued_at)):
            found.append(("/evidence", "dated-names-not-later", f"{approval.record_id}: {value}"))
        if (approval.status == "superseded") != (approval.superseded_by is not None):
            found.append(
                ("/evidence", "approvals-their-own", f"{approval.record_id}: supersession")
            )
    revisions = Counter((a.approved_revision, a.target) for a in approvals)
    shared = Counter(revision for revision, _ in revisions)
    found += [
        ("/evidence", "approvals-their-own", f"revision {revision} on {count} targets")
        for revision, count in shared.items()
        if count > 1
    ]
    notices = _kinds(case, "service_notice")
    for notice in notices:
        if (notice.status, notice.text) not in NOTICES.get(notice.service, ()):
            found.append(
                ("/evidence", "notice-status-matches-text", f"{notice.record_id}: {notice.status}")
            )
    services = Counter(notice.service for notice in notices)
    found += [
        ("/evidence", "one-notice-per-service", f"{count} notices of {service}")
        for service, count in services.items()
        if count > 1
    ]
    return found


def _change_timing(case: Any) -> list[tuple[str, str, str]]:
    """`change-timing` of a base member: in its environment's open window, else office hours.

    Only a base is judged: an edit may close the window on purpose, and a presentation edit
    restates the clock in another offset. An emergency (a break-glass) may fall at any hour.
    """
    if case.edit_of is not None or _kinds(case, "break_glass"):
        return []
    environment = case.proposal.environment.strip()
    windowed = any(environment in p.window_environments for p in _kinds(case, "policy"))
    at = instant(case.as_of)
    if windowed:
        inside = any(
            w.environment == environment and instant(w.starts_at) <= at < instant(w.ends_at)
            for w in _kinds(case, "maintenance_window")
        )
        return [] if inside else [("/as_of", "change-timing", "outside every window")]
    clock = datetime.fromisoformat(case.as_of.replace("Z", "+00:00"))
    minutes = clock.hour * 60 + clock.minute
    if clock.weekday() < 5 and 9 * 60 <= minutes <= 17 * 60 + 30:
        return []
    return [("/as_of", "change-timing", f"unwindowed change at {case.as_of}")]


def _calendar_problems(case: Any) -> list[tuple[str, str, str]]:
    found = _change_timing(case)
    for window in _kinds(case, "maintenance_window"):
        hours_ = (instant(window.ends_at) - instant(window.starts_at)).total_seconds() / 3600
        if not 0 < hours_ <= 8:
            found.append(("/evidence", "calendar-timing", f"window {window.record_id}: {hours_} h"))
    for freeze in _kinds(case, "freeze_window"):
        days = (instant(freeze.ends_at) - instant(freeze.starts_at)).total_seconds() / 86400
        if not 1 <= days <= 21:
            found.append(
                ("/evidence", "calendar-timing", f"freeze {freeze.record_id}: {days:.1f} d")
            )
    for approval in _kinds(case, "approval"):
        if approval.expires_at and instant(approval.expires_at) <= instant(approval.issued_at):
            found.append(("/evidence", "calendar-timing", f"{approval.record_id} expires unissued"))
    return found


def _corpus_realism(cases: Sequence[Any]) -> list[str]:
    """Constraints only a set of cases can break (notice texts, calendar spread)."""
    found: list[str] = []
    # A family's members share their records: a notice counts once however many members show it.
    unique = {r.record_id: r for case in cases for r in _kinds(case, "service_notice")}
    notices = list(unique.values())
    texts = Counter(notice.text for notice in notices)
    if len(notices) >= 8 and texts.most_common(1)[0][1] > len(notices) / 4:
        found.append(
            f"varied-service-notices: one text serves {texts.most_common(1)[0][1]} "
            f"of {len(notices)} notices"
        )
    found += [
        f"varied-service-notices: unknown service {n.service!r}"
        for n in notices
        if n.service not in NOTICES
    ]
    if len(cases) >= 60:
        found += _spread_problems(cases)
    return found


def _off_peak(window: Any) -> bool:
    """Whether a window starts off-peak on the clock it is written in.

    That clock is the team's, unless a presentation edit restated the window in another offset.
    """
    clock = datetime.fromisoformat(window.starts_at.replace("Z", "+00:00"))
    return clock.weekday() >= 5 or clock.hour >= 20 or clock.hour < 8


def _spread_problems(cases: Sequence[Any]) -> list[str]:
    found: list[str] = []
    windows = [w for case in cases for w in _kinds(case, "maintenance_window")]
    if windows and sum(map(_off_peak, windows)) < 0.7 * len(windows):
        found.append("calendar-timing: fewer than 70 % of maintenance windows start off-peak")
    if cases:
        moments = [datetime.fromisoformat(c.as_of.replace("Z", "+00:00")) for c in cases]
        hours_ = Counter(m.hour for m in moments)
        if len({m.month for m in moments}) < 6 or len({m.weekday() for m in moments}) < 5:
            found.append("calendar-timing: as_of spans too few months or weekdays")
        if hours_.most_common(1)[0][1] > len(cases) / 5:
            found.append("calendar-timing: one hour of the day holds a fifth of the cases")
    return found


def realism_problems(case_files: Sequence[tuple[str, Any]]) -> list[Problem]:
    """Every realism constraint (`REALISM`) a set of v0.4 cases breaks (empty: none).

    Args:
        case_files: `(relative path, case)` of every case.
    """
    problems = [
        Problem(file=rel, pointer=pointer, message=f"{constraint}: {message}")
        for rel, case in case_files
        for pointer, constraint, message in _case_realism(case)
    ]
    problems += [
        Problem(file="cases", pointer="", message=message)
        for message in _corpus_realism([case for _, case in case_files])
    ]
    return problems


def family_problems(case_files: Sequence[tuple[str, Any]]) -> list[Problem]:
    """The family contract of a set of v0.4 cases (empty: it holds).

    One base per family, edits of members present, one domain, every decision represented, and
    decision edits that change the decision of the member edited (presentation edits keep it).
    """
    families: dict[str, list[tuple[str, Any]]] = defaultdict(list)
    for rel, case in case_files:
        families[case.family].append((rel, case))
    problems: list[Problem] = []
    for family, members in sorted(families.items()):
        by_variant = {case.variant: case for _, case in members}
        bases = [rel for rel, case in members if case.edit_of is None]
        if len(bases) != 1:
            problems.append(
                Problem(
                    file=members[0][0],
                    pointer="/family",
                    message=f"family {family} has {len(bases)} base members",
                )
            )
        targets = {(c.group, c.proposal.operation) for _, c in members}
        decisions = {c.expectations.reference_decision.value for _, c in members}
        if len(targets) != 1 or decisions != {"permit", "deny", "hold"}:
            problems.append(
                Problem(
                    file=members[0][0],
                    pointer="/family",
                    message=f"family {family}: one domain and every decision "
                    f"needed, found {sorted(decisions)}",
                )
            )
        for rel, case in members:
            problems += _edit_problems(rel, case, by_variant)
    return problems


def _edit_problems(rel: str, case: Any, by_variant: dict[str, Any]) -> list[Problem]:
    if case.edit_of is None:
        return []
    parent = by_variant.get(case.edit_of)
    if parent is None:
        return [Problem(file=rel, pointer="/edit_of", message=f"no member {case.edit_of!r}")]
    same = parent.expectations.reference_decision == case.expectations.reference_decision
    presentation = case.variant.startswith("present-")
    if presentation != same:
        what = "a presentation edit changes" if presentation else "a decision edit keeps"
        return [Problem(file=rel, pointer="/variant", message=f"{what} the decision")]
    changed = fact_changes(parent, case)
    allowed = range(0, 1) if presentation else range(1, MAX_FACTS + 1)
    if len(changed) not in allowed:
        return [
            Problem(
                file=rel,
                pointer="/edit_of",
                message=f"the edit of {case.edit_of} changes {len(changed)} facts "
                f"({', '.join(changed[:4])}); allowed {allowed.start}-{allowed.stop - 1}",
            )
        ]
    return []


MAX_FACTS = 2
"""The most facts a decision edit changes (a freeze moved earlier: its start and its end)."""
CONTEXT_KINDS = frozenset({"change_ticket", "requester_note"})
"""Records that are context, never evidence: adding or rewording one changes no fact."""


def _facts(case: Any) -> dict[str, Any]:
    """Every fact a policy rule reads, normalised (times as instants, encodings folded)."""
    facts: dict[str, Any] = {"as_of": normalise_value(case.as_of)}
    proposal = case.proposal.model_dump(mode="json")
    for key, value in proposal.pop("parameters").items():
        facts[f"proposal/parameters/{key}"] = normalise_value(value)
    facts |= {f"proposal/{key}": normalise_value(value) for key, value in proposal.items()}
    for record in case.evidence:
        if record.kind in CONTEXT_KINDS:
            continue
        dumped = record.model_dump(mode="json")
        if record.kind == "approval":  # "superseded by X" is one fact written in two fields
            dumped["status"] = [dumped["status"], dumped.pop("superseded_by")]
        for key, value in dumped.items():
            items = value.items() if isinstance(value, dict) else [("", value)]
            for sub, item in items:
                facts[f"{record.record_id}/{key}/{sub}".rstrip("/")] = normalise_value(item)
    return facts


def fact_changes(parent: Any, child: Any) -> list[str]:
    """The facts `child` changes relative to `parent` (empty: a presentation edit).

    Each differing field is one fact, and so is each record added or removed, however many
    fields it has.
    """
    before, after = _facts(parent), _facts(child)
    records = {r.record_id for r in parent.evidence} ^ {r.record_id for r in child.evidence}
    changed = {
        key.split("/")[0] if key.split("/")[0] in records else key
        for key in before.keys() | after.keys()
        if before.get(key, _ABSENT) != after.get(key, _ABSENT)
    }
    return sorted(changed)


_ABSENT = object()
