"""Freeze refuses names that mean nothing (issue 15): each one-line error names the spec file
and field (`spec.toml#/gates/0/metric`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.rtb.test_review_track import POLICY, inprocess, small_corpus, spec_text
from tests.support.cli import invoke

from trustbench.core import build_manifest
from trustbench.errors import InputError

KEYED = (
    '[[candidates]]\nname = "hosted"\nkind = "openai_chat"\nmodel = "m"\n'
    'base_url = "http://127.0.0.1:9/v1"\napi_key_env = "TB_TEST_UNSET_KEY_15A"\n'
)


def gate(metric: str, candidates: str = "") -> str:
    """One estimate gate on `metric`, optionally restricted to candidates."""
    scope = f"candidates = [{candidates}]\n" if candidates else ""
    return f'[[gates]]\nmetric = "{metric}"\ncomparison = "<="\nthreshold = 0.1\n{scope}'


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding the small fixture corpus at `corpus/`."""
    root = tmp_path_factory.mktemp("freeze-checks")
    small_corpus(root / "corpus")
    return root


def freeze_error(folder: Path, text: str) -> InputError:
    """Freeze `text` in `folder`; return the InputError it must raise."""
    spec = folder / "spec.toml"
    spec.write_text(text)
    with pytest.raises(InputError) as caught:
        build_manifest(spec)
    return caught.value


def test_misspelled_gate_metric_is_refused_at_freeze_naming_the_gate(corpus_dir: Path) -> None:
    error = freeze_error(corpus_dir, spec_text(POLICY, gates=gate("false_aproval_rate")))
    assert error.location == f"{corpus_dir / 'spec.toml'}#/gates/0/metric"
    assert "false_aproval_rate" in str(error) and "false_approval_rate" in str(error)


def test_gate_naming_an_unknown_candidate_is_refused_at_freeze(corpus_dir: Path) -> None:
    text = spec_text(POLICY, gates=gate("false_approval_rate", '"reference-polcy"'))
    error = freeze_error(corpus_dir, text)
    assert error.location == f"{corpus_dir / 'spec.toml'}#/gates/0/candidates"
    assert "reference-polcy" in str(error)


def test_gate_may_name_a_declared_chain(corpus_dir: Path) -> None:
    text = spec_text(
        POLICY + inprocess("deny", "always-deny"),
        chains='{ name = "both", members = ["reference-policy", "deny"] }',
        gates=gate("false_approval_rate", '"both"') + gate("valid_response_rate"),
    )
    (corpus_dir / "ok.toml").write_text(text)
    assert build_manifest(corpus_dir / "ok.toml").plan.trials == 24


def test_unknown_builtin_reviewer_name_is_refused_at_freeze(corpus_dir: Path) -> None:
    error = freeze_error(corpus_dir, spec_text(POLICY + inprocess("x", "always-permt")))
    assert error.location == f"{corpus_dir / 'spec.toml'}#/candidates/1/settings/reviewer"
    assert "always-permt" in str(error)


def test_unset_api_key_variable_is_refused_at_freeze_unless_allowed(
    corpus_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TB_TEST_UNSET_KEY_15A", raising=False)
    error = freeze_error(corpus_dir, spec_text(POLICY + KEYED))
    assert error.location == f"{corpus_dir / 'spec.toml'}#/candidates/1/api_key_env"
    assert "TB_TEST_UNSET_KEY_15A" in str(error) and "--allow-missing-keys" in str(error)
    code, output = invoke(
        "freeze",
        str(corpus_dir / "spec.toml"),
        "--out",
        str(corpus_dir / "run"),
        "--allow-missing-keys",
    )
    assert code == 0, output
