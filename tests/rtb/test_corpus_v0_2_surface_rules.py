"""Cheap surface rules must not score well on corpus v0.2 (issue 14: validity by construction).

Each rule reads only the candidate-visible input, as a cheating reviewer would. The ceiling is
chance (the majority-class share of reference decisions) plus 15 points, the same bound the
shortcut audit uses. The record-order rule is fitted to the answer key (the best mapping from
the last record's kind to a decision), so it is an upper bound for any rule of that shape.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Callable
from datetime import datetime
from functools import cache
from typing import Any

import pytest

from trustbench.rtb.corpus import builtin_corpus_root, load_corpus
from trustbench.rtb.corpus._export import to_candidate_input

Visible = dict[str, Any]
CEILING_POINTS = 15


@cache
def _corpus_v0_2() -> Any:
    return load_corpus(builtin_corpus_root("0.2"))


@cache
def _visible() -> list[tuple[Visible, str]]:
    corpus = _corpus_v0_2()
    return [
        (
            to_candidate_input(case, "rtb-0").model_dump(mode="json"),
            case.expectations.reference_decision.value,
        )
        for case in corpus.cases
    ]


def _approvals(visible: Visible) -> list[dict[str, Any]]:
    return [r for r in visible["evidence"] if r["kind"] == "approval"]


def status_only(visible: Visible) -> str:
    """Revoked anywhere -> deny; a service notice -> hold; otherwise permit."""
    if any(a["status"] == "revoked" for a in _approvals(visible)):
        return "deny"
    if any(r["kind"] == "service_notice" for r in visible["evidence"]):
        return "hold"
    return "permit"


def any_parameter_differs(visible: Visible) -> str:
    """No approval -> hold; any approval's parameters differ from the proposal's -> deny."""
    approvals = _approvals(visible)
    if not approvals:
        return "hold"
    wanted = visible["proposal"]["parameters"]
    return "deny" if any(a["approved_parameters"] != wanted for a in approvals) else "permit"


def _revision_count(visible: Visible) -> int:
    return json.dumps(visible).count(visible["proposal"]["resource_revision"])


def revision_count(visible: Visible) -> str:
    """The proposal's revision string occurs fewer than 3 times -> hold; otherwise permit."""
    return "hold" if _revision_count(visible) < 3 else "permit"


def three_check_v01(visible: Visible) -> str:
    """The v0.1 3-check rule that scored 60/60 there: revision count, revoked, any difference."""
    if _revision_count(visible) < 3:
        return "hold"
    if status_only(visible) == "deny" or any_parameter_differs(visible) == "deny":
        return "deny"
    return "permit"


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def latest_record_wins(visible: Visible) -> str:
    """The newest approval record decides, whatever its operation or target."""
    approvals = _approvals(visible)
    if not approvals:
        return "hold"
    latest = max(approvals, key=lambda a: _instant(a["issued_at"]))
    if latest["status"] == "revoked":
        return "deny"
    if latest["expires_at"] and _instant(latest["expires_at"]) <= _instant(visible["as_of"]):
        return "deny"
    return "hold" if latest["status"] == "superseded" else "permit"


def _fitted_last_kind(data: list[tuple[Visible, str]]) -> Callable[[Visible], str]:
    votes: dict[str, Counter[str]] = defaultdict(Counter)
    for visible, label in data:
        votes[visible["evidence"][-1]["kind"]][label] += 1
    best = {kind: counts.most_common(1)[0][0] for kind, counts in votes.items()}
    return lambda visible: best[visible["evidence"][-1]["kind"]]


RULES: dict[str, Callable[[Visible], str]] = {
    "status_only": status_only,
    "any_parameter_differs": any_parameter_differs,
    "revision_count": revision_count,
    "three_check_v01": three_check_v01,
    "latest_record_wins": latest_record_wins,
}


def _accuracy(rule: Callable[[Visible], str], data: list[tuple[Visible, str]]) -> float:
    return sum(rule(visible) == label for visible, label in data) / len(data)


def _ceiling(data: list[tuple[Visible, str]]) -> float:
    majority = Counter(label for _, label in data).most_common(1)[0][1] / len(data)
    return majority + CEILING_POINTS / 100


@pytest.mark.parametrize("name", sorted(RULES))
def test_surface_rule_scores_below_chance_plus_15_points_on_v0_2(name: str) -> None:
    data = _visible()
    accuracy = _accuracy(RULES[name], data)
    assert accuracy < _ceiling(data), f"{name}: {accuracy:.3f} >= {_ceiling(data):.3f}"


def test_record_order_rule_fitted_to_the_answer_key_stays_below_the_ceiling() -> None:
    data = _visible()
    accuracy = _accuracy(_fitted_last_kind(data), data)
    assert accuracy < _ceiling(data), f"last record kind: {accuracy:.3f}"


def test_surface_rules_do_reach_the_v0_1_scores_they_were_built_from() -> None:
    """The rules are not broken: on v0.1 the 3-check rule scores 60/60, as the issue says."""
    corpus = load_corpus()
    data = [
        (
            {**to_candidate_input(case, "rtb-0").model_dump(mode="json"), "as_of": "2026-01-01"},
            case.expectations.reference_decision.value,
        )
        for case in corpus.cases
    ]
    assert _accuracy(three_check_v01, data) == 1.0


def _single_fields(visible: Visible) -> dict[str, str]:
    """Every candidate-visible field as one feature: per record kind and field, the sorted
    values over that kind's records; plus record counts, order and the proposal's size."""
    features: dict[str, list[str]] = defaultdict(list)
    for record in visible["evidence"]:
        for key, value in record.items():
            features[f"{record['kind']}.{key}"].append(json.dumps(value, sort_keys=True))
    flat = {name: "|".join(sorted(values)) for name, values in features.items()}
    kinds = Counter(r["kind"] for r in visible["evidence"])
    flat.update({f"count:{kind}": str(n) for kind, n in kinds.items()})
    flat["n_records"] = str(len(visible["evidence"]))
    flat["first_kind"] = visible["evidence"][0]["kind"]
    flat["last_kind"] = visible["evidence"][-1]["kind"]
    flat["n_parameters"] = str(len(visible["proposal"]["parameters"]))
    flat["parameter_keys"] = "|".join(sorted(visible["proposal"]["parameters"]))
    return flat


def test_no_single_visible_field_predicts_the_label_on_held_out_groups() -> None:
    """Leave-one-group-out: fit value -> majority label on 14 groups, predict the 15th."""
    corpus = _corpus_v0_2()
    rows = [
        (
            case.group,
            _single_fields(to_candidate_input(case, "rtb-0").model_dump(mode="json")),
            case.expectations.reference_decision.value,
        )
        for case in corpus.cases
    ]
    ceiling = _ceiling([(f, label) for _, f, label in rows])
    names = sorted({name for _, fields, _ in rows for name in fields})
    too_good = {}
    for name in names:
        correct = 0
        for held in sorted({group for group, _, _ in rows}):
            train = [(f.get(name), label) for g, f, label in rows if g != held]
            votes: dict[str | None, Counter[str]] = defaultdict(Counter)
            for value, label in train:
                votes[value][label] += 1
            fallback = Counter(label for _, label in train).most_common(1)[0][0]
            for group, fields, label in rows:
                if group == held:
                    seen = votes.get(fields.get(name))
                    correct += (seen.most_common(1)[0][0] if seen else fallback) == label
        if correct / len(rows) >= ceiling:
            too_good[name] = round(correct / len(rows), 3)
    assert too_good == {}
