"""`trustbench run` imports nothing it does not use: statistics and plotting belong to `report`.

Start-up is what a user waits for before the first trial and on every resume; scipy alone costs
about 1.8 s of import and matplotlib about 1.4 s, and a run computes no interval and draws no
plot (issue 35). Nor does a run of a reviewer corpus need the other corpus versions' policies,
the suite command groups it was not invoked through, the simulated platform, the held-out set's
cipher suite or the track's analysis. Each test runs the real CLI in a fresh interpreter and
lists, at exit, which of the watched modules it loaded.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support.child_env import child_env
from tests.support.cli import invoke
from tests.support.openai_server import OpenAIServer, openai_server  # noqa: F401

REPORT_ONLY = ("numpy", "scipy", "statsmodels", "matplotlib")
"""Top-level packages only `report` (statistics, plots, numpy under both) may import."""

NOT_FOR_A_REVIEW_RUN = (
    "trustbench.rtb.policy.narrow_v2",
    "trustbench.rtb.policy.narrow_v3",
    "trustbench.rtb.policy.narrow_v1._control",
    "trustbench.rtb.platform",
    "trustbench.rtb.cli",
    "trustbench.trb",
    "trustbench.rtb.review._chain",
    "cryptography",
)
"""Modules (and their submodules) a run of a v0.1 reviewer corpus does not use: the other
versions' policy objects, the control-path mapping and the platform it builds, the `rtb` and
`trb` command groups, the report's configurations, the held-out cipher suite. (Core's analysis
and figure models are not listed: `trustbench.core` imports its public names, theirs included,
with ordinary imports; together about 10 ms, and no statistics or plotting library.)"""
NOT_FOR_A_FINISHED_RUN = (*NOT_FOR_A_REVIEW_RUN, "trustbench.rtb.review._validation")
"""What a run with no trial left does not use either: the response validation is for trials.
(The input export is not listed: `trustbench.rtb.corpus` imports it with the rest of its public
names, about 3 ms.)"""

_PROBE = """
import json, sys
from trustbench.cli import main
watched = set(json.loads(sys.argv[2]))
narrow = json.loads(sys.argv[3])
sys.argv = ["trustbench", *json.loads(sys.argv[1])]
try:
    main()
except SystemExit as stop:
    code = stop.code
else:
    code = 0
loaded = sorted({name.split(".")[0] for name in sys.modules} & watched)
unused = sorted(
    prefix for prefix in narrow
    if any(name == prefix or name.startswith(prefix + ".") for name in sys.modules)
)
print("\\nPROBE " + json.dumps({"code": code, "loaded": loaded, "unused": unused}))
"""


def _cli(
    tmp: Path,
    *arguments: str,
    watched: tuple[str, ...] = REPORT_ONLY,
    unused: tuple[str, ...] = NOT_FOR_A_REVIEW_RUN,
) -> dict[str, object]:
    """Run the CLI in a fresh interpreter: its exit code, the `watched` top-level packages it
    loaded (`loaded`) and which of `unused` it imported (`unused`)."""
    completed = subprocess.run(
        [
            sys.executable,
            "-c",
            _PROBE,
            json.dumps(arguments),
            json.dumps(watched),
            json.dumps(unused),
        ],
        capture_output=True,
        text=True,
        check=False,
        env=child_env(tmp),
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
    frozen = _cli(folder, "freeze", str(_review_spec(folder, candidate)), "--out", str(run_dir))
    assert frozen["code"] == 0, frozen
    return run_dir


def test_run_of_an_in_process_reviewer_imports_no_statistics_or_plotting(tmp_path: Path) -> None:
    run_dir = _frozen(
        tmp_path,
        'kind = "inprocess"\nentry = "trustbench.rtb.review.reviewers:chat_responder"\n'
        'settings = { reviewer = "reference-policy" }',
    )
    ran = _cli(tmp_path, "run", str(run_dir), "--quiet")
    # The in-process reviewer reads each input back in whichever policy format wrote it, so a
    # run that answers trials tries every policy's input model; the other checks hold.
    assert ran["code"] == 0 and ran["loaded"] == [], ran
    assert set(ran["unused"]) <= {NOT_FOR_A_REVIEW_RUN[0], NOT_FOR_A_REVIEW_RUN[1]}, ran
    # A resume of the finished folder (nothing left to do) is start-up alone.
    resumed = _cli(tmp_path, "run", str(run_dir), "--quiet", unused=NOT_FOR_A_FINISHED_RUN)
    assert resumed == {"code": 0, "loaded": [], "unused": []}
    # The probe sees these modules when they are loaded: `report` loads the libraries, and
    # `rtb --help` the command group and the policies it reviews with.
    reported = _cli(tmp_path, "report", str(run_dir), watched=(*REPORT_ONLY, "rich"))
    # rich's tables are for the `rtb audit` tables and error messages, not a report (issue 55).
    assert reported["loaded"] and set(reported["loaded"]) <= set(REPORT_ONLY), reported
    # A review report draws its plots as plain SVG and computes its statistics in pure Python
    # (core/_distributions.py): statsmodels and matplotlib were most of its wall, and then
    # scipy.special a tenth of it (issue 55).
    assert {"statsmodels", "matplotlib", "scipy"}.isdisjoint(reported["loaded"]), reported
    assert "trustbench.rtb.review._chain" in reported["unused"], reported
    assert "trustbench.rtb.cli" in _cli(tmp_path, "rtb", "--help")["unused"]


def test_run_of_an_http_reviewer_imports_no_statistics_and_its_resume_no_aiohttp(
    tmp_path: Path,
    openai_server: OpenAIServer,  # noqa: F811
) -> None:
    run_dir = _frozen(
        tmp_path,
        f'kind = "openai_chat"\nmodel = "m"\nbase_url = "{openai_server.base_url}"',
    )
    ran = _cli(tmp_path, "run", str(run_dir), "--quiet")
    assert ran == {"code": 0, "loaded": [], "unused": []}
    assert len(openai_server.requests) == 1 + 4  # one preflight probe, then the 4 trials over HTTP
    # A resume with nothing left makes no provider: no aiohttp (about 0.2 s), no probe.
    resumed = _cli(tmp_path, "run", str(run_dir), "--quiet", watched=("aiohttp", "yarl"))
    assert resumed["code"] == 0 and resumed["loaded"] == [], resumed
    assert len(openai_server.requests) == 1 + 4


def test_a_run_with_nothing_to_send_over_http_never_imports_aiohttp(tmp_path: Path) -> None:
    """aiohttp (with its TLS set-up, about 0.2 s) is loaded by an HTTP provider, not the pool."""
    run_dir = _frozen(
        tmp_path,
        'kind = "inprocess"\nentry = "trustbench.rtb.review.reviewers:chat_responder"\n'
        'settings = { reviewer = "reference-policy" }',
    )
    ran = _cli(tmp_path, "run", str(run_dir), "--quiet", watched=("aiohttp", "yarl"))
    assert ran["code"] == 0 and ran["loaded"] == [], ran
    resumed = _cli(tmp_path, "run", str(run_dir), "--quiet", watched=("aiohttp", "yarl"))
    assert resumed["code"] == 0 and resumed["loaded"] == [], resumed


def test_an_http_provider_loads_aiohttp_when_made_not_in_its_first_timed_request(
    tmp_path: Path,
) -> None:
    probe = (
        "import sys\n"
        "from trustbench.providers import OpenAIChatProvider, new_session\n"
        "pool = new_session(1)\n"
        "before = 'aiohttp' in sys.modules\n"
        "OpenAIChatProvider(pool, base_url='http://127.0.0.1:9/v1', model='m')\n"
        "print(before, 'aiohttp' in sys.modules)\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True, text=True, check=True, env=child_env(tmp_path),
    )  # fmt: skip
    assert completed.stdout.split() == ["False", "True"], completed.stderr


def test_run_of_a_workflow_imports_no_statistics_no_other_policy_and_no_web_server(
    tmp_path: Path,
) -> None:
    """A workflow run on a v0.2 scenario loads the v0.2 policy alone, no numpy (the workflow
    figures' statistics) and no aiohttp web server (the `http` boundary's service side)."""
    spec = tmp_path / "spec.toml"
    spec.write_text(
        'suite = "rtb"\ntrack = "workflow"\ntrials_per_case = 1\nconcurrency = 1\n\n'
        '[corpus]\nbuiltin = "v0.2"\n\n[track_options]\nkinds = ["direct"]\n'
        'scenarios = ["backup_retention-02-revision_counters-permit/direct"]\n\n'
        '[[candidates]]\nname = "honest"\nkind = "inprocess"\n'
        'settings = { agent = "honest", boundary = "reference" }\n'
    )
    run_dir = tmp_path / "run"
    assert invoke("freeze", str(spec), "--out", str(run_dir))[0] == 0  # in process: untimed
    other_policies = ("trustbench.rtb.policy.narrow_v3", "trustbench.rtb.policy.narrow_v4")
    ran = _cli(tmp_path, "run", str(run_dir), "--quiet", unused=(*other_policies, "aiohttp.web"))
    assert ran == {"code": 0, "loaded": [], "unused": []}
