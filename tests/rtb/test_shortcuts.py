"""Shortcut audit: surface rules on candidate-visible input, corpus saturation and its ceiling."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_reviewers_fixtures import export, make_cases
from tests.support.child_env import child_env
from typer.testing import CliRunner

import trustbench.rtb.corpus as corpus_package
from trustbench.cli import app
from trustbench.rtb._harness_audit import run_corpus_saturation
from trustbench.rtb.corpus import load_corpus
from trustbench.rtb.corpus._models import Case
from trustbench.rtb.review import _shortcuts
from trustbench.rtb.review._shortcuts import DecisionTree, shortcut_audit, structure_features

V0_1 = Path(corpus_package.__file__).parent / "v0.1"
"""The frozen v0.1 starter, named explicitly: these tests are about v0.1, whatever the default."""


@pytest.fixture(scope="module")
def builtin_saturation() -> _shortcuts.SaturationReport:
    return run_corpus_saturation(load_corpus(V0_1))


def _rule(report: _shortcuts.SaturationReport, name: str) -> _shortcuts.ShortcutRule:
    return next(r for r in report.rules if r.rule == name)


def test_three_check_rule_scores_60_of_60_and_status_alone_40_on_v0_1(builtin_saturation) -> None:
    assert (_rule(builtin_saturation, "revision-count").correct, builtin_saturation.cases) == (
        60,
        60,
    )
    assert _rule(builtin_saturation, "status-only").correct == 40


def test_builtin_v0_1_is_reported_saturated_against_chance_plus_15_points(
    builtin_saturation,
) -> None:
    assert builtin_saturation.chance == pytest.approx(1 / 3)
    assert builtin_saturation.ceiling == pytest.approx(1 / 3 + 0.15)
    assert not builtin_saturation.ok
    assert {"revision-count", "surface-tree"} <= set(builtin_saturation.saturated_rules)


def test_rtb_audit_exit_code_follows_saturation_when_the_harness_holds(monkeypatch) -> None:
    # The harness audit itself is covered in test_harness_audit_cli.py; here it is stubbed so
    # only the saturation verdict decides the exit code.
    from trustbench.rtb import _harness_audit

    passing = [_harness_audit.AuditRow("reviewer", "stub", True, "stub")]
    monkeypatch.setattr(_harness_audit, "run_harness_audit", lambda corpus, seed: passing)
    # The learning audit has its own tests (test_learning_audit.py); a passing stub here.
    from trustbench.rtb.review import _learning_audit
    from trustbench.rtb.review._learning_audit import ArtifactReport, AttackerScore, LearnedReport

    stub = _learning_audit.LearningAudit(
        LearnedReport(
            cases=1,
            groups=2,
            chance=0.5,
            seed=0,
            attackers=[
                AttackerScore(
                    attacker="stub",
                    description="stub",
                    correct=0,
                    cases=1,
                    detail="",
                    failed_gates=("stub",),
                )
            ],
        ),
        ArtifactReport(cases=1, threshold_bits=1.0, alpha=0.01, permutations=1, seed=0, classes=[]),
    )
    monkeypatch.setattr(_learning_audit, "run_learning_audit", lambda corpus, deciding, seed: stub)
    # The rule ablation has its own tests (test_rule_ablation.py): an empty-but-passing stub is
    # not possible (no rules is "not run"), so the stub declares one load-bearing rule.
    from trustbench.rtb.policy._protocol import PolicyRule
    from trustbench.rtb.review import _audit as _ablation

    rule = _ablation.RuleAblation(
        rule=PolicyRule(rule_id="stub", clause="stub", statement="stub", ablation="stub"),
        flipped=("case",),
        failed_gates=("stub",),
    )
    ablation = _ablation.AblationReport("stub", "stub.toml", ("stub",), (), (rule,))
    monkeypatch.setattr(_ablation, "run_ablation_audit", lambda corpus: ablation)
    saturated = CliRunner().invoke(app, ["rtb", "audit", "--corpus", str(V0_1)])
    assert saturated.exit_code == 1, saturated.output
    assert "corpus saturated:" in saturated.output
    assert "revision-count 100.0%" in saturated.output
    admitted = CliRunner().invoke(
        app, ["rtb", "audit", "--corpus", str(V0_1), "--saturation-margin", "1"]
    )
    assert admitted.exit_code == 0, admitted.output
    assert "corpus not saturated" in admitted.output


def _signal_free(cases: list[Case]) -> list[dict[str, Any]]:
    # Every input identical: no surface rule can tell the cases apart.
    document = export(cases[0]).model_dump(mode="json")
    return [document for _ in cases]


def test_a_corpus_whose_inputs_carry_no_signal_is_not_saturated() -> None:
    cases = make_cases()  # 3 groups, each with 2 permit, 2 deny, 2 hold references
    report = shortcut_audit(cases, _signal_free(cases))
    assert report.ok, [(r.rule, r.accuracy) for r in report.rules]
    assert all(r.accuracy is not None and r.accuracy <= 0.5 for r in report.rules)


def test_a_rule_that_cannot_be_cross_fitted_is_not_run_and_fails_the_audit() -> None:
    one_group = [c for c in make_cases() if c.group == "backup_retention"]
    report = shortcut_audit(one_group, _signal_free(one_group))
    tree = _rule(report, "surface-tree")
    assert tree.accuracy is None and "not run" in tree.detail
    assert not report.ok


def test_fitted_rules_never_train_and_score_on_the_same_group(monkeypatch) -> None:
    seen: list[tuple[set[str], set[str]]] = []
    cases = make_cases()
    documents = [export(c).model_dump(mode="json") for c in cases]
    group_of = {id(d): c.group for c, d in zip(cases, documents, strict=True)}

    class _Spy:
        def fit(self, surfaces: list[_shortcuts.Surface], labels: list[str]) -> _Spy:
            self.train = {group_of[id(s.document)] for s in surfaces}
            seen.append((self.train, set()))
            return self

        def predict(self, surface: _shortcuts.Surface) -> str:
            seen[-1][1].add(group_of[id(surface.document)])
            return "permit"

    monkeypatch.setattr(_shortcuts, "FITTED_RULES", {"spy": ("spy", _Spy)})
    shortcut_audit(cases, documents)
    assert len(seen) == 2
    assert all(train and scored and not train & scored for train, scored in seen)


def test_the_audit_computes_each_inputs_words_and_parameter_differences_once(
    monkeypatch,
) -> None:
    # Five fixed rules and two trees (each fitted and scored on both halves) read them.
    cases = make_cases()
    documents = [export(c).model_dump(mode="json") for c in cases]
    calls = {"word_features": 0, "parameter_differences": 0}
    for name in calls:
        original = getattr(_shortcuts, name)

        def counted(document: dict[str, Any], _original=original, _name=name) -> Any:
            calls[_name] += 1
            return _original(document)

        monkeypatch.setattr(_shortcuts, name, counted)
    report = shortcut_audit(cases, documents)
    assert all(r.accuracy is not None for r in report.rules)
    assert calls == {"word_features": len(cases), "parameter_differences": len(cases)}


def test_surface_features_read_any_json_input_generically() -> None:
    document = {
        "evaluation_id": "eval-should-be-ignored",
        "proposal": {"parameters": {"port": "22"}, "resource_revision": "r-1"},
        "evidence": [
            {"kind": "grant", "status": "suspended", "allowed": {"port": 22}, "rev": "r-1"},
            {"kind": "policy", "text": "r-1 applies"},
        ],
    }
    features = structure_features(document)
    assert features["kind:grant&status:suspended"] == 1
    assert features["last:policy"] == 1
    assert features["any_parameter_differs"] == 0  # "22" == 22 under the policy normalisation
    assert features["revision_occurrences"] == 3


def test_decision_tree_learns_a_threshold_and_generalises_to_unseen_rows() -> None:
    rows = [{"count": float(n), "noise": float(n % 2)} for n in range(10)]
    labels = ["hold" if n < 3 else "permit" for n in range(10)]
    tree = DecisionTree(max_depth=2).fit(rows, labels)
    assert tree.predict({"count": 1.5}) == "hold"
    assert tree.predict({"count": 7.0, "noise": 1.0}) == "permit"
    assert tree.rules()[0].startswith("count<=2.5")


def test_fitted_rules_keep_the_scores_of_the_former_numpy_trees_on_v0_1(builtin_saturation) -> None:
    # The trees' cuts are computed in plain Python since issue 55; their splits, thresholds and
    # so every fitted score are those of the numpy implementation (compared on v0.1 to v0.4).
    assert [(r.rule, r.detail) for r in builtin_saturation.rules if r.fitted] == [
        ("record-order", "halves (fit on the other): 15/30, 15/30"),
        ("keyword", "halves (fit on the other): 18/30, 20/30"),
        ("surface-tree", "halves (fit on the other): 25/30, 25/30"),
    ]


def test_decision_tree_breaks_equal_impurities_by_fewest_rows_left_then_first_feature() -> None:
    labels = ["deny", "deny", "permit", "permit"]
    # Cutting after one row ("b") or after three ("a") leaves the same impurity, 1/3: the cut
    # with fewer rows on its left wins, as numpy's argmin over (cut, feature) chose.
    by_position = [{"a": float(n == 3), "b": float(n > 0)} for n in range(4)]
    assert DecisionTree(max_depth=1, min_leaf=1).fit(by_position, labels).rules() == [
        "b<=0.5 -> deny",
        "b>0.5 -> permit",
    ]
    # Two features with the same cut: the first by name.
    by_name = [{"b": float(n > 1), "a": float(n > 1)} for n in range(4)]
    assert DecisionTree(max_depth=1, min_leaf=1).fit(by_name, labels).rules()[0] == (
        "a<=0.5 -> deny"
    )


def test_the_shortcut_audit_runs_without_numpy(tmp_path: Path) -> None:
    # A reviewer report audits its corpus; the audit's trees need no numpy (issue 55).
    probe = (
        "import sys\n"
        "from trustbench.rtb.corpus import load_corpus\n"
        "from trustbench.rtb.review._shortcuts import corpus_saturation\n"
        f"report = corpus_saturation(load_corpus({str(V0_1)!r}))\n"
        "print(report.saturated_rules, 'numpy' in sys.modules)\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        env=child_env(tmp_path),
    )
    assert completed.stdout.split()[-1] == "False", completed.stdout
