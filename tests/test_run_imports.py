"""`trustbench run` imports no statistics or plotting library: those belong to `report`.

Start-up is what a user waits for before the first trial and on every resume; scipy alone costs
about 1.8 s of import and matplotlib about 1.4 s, and a run computes no interval and draws no
plot (issue 35). Each test runs the real CLI in a fresh interpreter and lists, at exit, which of
the report-only libraries it loaded.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support.openai_server import OpenAIServer, openai_server  # noqa: F401

REPORT_ONLY = ("scipy", "statsmodels", "matplotlib")
"""Top-level packages only `report` (statistics, plots) may import."""

_PROBE = """
import json, sys
from trustbench.cli import main
watched = set(json.loads(sys.argv[2]))
sys.argv = ["trustbench", *json.loads(sys.argv[1])]
try:
    main()
except SystemExit as stop:
    code = stop.code
else:
    code = 0
loaded = sorted({name.split(".")[0] for name in sys.modules} & watched)
print("\\nPROBE " + json.dumps({"code": code, "loaded": loaded}))
"""


def _cli(*arguments: str) -> dict[str, object]:
    """Run the CLI in a fresh interpreter; its exit code and the report-only modules it loaded."""
    completed = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(arguments), json.dumps(REPORT_ONLY)],
        capture_output=True,
        text=True,
        check=False,
    )
    probe = [line for line in completed.stdout.splitlines() if line.startswith("PROBE ")]
    assert probe, completed.stdout + completed.stderr
    return json.loads(probe[-1].removeprefix("PROBE "))


def _review_spec(folder: Path, candidate: str) -> Path:
    spec = folder / "spec.toml"
    spec.write_text(
        'suite = "rtb"\ntrack = "review"\ntrials_per_case = 2\nconcurrency = 4\n'
        'track_options = { cases = ["backup_retention-01-permitted", '
        '"backup_retention-02-presentation_only"] }\n\n'
        '[corpus]\nbuiltin = "v0.1"\n\n[retry]\ntransport_max_retries = 0\n\n'
        f'[[candidates]]\nname = "reviewer"\n{candidate}\n'
    )
    return spec


def _frozen(folder: Path, candidate: str) -> Path:
    run_dir = folder / "run"
    frozen = _cli("freeze", str(_review_spec(folder, candidate)), "--out", str(run_dir))
    assert frozen["code"] == 0, frozen
    return run_dir


def test_run_of_an_in_process_reviewer_imports_no_statistics_or_plotting(tmp_path: Path) -> None:
    run_dir = _frozen(
        tmp_path,
        'kind = "inprocess"\nentry = "trustbench.rtb.review.reviewers:chat_responder"\n'
        'settings = { reviewer = "reference-policy" }',
    )
    ran = _cli("run", str(run_dir), "--quiet")
    assert ran == {"code": 0, "loaded": []}
    # A resume of the finished folder (nothing left to do) is start-up alone.
    assert _cli("run", str(run_dir), "--quiet") == {"code": 0, "loaded": []}
    # The probe sees these libraries when they are loaded: `report` does load them.
    reported = _cli("report", str(run_dir))
    assert reported["loaded"] and set(reported["loaded"]) <= set(REPORT_ONLY), reported


def test_run_of_an_http_reviewer_imports_no_statistics_or_plotting(
    tmp_path: Path,
    openai_server: OpenAIServer,  # noqa: F811
) -> None:
    run_dir = _frozen(
        tmp_path,
        f'kind = "openai_chat"\nmodel = "m"\nbase_url = "{openai_server.base_url}"',
    )
    ran = _cli("run", str(run_dir), "--quiet")
    assert ran == {"code": 0, "loaded": []}
    assert len(openai_server.requests) == 1 + 4  # one preflight probe, then the 4 trials over HTTP
