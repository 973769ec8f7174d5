"""The reviewer report's per-rule breakdown: wrong decisions attributed to policy rules.

A small in-process run on one v0.1 domain group (6 cases x K=2). Each sentinel's errors are
known from the case variants alone: always-permit is wrong on the revoked, out-of-parameter,
changed-revision and unavailable-service cases, always-deny on the two permit cases (which no
rule decides) and the two hold cases, the empty reviewer never decides.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import invoke

SPEC = """
suite = "rtb"
track = "review"
trials_per_case = 2
concurrency = 4
timeout_s = 10.0
order_seed = 3

[corpus]
builtin = "v0.1"

[retry]
transport_max_retries = 0
candidate_resample = 0

[track_options]
cases = ["dns_changes-*"]
"""

CANDIDATE = """
[[candidates]]
name = "{name}"
kind = "inprocess"
entry = "trustbench.rtb.review.reviewers:chat_responder"
settings = {{ reviewer = "{name}" }}
"""


def test_the_report_attributes_each_wrong_decision_to_the_rules_that_decide_its_case(
    tmp_path: Path,
) -> None:
    spec = tmp_path / "exp.toml"
    names = ("reference-policy", "always-permit", "always-deny", "empty")
    spec.write_text(SPEC + "".join(CANDIDATE.format(name=n) for n in names))
    run_dir = tmp_path / "run"
    assert invoke("freeze", str(spec), "--out", str(run_dir))[0] == 0
    assert invoke("run", str(run_dir), "--quiet")[0] == 0
    invoke("report", str(run_dir))
    record = json.loads((run_dir / "record.json").read_text())["review"]["rule_breakdown"]

    rules = {r["rule_id"]: r["cases"] for r in record["rules"]}
    assert rules["approval-active"] == rules["exact-parameters"] == 1
    assert rules["revision-current"] == rules["missing-is-hold"] == 1
    assert rules["operation-and-target"] == rules["deny-outranks-hold"] == 0
    assert record["cases_no_rule_decides"] == 2  # permitted and presentation_only
    configurations = record["configurations"]
    assert "unchecked" not in configurations

    def wrong(name: str) -> dict[str, tuple[int, int]]:
        counts = configurations[name]["rules"]
        return {rule: (c["wrong_trials"], c["trials"]) for rule, c in counts.items() if c["trials"]}

    assert wrong("reference-policy") == {rule: (0, 2) for rule in wrong("reference-policy")}
    assert configurations["reference-policy"]["wrong_trials"] == 0
    assert wrong("always-permit") == {
        "approval-active": (2, 2),
        "exact-parameters": (2, 2),
        "revision-current": (2, 2),
        "missing-is-hold": (2, 2),
    }
    assert configurations["always-permit"]["unattributed_wrong_trials"] == 0
    deny = wrong("always-deny")
    assert deny["approval-active"] == deny["exact-parameters"] == (0, 2)
    assert deny["revision-current"] == deny["missing-is-hold"] == (2, 2)
    assert configurations["always-deny"]["unattributed_wrong_trials"] == 4
    revoked = configurations["always-permit"]["rules"]["approval-active"]["wrong_cases"]
    assert revoked == ["dns_changes-04-revoked_approval"]
    assert configurations["empty"]["no_decision_trials"] == 12
    assert configurations["empty"]["wrong_trials"] == 0

    html = next(run_dir.glob("*.html")).read_text(encoding="utf-8")
    assert "Per-rule breakdown: wrong decisions by policy rule" in html
    assert "exact-parameters" in html
