"""No input makes the CLI print a traceback: fuzzed spec text, corpus files and arguments.

Each example runs the real entry point (`trustbench.cli.main`) in-process and requires an exit
code of 0, 1 or 2: any other exception escaping `main` is what a user would see as a traceback.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trustbench.cli import main

FUZZ = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
BUILTIN_CORPUS = Path(__file__).parents[1] / "src" / "trustbench" / "rtb" / "corpus" / "v0.1"
DEMO_SPEC = Path(__file__).parents[1] / "src/trustbench/rtb/experiments/demo_review.toml"

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)
file_bytes = st.one_of(
    st.binary(max_size=300),
    st.text(max_size=300).map(str.encode),
    json_values.map(lambda value: json.dumps(value).encode()),
    st.integers(1, 3000).map(lambda depth: b"[" * depth * 10 + b"]" * depth * 10),
    st.integers(1, 3000).map(lambda depth: b"a = " + b"[" * depth * 10 + b"]" * depth * 10),
)


def _exit_code(*args: str) -> int:
    """Run `trustbench *args` through `main`; return its exit code (an escaping error fails)."""
    saved = sys.argv
    sys.argv = ["trustbench", *args]
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            main()
    except SystemExit as done:
        return done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    finally:
        sys.argv = saved
    return 0


@FUZZ
@given(content=file_bytes, suffix=st.sampled_from([".toml", ".json"]))
def test_no_spec_file_content_makes_freeze_print_a_traceback(
    tmp_path: Path, content: bytes, suffix: str
) -> None:
    spec = tmp_path / f"exp{suffix}"
    spec.write_bytes(content)
    shutil.rmtree(tmp_path / "run", ignore_errors=True)
    assert _exit_code("freeze", str(spec), "--out", str(tmp_path / "run")) in {0, 1, 2}


@pytest.fixture
def user_corpus_spec(tmp_path: Path) -> Path:
    shutil.copytree(BUILTIN_CORPUS, tmp_path / "corpus")
    spec = tmp_path / "exp.toml"
    # The demo spec on a copy of the starter (its own reference reviewer).
    text = re.sub(r'builtin = "v[0-9.]+"', 'path = "corpus"', DEMO_SPEC.read_text())
    spec.write_text(re.sub(r'"reference-policy-v[0-9]+"', '"reference-policy"', text))
    return spec


@settings(FUZZ, max_examples=10)
@given(
    content=file_bytes,
    target=st.sampled_from(["cases/backup_retention-01-permitted.json", "MANIFEST.json"]),
)
def test_no_corpus_file_content_makes_freeze_print_a_traceback(
    user_corpus_spec: Path, content: bytes, target: str
) -> None:
    (user_corpus_spec.parent / "corpus" / target).write_bytes(content)
    out = user_corpus_spec.parent / "run"
    shutil.rmtree(out, ignore_errors=True)
    assert _exit_code("freeze", str(user_corpus_spec), "--out", str(out)) in {1, 2}


@FUZZ
@given(data=st.data())
def test_no_command_line_makes_the_cli_print_a_traceback(
    tmp_path: Path, data: st.DataObject
) -> None:
    (tmp_path / "folder").mkdir(exist_ok=True)
    (tmp_path / "file.toml").write_bytes(b"\x00\xffnot a spec")
    (tmp_path / "run").mkdir(exist_ok=True)
    (tmp_path / "run" / "manifest.json").write_bytes(data.draw(file_bytes))
    (tmp_path / "run" / "ledger.sqlite").write_bytes(data.draw(file_bytes))
    paths = [str(tmp_path / name) for name in ("folder", "file.toml", "run", "missing")]
    command = data.draw(st.sampled_from(["freeze", "run", "verify", "report", "export-ledger"]))
    words = st.sampled_from([*paths, "--out", "--quiet", "--executor", "ray", "--address", "x"])
    rest = data.draw(
        st.lists(words | st.text(max_size=10).filter(lambda t: not t.startswith("-")), max_size=5)
    )
    assert _exit_code(command, *rest) in {0, 1, 2}
