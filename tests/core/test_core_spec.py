from __future__ import annotations

from pathlib import Path

import pytest
from tests.support.cli import invoke

from trustbench.core import load_spec
from trustbench.errors import InputError

EXAMPLES = sorted((Path(__file__).parents[2] / "examples").glob("*.toml"))
MINIMAL = """
suite = "test"
track = "echo"
[corpus]
path = "corpus"
[[candidates]]
name = "a"
kind = "inprocess"
"""


def _spec(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.toml"
    path.write_text(text)
    return path


def test_minimal_spec_makes_every_default_explicit(tmp_path: Path) -> None:
    spec = load_spec(_spec(tmp_path, MINIMAL))
    assert spec.trials_per_case == 1
    assert spec.retry.candidate_resample == 0
    assert "client_error" not in spec.retry.retry_on


def test_unknown_spec_field_is_an_error_naming_the_field(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"#/trials_per_cse"):
        load_spec(_spec(tmp_path, "trials_per_cse = 3\n" + MINIMAL))


def test_typo_inside_a_table_names_the_nested_field(tmp_path: Path) -> None:
    text = MINIMAL + "[retry]\ntransport_max_retires = 2\n"
    with pytest.raises(InputError, match=r"#/retry/transport_max_retires"):
        load_spec(_spec(tmp_path, text))


def test_candidate_settings_that_look_like_credentials_are_rejected(tmp_path: Path) -> None:
    text = MINIMAL + 'settings = { api_key = "sk-123" }\n'
    with pytest.raises(InputError, match="api_key_env"):
        load_spec(_spec(tmp_path, text))


def test_base_url_with_credentials_is_rejected(tmp_path: Path) -> None:
    text = MINIMAL.replace(
        'kind = "inprocess"',
        'kind = "openai_chat"\nmodel = "m"\nbase_url = "http://user:pw@127.0.0.1:1/v1"',
    )
    with pytest.raises(InputError, match="credentials"):
        load_spec(_spec(tmp_path, text))


def test_client_error_can_never_be_declared_retryable(tmp_path: Path) -> None:
    text = MINIMAL + '[retry]\nretry_on = ["client_error"]\n'
    with pytest.raises(InputError, match="never retried"):
        load_spec(_spec(tmp_path, text))


def test_corpus_needs_exactly_one_of_builtin_or_path(tmp_path: Path) -> None:
    text = MINIMAL.replace('path = "corpus"', 'path = "corpus"\nbuiltin = "v0.1"')
    with pytest.raises(InputError, match="exactly one"):
        load_spec(_spec(tmp_path, text))


def test_api_candidate_needs_model_and_base_url(tmp_path: Path) -> None:
    text = MINIMAL.replace('kind = "inprocess"', 'kind = "openai_chat"')
    with pytest.raises(InputError, match="needs model and base_url"):
        load_spec(_spec(tmp_path, text))


def test_an_inprocess_candidate_may_declare_the_one_variable_its_worker_receives(
    tmp_path: Path,
) -> None:
    spec = load_spec(_spec(tmp_path, MINIMAL + 'api_key_env = "MY_OWN_KEY"\n'))
    assert spec.candidates[0].api_key_env == "MY_OWN_KEY"
    with pytest.raises(InputError, match="takes no base_url"):
        load_spec(_spec(tmp_path, MINIMAL + 'base_url = "http://127.0.0.1:1/v1"\n'))


def test_an_inprocess_candidate_may_not_declare_a_harness_variable(tmp_path: Path) -> None:
    text = MINIMAL + 'api_key_env = "TRUSTBENCH_HELDOUT_KEY"\n'
    with pytest.raises(InputError, match=r"candidates/0.*TRUSTBENCH_\* variable"):
        load_spec(_spec(tmp_path, text))


def test_non_toml_spec_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not valid TOML"):
        load_spec(_spec(tmp_path, "suite = "))


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_every_shipped_example_spec_is_valid(example: Path) -> None:
    spec = load_spec(example)
    assert spec.candidates


@pytest.mark.parametrize("port", ["99999", "abc", "-1", "0"])
def test_a_base_url_port_out_of_range_is_refused_at_freeze_in_one_line(
    tmp_path: Path, port: str
) -> None:
    api = f'kind = "openai_chat"\nmodel = "m"\nbase_url = "http://127.0.0.1:{port}/v1"\n'
    spec = _spec(tmp_path, MINIMAL.replace('kind = "inprocess"\n', api))
    code, message = invoke("freeze", str(spec), "--out", str(tmp_path / "run"))
    assert code == 2 and len(message.strip().splitlines()) == 1, message
    assert "candidates/0/base_url" in message and "port must be a number from 1 to 65535" in message
