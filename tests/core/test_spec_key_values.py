"""Key-shaped values are refused at freeze wherever a spec would carry them into the manifest."""

from __future__ import annotations

from typing import Any

import pytest

from trustbench.core.spec._spec import parse_spec
from trustbench.errors import InputError

OPENAI = "sk-proj-A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
_URL = "http://127.0.0.1:1/v1"


def _spec(candidate: dict[str, Any], **top: Any) -> dict[str, Any]:
    entry = {"name": "a", "kind": "openai_chat", "model": "m", "base_url": _URL} | candidate
    return {"suite": "t", "track": "t", "corpus": {"path": "c"}, "candidates": [entry]} | top


def _refusal(spec: dict[str, Any]) -> str:
    with pytest.raises(InputError) as raised:
        parse_spec(spec, source="exp.toml")
    return str(raised.value)


@pytest.mark.parametrize(
    ("candidate", "field"),
    [
        ({"settings": {"note": OPENAI}}, "settings.note"),
        ({"settings": {"stop": [OPENAI]}}, "settings.stop[0]"),
        ({"settings": {"x": {"y": "sk-ant-api03-" + "x" * 40}}}, "settings.x.y"),
        ({"settings": {"note": "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"}}, "settings.note"),
        ({"settings": {"note": "hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ01234567"}}, "settings.note"),
        ({"settings": {"note": "AKIAIOSFODNN7EXAMPLE"}}, "settings.note"),
        ({"settings": {"note": JWT}}, "settings.note"),
        ({"settings": {"note": f"Bearer {OPENAI}"}}, "settings.note"),
        ({"model": OPENAI}, "model"),
    ],
)
def test_a_key_shaped_candidate_value_is_refused_naming_the_field_not_the_value(
    candidate: dict[str, Any], field: str
) -> None:
    message = _refusal(_spec(candidate))
    assert f"{field} looks like it holds a credential" in message
    assert "A1b2C3d4" not in message and "a1B2c3D4" not in message and "\n" not in message


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"note": OPENAI}, "track_options.note"),
        ({"candidates": {"a": {"boundary": f"Bearer {OPENAI}"}}}, "track_options.candidates.a"),
        ({"splits": ["eval", JWT]}, "track_options.splits[1]"),
    ],
)
def test_a_key_shaped_track_option_value_is_refused_naming_the_option_not_the_value(
    options: dict[str, Any], field: str
) -> None:
    message = _refusal(_spec({}, track_options=options))
    assert f"{field}" in message and "looks like it holds a credential" in message
    assert OPENAI not in message and JWT not in message


def test_a_key_in_the_description_is_refused_without_repeating_it() -> None:
    message = _refusal(_spec({}, description=f"token {OPENAI}"))
    assert "description looks like it holds a credential" in message and OPENAI not in message


_GATE = {"metric": "m", "threshold": 0.1, "comparison": "<="}


@pytest.mark.parametrize(
    ("spec", "where"),
    [
        (_spec({"name": OPENAI}), "name looks like it holds a credential"),
        (_spec({}, gates=[_GATE | {"description": f"ok {OPENAI}"}]), "gates/0/description"),
        (_spec({}, gates=[_GATE | {"name": JWT}]), "gates/0/name"),
        (_spec({"settings": {OPENAI: 1}}), "a key name in settings looks like a credential"),
        (_spec({}, track_options={"x": {JWT: "y"}}), "a key name in track_options.x"),
    ],
)
def test_a_key_pasted_as_a_name_a_gate_text_or_a_table_key_is_refused_without_repeating_it(
    spec: dict[str, Any], where: str
) -> None:
    # Each is written into the manifest, the ledger or every report page.
    message = _refusal(spec)
    assert where in message, message
    assert OPENAI not in message and JWT not in message and "A1b2C3d4" not in message


@pytest.mark.parametrize(
    ("url", "part"),
    [
        (f"{_URL}#{OPENAI}", "fragment"),
        (f"{_URL}/{''.join(f'%{ord(c):02X}' for c in OPENAI)}", "path segment 2"),
        (f"{_URL}?deployment={OPENAI}", "query parameter 'deployment'"),
    ],
)
def test_a_key_hidden_in_a_base_url_fragment_encoded_path_or_query_value_is_refused(
    url: str, part: str
) -> None:
    message = _refusal(_spec({"base_url": url}))
    assert f"base_url {part}" in message and OPENAI not in message


def test_model_ids_digests_and_prose_are_not_taken_for_keys() -> None:
    spec = _spec(
        {
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "settings": {"revision": "0123456789abcdef0123456789abcdef01234567", "stop": ["\n"],
                         "system": "You review change requests; answer in JSON."},
            "base_url": "http://127.0.0.1:8000/openai/deployments/gpt-4o?api-version=2024-08-01",
        },
        description="Does a local 8B reviewer detect forged approvals on corpus v0.3?",
    )  # fmt: skip
    assert (
        parse_spec(spec, source="exp.toml").candidates[0].model
        == "meta-llama/Llama-3.1-8B-Instruct"
    )
