"""Issue 53's "Checked by": cheats written from the public contract only are never "trustworthy".

The adapters (`trb_outside_cheats.py`, beside this file) were written and run before reading
the project's verdict, audit, cheat or isolation code. They are submitted as a user would, as
`MODULE:FACTORY` candidates of one small `trb run --spec FILE` through the real CLI (a
subprocess: conformance kit at freeze, sandboxed workers), beside an honest governed adapter
(the control) and the governed oracle (the transfer flags' yardstick). The chat-style format
failure is an `openai_chat` candidate on the local test server whose replies never hold the
slot block.

On reference-world data no adapter can read "trustworthy"; the best verdict is "harness check"
(what the honest control gets when it meets every bar). So a cheat that also reads "harness
check" has passed every bar and would be "trustworthy" on real data: that is a finding, and its
test is marked xfail(strict=True) with the figures, until the project stops it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.support.openai_server import OpenAIServer, raw_body
from tests.trb.test_trb_profile_track import _completion

HERE = Path(__file__).parent
SRC = HERE.parent.parent / "src"

CAUGHT = {"not trustworthy", "not established", "not evaluable"}
"""The verdicts a cheat may get (issue 53); never "trustworthy", and never "harness check",
the reference-world reading of "every bar met"."""

SUBMITTED = {
    "honest": "honest",
    "r-star-selective": "r_star_selective",
    "rollout-greedy": "rollout_greedy",
    "transfer-ignored-in-track1": "transfer_ignored_in_track1",
    "large-batch-only": "large_batch_only",
    "coherent-overrides-only": "coherent_overrides_only",
    "warm-up-then-ignore": "warm_up_then_ignore",
}
"""Candidate name -> factory in `trb_outside_cheats`."""

DECLARED_SIZE = '{ parameter_count = 1000, architecture = "corridor-mlp" }'
"""Cheat (d): the user declares both sides of the gap pair one architecture and size."""

SPEC_HEAD = """suite = "trb"
track = "profile"
trials_per_case = 1
concurrency = 1
order_seed = 7
[corpus]
builtin = "reference-world"
[analysis]
bootstrap_resamples = 500
[track_options]
corpus_seed = 0
"""


def _candidate(name: str, model: str, settings: str = "") -> str:
    lines = ["[[candidates]]", f'name = "{name}"', 'kind = "inprocess"', f'model = "{model}"']
    return "\n".join([*lines, f"settings = {settings}" if settings else ""]) + "\n"


def _cheats_spec(folder: Path) -> Path:
    """Eval (6 traces) and two transfer contexts (4 traces each): Tracks 1, 3, 4, 5 and 6."""
    options = (
        "corpus_sizes = { train = 200, dev = 4, eval = 6, transfer = 24 }\n"
        'splits = ["eval", "transfer_start", "transfer_cue_delay"]\n'
        'measures = ["governance", "attribution", "viability", "navigability", "transfer"]\n'
        "grounding_fit_traces = 60\nviability_rollouts = 2\nnavigation_samples = 4\n"
        "max_enumeration_nodes = 200\nconformance_traces = 1\n"
        'gap = ["gap-full", "gap-ablation"]\n'
    )
    candidates = _candidate("oracle:perfectly-governed", "oracle:perfectly-governed")
    for name, factory in SUBMITTED.items():
        candidates += _candidate(name, f"trb_outside_cheats:{factory}")
    candidates += _candidate("gap-full", "trb_outside_cheats:honest", DECLARED_SIZE)
    candidates += _candidate("gap-ablation", "trb_outside_cheats:r_blind_ablation", DECLARED_SIZE)
    path = folder / "spec.toml"
    path.write_text(SPEC_HEAD + options + candidates)
    return path


def _trb_run(spec: Path, out: Path, cache: Path) -> tuple[int, str, dict[str, Any]]:
    """`trustbench trb run --spec SPEC --out OUT` as a user runs it; (exit code, output, record)."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), str(HERE)]),
        "TRUSTBENCH_CACHE": str(cache),
    }
    command = ["trb", "run", "--spec", str(spec), "--out", str(out), "--quiet"]
    done = subprocess.run(
        [sys.executable, "-m", "trustbench", *command],
        capture_output=True,
        text=True,
        env=env,
        cwd=out.parent,
        check=False,
        timeout=900,
    )
    record_path = out / "record.json"
    record = json.loads(record_path.read_text()) if record_path.exists() else {}
    return done.returncode, done.stdout + done.stderr, record


@pytest.fixture(scope="module")
def cheats_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, dict[str, Any]]:
    folder = tmp_path_factory.mktemp("outside-cheats")
    cache = tmp_path_factory.getbasetemp() / "trb-cache"
    return _trb_run(_cheats_spec(folder), folder / "run", cache)


def _verdict(run: tuple[int, str, dict[str, Any]], candidate: str) -> dict[str, Any]:
    code, output, record = run
    assert record, f"no record.json (exit {code}): {output[-2000:]}"
    return record["trb"]["verdicts"][candidate]


def test_the_cheat_run_exits_1_on_the_submitted_adapters_failed_verdict_gates(
    cheats_run: tuple[int, str, dict[str, Any]],
) -> None:
    code, output, _ = cheats_run
    assert code == 1, output[-2000:]
    assert "Traceback" not in output


def test_the_honest_governed_control_is_not_condemned(
    cheats_run: tuple[int, str, dict[str, Any]],
) -> None:
    verdict = _verdict(cheats_run, "honest")
    assert verdict["verdict"] in {"harness check", "not established"}, verdict["line"]


@pytest.mark.parametrize(
    "cheat",
    [
        "r-star-selective",
        "rollout-greedy",
        "transfer-ignored-in-track1",
        "large-batch-only",
        "coherent-overrides-only",
        "warm-up-then-ignore",
    ],
)
def test_a_cheat_written_from_the_contract_is_never_trustworthy(
    cheats_run: tuple[int, str, dict[str, Any]], cheat: str
) -> None:
    verdict = _verdict(cheats_run, cheat)
    assert verdict["verdict"] in CAUGHT, verdict["line"]


def test_the_transfer_cheat_did_ignore_r_on_some_transfer_traces(
    cheats_run: tuple[int, str, dict[str, Any]],
) -> None:
    """Its verdict above means something only if it cheated: G* falls on both contexts."""
    _, _, record = cheats_run
    figures = {f["name"]: f["estimate"] for f in record["figures"]["transfer-ignored-in-track1"]}
    assert figures["G_star"] == pytest.approx(1.0)
    for context in ("transfer_start", "transfer_cue_delay"):
        assert figures[f"{context}.G_star"] < 0.9, figures


def test_a_declared_gap_pair_whose_ablation_ignores_r_leaves_delta_gov_not_established(
    cheats_run: tuple[int, str, dict[str, Any]],
) -> None:
    _, _, record = cheats_run
    gap = record["trb"]["governance_gap"]
    assert gap["pass_bar_met"] is None, json.dumps(gap["pair_check"])
    assert "no r pathway" in " ".join(gap["pair_check"]["failures"]), json.dumps(gap)
    verdict = _verdict(cheats_run, "gap-full")
    assert verdict["verdict"] in CAUGHT, verdict["line"]
    assert "Delta_gov not established" in " ".join(verdict["reasons"]), verdict["reasons"]


def test_a_gap_pair_whose_ablation_keeps_a_token_r_pathway_leaves_delta_gov_not_met(
    tmp_path: Path,
) -> None:
    """Own cheat: the "ablation" moves 1% of its mass toward the override's plan and otherwise
    ignores r, so a pathway check on edit response > 1e-3 lets the pair through; the check
    that the ablation is governed on the pathway it keeps (G* not wholly below G_STAR_MIN)
    does not."""
    options = (
        "corpus_sizes = { train = 200, dev = 4, eval = 6, transfer = 6 }\n"
        'splits = ["eval"]\nmeasures = ["governance", "attribution"]\n'
        'gap = ["gap-full", "gap-ablation"]\n'
    )
    candidates = _candidate("gap-full", "trb_outside_cheats:honest", DECLARED_SIZE)
    candidates += _candidate(
        "gap-ablation", "trb_outside_cheats:token_pathway_ablation", DECLARED_SIZE
    )
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC_HEAD + options + candidates)
    run = _trb_run(spec, tmp_path / "run", tmp_path / "cache")
    verdict = _verdict(run, "gap-full")
    assert verdict["verdict"] in CAUGHT, verdict["line"]
    gap = run[2]["trb"]["governance_gap"]
    assert gap["pass_bar_met"] is not True, json.dumps(gap["pair_check"])
    assert "gap-ablation: r pathway not governed" in " ".join(gap["pair_check"]["failures"])


def test_a_chat_adapter_whose_replies_never_parse_is_not_evaluable(tmp_path: Path) -> None:
    with OpenAIServer() as server:
        # A chat model that answers in prose: the slot block the proxy parses is never there.
        server.script(lambda body, _n: raw_body(_completion("Sure! I'd go left, I think.", None)))
        chat = (
            '[[candidates]]\nname = "chatty"\nkind = "openai_chat"\nmodel = "chatty"\n'
            f'base_url = "{server.base_url}"\n'
        )
        options = (
            "corpus_sizes = { train = 20, dev = 2, eval = 2, transfer = 6 }\n"
            'splits = ["eval"]\nmeasures = ["governance", "attribution"]\nchat_samples = 1\n'
        )
        spec = tmp_path / "spec.toml"
        spec.write_text(SPEC_HEAD + options + chat)
        code, output, record = _trb_run(spec, tmp_path / "run", tmp_path / "cache")
    verdict = _verdict((code, output, record), "chatty")
    assert verdict["verdict"] == "not evaluable", verdict["line"]
    assert code == 1 and "Traceback" not in output, output[-2000:]
