"""The Cedar encoding and the reference reviewer of v0.2 can disagree, and do not.

"A way for the assessment to contradict the implementation": the Cedar encoding reads the policy
text on its own side (its own normalisation, its own entity building) and shares no helper with
the reference reviewer. A differential test runs both on every case of every v0.2-policy corpus,
on each case with its values re-encoded (case, trailing dots, digit strings, list order), and on
generated edge values; where they disagreed, the policy text decided (rule 7 says "a DNS name":
a version string such as `V14.1` is none, so it keeps its case on both sides now).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trustbench.rtb.corpus._load import builtin_corpus_root, load_corpus
from trustbench.rtb.corpus._normalise import equivalent
from trustbench.rtb.policy.narrow_v2._cedar import cedar_assess_v2, cedar_value
from trustbench.rtb.policy.narrow_v2._reviewer import assess_v2

PACKAGE = (
    Path(__file__).resolve().parents[2] / "src" / "trustbench" / "rtb" / "policy" / "narrow_v2"
)
FIXTURES = Path(__file__).resolve().parent / "fixtures"
V2_CORPORA = [builtin_corpus_root("v0.2"), FIXTURES / "rtb_v0_2_user"]


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_the_cedar_side_shares_no_normalisation_or_decision_helper_with_the_reviewer() -> None:
    cedar_side = ["_cedar.py"]  # the Cedar encoding, its entities and values: one module
    reviewer_side = {
        "trustbench.rtb.corpus._normalise",
        "trustbench.rtb.policy.narrow_v2._reviewer",
        "trustbench.rtb.policy.narrow_v2._control",
        "trustbench.rtb.policy._records",
    }
    for name in cedar_side:
        shared = _imports(PACKAGE / name) & reviewer_side
        assert shared == set(), f"{name} imports {shared}"


def test_the_v0_1_cedar_boundary_shares_no_helper_with_the_reference_boundary() -> None:
    v1 = PACKAGE.parent / "narrow_v1" / "_cedar.py"
    shared = _imports(v1) & {
        "trustbench.rtb.policy.narrow_v1._control",
        "trustbench.rtb.policy.narrow_v1._reviewer",
        "trustbench.rtb.corpus._normalise",
    }
    assert shared == set()
    assert "canonical_parameters" not in v1.read_text(encoding="utf-8")


# --- generated edge values ---------------------------------------------------------------

_label = st.text(alphabet="abcXYZ019-_", min_size=1, max_size=6)
_dotted = st.lists(_label, min_size=2, max_size=4).map(".".join)
_scalar = st.one_of(
    _dotted,
    _dotted.map(lambda s: s + "."),
    st.sampled_from(["V14.1", "v14.1", "Release_2.0", "release_2.0", "model.PKL", "model.pkl"]),
    st.sampled_from(["Api.Example.com.", "api.example.com", "10.0.0.1", "1.2.3", "a.b-"]),
    st.integers(-1000, 1000),
    st.integers(-1000, 1000).map(str),
    st.integers(0, 99).map(lambda i: f" +{i} "),
    st.booleans(),
    st.none(),
    st.text(alphabet="aA .-_1", max_size=6),
)
_value = st.one_of(_scalar, st.lists(_scalar, max_size=4))


def _variants(value: Any) -> list[Any]:
    """Re-encodings a reviewer may meet: case, trailing dot, padding, order, duplicates."""
    out: list[Any] = [value]
    if isinstance(value, str):
        out += [value.upper(), value.lower(), value + ".", f" {value} ", value.rstrip(".")]
    if isinstance(value, int) and not isinstance(value, bool):
        out += [str(value), f"+{value}" if value >= 0 else str(value)]
    if isinstance(value, list):
        out += [list(reversed(value)), value + value[:1], sorted(value, key=repr)]
    return out


@settings(max_examples=400, deadline=None)
@given(_value, _value)
def test_both_readings_of_rule_7_agree_on_any_two_values(left: Any, right: Any) -> None:
    assert equivalent(left, right) == (cedar_value(left) == cedar_value(right))


@settings(max_examples=300, deadline=None)
@given(_value)
def test_both_readings_agree_on_every_re_encoding_of_a_value(value: Any) -> None:
    for variant in _variants(value):
        assert equivalent(value, variant) == (cedar_value(value) == cedar_value(variant)), variant


def test_a_version_string_is_no_dns_name_on_either_side() -> None:
    for left, right in (("V14.1", "v14.1"), ("Release_2.0", "release_2.0")):
        assert not equivalent(left, right)
        assert cedar_value(left) != cedar_value(right)
    assert equivalent("Api.Example.com.", "api.example.com")
    assert cedar_value("Api.Example.com.") == cedar_value("api.example.com")


# --- every case of every corpus, as authored and re-encoded ------------------------------


def _cases() -> list[Any]:
    return [case for root in V2_CORPORA for case in load_corpus(root).cases]


def _inputs(case: Any) -> list[tuple[str, Any]]:
    from trustbench.rtb.corpus._export import to_candidate_input

    base = to_candidate_input(case, "eval-diff")
    out = [("as authored", base)]
    proposal = base.proposal
    recoders: dict[str, Callable[[Any], Any]] = {
        "upper": lambda v: v.upper() if isinstance(v, str) else v,
        "trailing dot": lambda v: v + "." if isinstance(v, str) else v,
        "digit strings": lambda v: str(v) if isinstance(v, int) and not isinstance(v, bool) else v,
        "list order and duplicates": lambda v: (
            list(reversed(v)) + v[:1] if isinstance(v, list) and v else v
        ),
    }
    for name, recode in recoders.items():
        parameters = {k: recode(v) for k, v in proposal.parameters.items()}
        changed = proposal.model_copy(
            update={"parameters": parameters, "target": recode(proposal.target)}
        )
        out.append((name, base.model_copy(update={"proposal": changed})))
    return out


def test_reviewer_and_cedar_agree_on_every_case_of_every_v0_2_corpus_and_its_re_encodings() -> None:
    disagreements = []
    checked = 0
    for case in _cases():
        for name, visible in _inputs(case):
            checked += 1
            reference = assess_v2(visible).decision
            cedar = cedar_assess_v2(visible)
            if reference != cedar.decision:
                disagreements.append((case.case_id, name, reference.value, cedar.decision.value))
    assert checked > 900
    assert disagreements == [], disagreements[:10]


@pytest.mark.parametrize("root", V2_CORPORA, ids=lambda p: p.name)
def test_both_encodings_reach_every_authored_reference_decision(root: Path) -> None:
    for case in load_corpus(root).cases:
        from trustbench.rtb.corpus._export import to_candidate_input

        visible = to_candidate_input(case, "eval-diff")
        expected = case.expectations.reference_decision
        assert assess_v2(visible).decision == expected, case.case_id
        assert cedar_assess_v2(visible).decision == expected, case.case_id
