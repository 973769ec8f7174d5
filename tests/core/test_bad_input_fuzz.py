"""Bad input classes of issue 30, fuzzed: each is one line naming the field, exit 2.

Classes: non-finite floats, integers beyond what the manifest holds, a base_url with whitespace
or control characters, bootstrap_resamples beyond the declared maximum, and keys where names
belong (a key-shaped `api_key_env`, `settings.key`, a key in a URL path). Plus the echo: a
server reporting the key as its model id never gets it into the ledger.
"""

from __future__ import annotations

import copy
import math
import string
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.support.cli import ALPHA_KEY, invoke
from tests.support.echo_track import two_candidate_spec, write_corpus
from tests.support.openai_server import OpenAIServer, reply

from trustbench.core import build_manifest, read_ledger, run_experiment, write_manifest
from trustbench.core.spec._spec import MAX_BOOTSTRAP_RESAMPLES, parse_spec
from trustbench.errors import InputError

FUZZ = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
BASE: dict[str, Any] = {
    "suite": "test",
    "track": "echo",
    "corpus": {"path": "corpus"},
    "candidates": [
        {
            "name": "a",
            "kind": "openai_chat",
            "model": "m",
            "base_url": "http://127.0.0.1:1/v1",
            "api_key_env": "TB_TEST_ALPHA_KEY",
            "settings": {"temperature": 0.0},
        }
    ],
    "track_options": {},
}
FLOAT_FIELDS = [
    ("timeout_s",),
    ("trial_timeout_s",),
    ("analysis", "confidence"),
    ("analysis", "min_valid_response_rate"),
    ("retry", "backoff_base_s"),
    ("candidates", 0, "rate_limit_per_s"),
    ("candidates", 0, "settings", "temperature"),
    ("track_options", "weight"),
]
INT_FIELDS = [
    ("order_seed",),
    ("analysis", "bootstrap_seed"),
    ("candidates", 0, "settings", "seed"),
]


def _with(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    node: Any = data
    for part in path[:-1]:
        node = node.setdefault(part, {}) if isinstance(part, str) else node[part]
    node[path[-1]] = value
    return data


def _refused(data: dict[str, Any]) -> InputError:
    with pytest.raises(InputError) as error:
        parse_spec(data, source="exp.toml")
    assert "\n" not in str(error.value)
    return error.value


def _pointer(path: tuple[Any, ...]) -> str:
    return "exp.toml#/" + "/".join(str(p) for p in path)


@FUZZ
@given(
    path=st.sampled_from(FLOAT_FIELDS),
    value=st.sampled_from([math.inf, -math.inf, math.nan]),
)
def test_a_non_finite_float_anywhere_is_refused_naming_its_field(
    path: tuple[Any, ...], value: float
) -> None:
    error = _refused(_with(path, value))
    assert error.location == _pointer(path) and "not a finite number" in error.message


@FUZZ
@given(path=st.sampled_from(INT_FIELDS), value=st.integers(min_value=2**53))
def test_an_integer_beyond_2_53_is_refused_naming_its_field(
    path: tuple[Any, ...], value: int
) -> None:
    for signed in (value, -value):
        error = _refused(_with(path, signed))
        assert error.location == _pointer(path) and "out of range" in error.message


@FUZZ
@given(
    position=st.integers(min_value=0, max_value=len("http://127.0.0.1:1/v1")),
    bad=st.sampled_from([" ", "\r", "\n", "\r\n", "\t", "\x00", "\x7f", "\x0b"]),
)
def test_whitespace_or_control_characters_in_base_url_are_refused(position: int, bad: str) -> None:
    url = "http://127.0.0.1:1/v1"
    error = _refused(_with(("candidates", 0, "base_url"), url[:position] + bad + url[position:]))
    assert error.location == "exp.toml#/candidates/0/base_url"


@FUZZ
@given(value=st.integers(min_value=MAX_BOOTSTRAP_RESAMPLES + 1, max_value=2**53 - 1))
def test_bootstrap_resamples_beyond_the_declared_maximum_are_refused(value: int) -> None:
    error = _refused(_with(("analysis", "bootstrap_resamples"), value))
    assert error.location == "exp.toml#/analysis/bootstrap_resamples"
    assert _refused(_with(("analysis", "bootstrap_resamples"), 1e9)).location == error.location


keys = st.builds(
    lambda prefix, body: prefix + body,
    st.sampled_from(["sk_live_", "sk_test_", "ghp_", "AKIA", "xoxb-", ""]),
    st.text(string.ascii_letters + string.digits, min_size=24, max_size=48).filter(
        lambda s: (
            any(c.isdigit() for c in s)
            and any(c.islower() for c in s)
            and any(c.isupper() for c in s)
        )
    ),
)


@FUZZ
@given(key=keys)
def test_a_key_pasted_where_a_name_belongs_is_refused_without_repeating_it(key: str) -> None:
    named = {"api_key_env": key.replace("-", "_")}
    for where, data in (
        ("api_key_env", _with(("candidates", 0, "api_key_env"), named["api_key_env"])),
        ("base_url", _with(("candidates", 0, "base_url"), f"http://127.0.0.1:1/bot{key}/v1")),
        ("settings", _with(("candidates", 0, "settings"), {"key": key})),
    ):
        error = _refused(data)
        assert where in str(error) and key not in str(error), (where, str(error))


@pytest.mark.parametrize(
    "name", ["OPENAI_API_KEY", "TB_TEST_ALPHA_KEY", "hf_token", "AZURE_OPENAI_KEY_2024"]
)
def test_ordinary_variable_names_and_url_paths_pass(name: str) -> None:
    data = _with(("candidates", 0, "api_key_env"), name)
    data["candidates"][0]["base_url"] = "https://x.example/openai/deployments/gpt-4o-2024-08-06"
    parse_spec(data, source="exp.toml")


def test_a_spec_with_inf_fails_freeze_with_one_line_and_exit_2(tmp_path: Path) -> None:
    write_corpus(tmp_path / "corpus", 1)
    spec = tmp_path / "exp.toml"
    spec.write_text(two_candidate_spec("http://127.0.0.1:1/v1").replace("2.0", "inf", 1))
    code, message = invoke("freeze", str(spec), "--out", str(tmp_path / "run"))
    assert code == 2 and message.endswith("#/timeout_s: inf is not a finite number")


def test_a_model_id_echoing_the_api_key_is_stored_redacted(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    openai_server.on("case-000", reply("ok", model=f"gpt-{ALPHA_KEY}"))
    write_corpus(tmp_path / "corpus", 1)
    spec = tmp_path / "exp.toml"
    spec.write_text(two_candidate_spec(openai_server.base_url, trials=1))
    run_dir = tmp_path / "run"
    write_manifest(build_manifest(spec), run_dir)
    run_experiment(run_dir)
    models = [a["reported_model"] for a in read_ledger(run_dir).attempts]
    assert "gpt-[REDACTED]" in models
    for path in run_dir.iterdir():
        assert ALPHA_KEY.encode() not in path.read_bytes(), path.name
