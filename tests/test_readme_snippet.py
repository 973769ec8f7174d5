"""README's "From Python" snippet runs as written, offline, on the built-in in-process reviewers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def _python_snippet() -> str:
    section = README.read_text(encoding="utf-8").split("## From Python", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match, "README's From Python section has no python block"
    return match.group(1)


@pytest.mark.slow  # one real freeze, run and report of 480 trials: ~15 s of CPU
def test_the_readme_python_snippet_runs_offline_and_shows_each_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "")  # nothing it runs may need a key
    exec(compile(_python_snippet(), "README.md", "exec"), {})  # the doc's own code
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "reference-policy: passed all 2 gate(s)"
    assert printed[1].startswith("always-permit: failed as expected")
    assert (tmp_path / "runs" / "review-python" / "report.html").is_file()
