"""Per-rule breakdown of the reviewer report: which policy rules each configuration gets wrong.

A case is attributed to the rules that decide it: the rules of the corpus's policy object whose
ablated reference reader (the reader `rtb audit` runs, `_ablation.py`) reaches another outcome
than the case's label. A wrong decision (a valid decision other than the reference) on that case
counts against each of its rules; one case may count against several. A wrong decision on a case
no rule decides is counted apart, and so are missing and invalid replies (no decision to
attribute; they stay in their own figures). A configuration whose figures are withheld (not
evaluable) has its breakdown withheld too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from trustbench.core.report import TableBlock
from trustbench.rtb.corpus._load import Corpus
from trustbench.rtb.policy._registry import policy_for
from trustbench.rtb.review._ablation import cases_deciding, declared_rules
from trustbench.rtb.review._grading import ConfigurationRow, ConfigurationTrials, case_ids
from trustbench.rtb.review._rows import ReviewTrialRow

ATTRIBUTION = (
    "a case counts for each policy rule whose ablated reference reader (the reference reviewer "
    "without that rule, as trustbench rtb audit runs it) reaches another outcome than the case's "
    "label; a wrong decision is a valid decision other than the reference decision"
)


def _decided(rows: Iterable[ConfigurationRow]) -> Iterable[ReviewTrialRow]:
    """Each trial's decision row; a configuration's from its first pass (no member re-read)."""
    if isinstance(rows, ConfigurationTrials):
        return rows.decisions()
    return (item.row for item in rows)


def _configuration(
    rows: Iterable[ReviewTrialRow], deciding: Mapping[str, tuple[str, ...]], rule_ids: list[str]
) -> dict[str, Any]:
    per_rule: dict[str, dict[str, Any]] = {
        r: {"wrong_trials": 0, "trials": 0, "wrong_cases": []} for r in rule_ids
    }
    wrong = unattributed = no_decision = 0
    for row in rows:
        rules = deciding.get(row.case_id, ())
        for rule_id in rules:
            per_rule[rule_id]["trials"] += 1
        if not row.observed.is_decision:
            no_decision += 1
            continue
        if row.observed == row.reference:
            continue
        wrong += 1
        unattributed += not rules
        for rule_id in rules:
            per_rule[rule_id]["wrong_trials"] += 1
            if row.case_id not in per_rule[rule_id]["wrong_cases"]:
                per_rule[rule_id]["wrong_cases"].append(row.case_id)
    return {
        "wrong_trials": wrong,
        "unattributed_wrong_trials": unattributed,
        "no_decision_trials": no_decision,
        "rules": per_rule,
    }


def rule_breakdown(
    corpus: Corpus,
    all_rows: Mapping[str, Iterable[ConfigurationRow]],
    withheld: Mapping[str, str],
    *,
    skip: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """The breakdown as `record.json` stores it (`review.rule_breakdown`; empty without rules).

    Args:
        corpus: The run's corpus (its policy object declares the rules).
        all_rows: Every configuration's graded trials.
        withheld: Configuration -> why its figures are withheld (not evaluable).
        skip: Configurations not broken down (the unchecked baseline decides nothing).
    """
    rules = declared_rules(policy_for(corpus.policy_id))
    if not rules:
        return {}  # nothing to attribute to: the report leaves the table out
    deciding = cases_deciding(corpus)
    run_cases = set[str]().union(*(case_ids(rows) for rows in all_rows.values()))
    rule_ids = [rule.rule_id for rule in rules]
    return {
        "attribution": ATTRIBUTION,
        "rules": [
            {
                "rule_id": rule.rule_id,
                "clause": rule.clause,
                "statement": rule.statement,
                "cases": sum(rule.rule_id in deciding.get(c, ()) for c in run_cases),
            }
            for rule in rules
        ],
        "cases_no_rule_decides": sum(c not in deciding for c in run_cases),
        "configurations": {
            name: (
                {"withheld": withheld[name]}
                if name in withheld
                else _configuration(_decided(rows), deciding, rule_ids)
            )
            for name, rows in all_rows.items()
            if name not in skip
        },
    }


def _cell(record: dict[str, Any], rule_id: str | None, field: str = "") -> str:
    if "withheld" in record:
        return "withheld"
    if rule_id is None:
        return str(record[field])
    counts = record["rules"][rule_id]
    return f"{counts['wrong_trials']} / {counts['trials']}"


def rule_breakdown_block(breakdown: dict[str, Any]) -> TableBlock:
    """Rows: the policy's rules; columns: each configuration's wrong trials over its trials."""
    configurations = breakdown["configurations"]
    names = list(configurations)
    rows = [
        [r["rule_id"], r["clause"], str(r["cases"])]
        + [_cell(configurations[n], r["rule_id"]) for n in names]
        for r in breakdown["rules"]
    ]
    rows.append(
        ["wrong on a case no rule decides", "", str(breakdown["cases_no_rule_decides"])]
        + [_cell(configurations[n], None, "unattributed_wrong_trials") for n in names]
    )
    rows.append(
        ["no decision (missing or invalid reply)", "", ""]
        + [_cell(configurations[n], None, "no_decision_trials") for n in names]
    )
    return TableBlock(
        folded=len(rows) > 12,  # a long policy (29 rules, say) would push the verdicts away
        title="Per-rule breakdown: wrong decisions by policy rule",
        columns=["policy rule", "clause", "cases it decides", *names],
        rows=rows,
        note="Cells: wrong decisions / trials on the cases the rule decides. Attribution: "
        f"{ATTRIBUTION}. A case may count for several rules. Wrong cases per rule are in "
        "record.json (review.rule_breakdown).",
    )


__all__ = ["ATTRIBUTION", "rule_breakdown", "rule_breakdown_block"]
