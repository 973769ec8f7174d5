from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from trustbench.cli import app
from trustbench.errors import CheckFailed, InputError
from trustbench.trb.adapter import check_adapter, load_factory


@pytest.fixture(autouse=True)
def _importable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).parent))


def _failures(name: str) -> list:
    results = check_adapter(load_factory(f"trb_broken_adapters:{name}"), n_traces=3)
    return [r for r in results if not r.passed]


def test_governed_oracle_passes_every_conformance_check() -> None:
    assert _failures("governed") == []


def test_proxy_tier_adapter_passes_conformance() -> None:
    assert _failures("proxy_tier_is_accepted") == []


def test_unnormalised_distribution_is_rejected_naming_hook_step_and_sum() -> None:
    failure, *later = _failures("unnormalised")
    assert (failure.hook, failure.check) == ("act", "normalised distribution")
    assert [f.hook for f in later] == ["act"]  # the overridden distributions fail too
    assert "trace eval-00000 step 0" in failure.detail
    assert "got sum 2" in failure.detail


def test_silently_ignored_override_is_rejected() -> None:
    (failure,) = _failures("ignores_override")
    assert (failure.hook, failure.check) == ("act", "override applied")
    assert "never applied" in failure.detail


def test_out_of_range_slot_is_rejected_naming_the_slot_and_value() -> None:
    (failure,) = _failures("out_of_range_confidence")
    assert failure.hook == "emit_r"
    assert "slot 'confidence'" in failure.detail and "1.7" in failure.detail


def test_nondeterministic_adapter_is_rejected() -> None:
    failures = _failures("nondeterministic")
    assert [(f.hook, f.check) for f in failures] == [("seed", "deterministic under a seed")]
    assert "differs between two runs under seed 0" in failures[0].detail


def test_declared_unsupported_override_that_raises_passes() -> None:
    assert _failures("honest_no_override") == []


def test_declared_unsupported_override_that_is_silently_accepted_is_rejected() -> None:
    (failure,) = _failures("silent_no_override")
    assert "instead of raising OverrideUnsupported" in failure.detail


def test_unknown_tier_is_rejected() -> None:
    (failure,) = _failures("bad_tier")
    assert failure.hook == "attributes" and "white-box" in failure.detail


def test_failing_factory_is_reported_not_raised() -> None:
    (failure,) = _failures("raises")
    assert failure.hook == "factory" and "no weights found" in failure.detail


def test_hook_that_raises_is_reported_with_hook_and_step() -> None:
    (failure,) = _failures("crashes_late")
    assert failure.hook == "emit_r"
    assert "emit_r() at trace eval-00000 step 3 raised KeyError" in failure.detail


def test_bad_factory_spec_is_an_input_error() -> None:
    with pytest.raises(InputError, match="MODULE:FACTORY"):
        load_factory("trb_broken_adapters")
    with pytest.raises(InputError, match="no callable"):
        load_factory("trb_broken_adapters:nope")
    with pytest.raises(InputError, match="cannot import"):
        load_factory("no_such_module_xyz:factory")


def test_cli_check_adapter_fails_with_exit_1_and_a_precise_message() -> None:
    result = CliRunner().invoke(app, ["trb", "check-adapter", "trb_broken_adapters:unnormalised"])
    assert isinstance(result.exception, CheckFailed)
    assert result.exception.exit_code == 1
    assert "act / normalised distribution" in str(result.exception)


def test_cli_check_adapter_passes_a_conforming_adapter() -> None:
    result = CliRunner().invoke(app, ["trb", "check-adapter", "trb_broken_adapters:governed"])
    assert result.exit_code == 0, result.output
