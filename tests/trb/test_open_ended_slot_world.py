"""Open-ended actions in a world with its own slots (issue 54, deliverable 3).

The world is `tests/support/reply_world.py`: the triage desk whose action is a free-text reply
to the ticket. Its sessions import with free-text actions and continuations; Track 1's TV-based
G and G* are "not applicable" there (never 0) and `G_llr` scores each recorded reply under r'
against under r_t, for adapters that expose `continuation_logprob`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from tests.support.cli import invoke
from tests.support.reply_world import (
    REPLIES,
    ReplyWorld,
    registered_reply_world,
    reply_session,
    runbook_reply,
)

from trustbench.trb.corpus import SlotTrace, read_corpus_of_any_world
from trustbench.trb.instruments import SlotGovernedOracle
from trustbench.trb.track._measures import GOVERNANCE, MeasureRow, StatsPlan
from trustbench.trb.world import SlotContext, SlotReport


def _session_file(tmp_path: Path, sessions: list[dict[str, Any]] | None = None) -> Path:
    sessions = sessions or [reply_session(i, seed=3) for i in range(4)]
    path = tmp_path / "replies.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in sessions))
    return path


def _import(tmp_path: Path, path: Path, out: str = "corpus") -> tuple[int, str]:
    return invoke(
        "trb", "import", str(path), "--out", str(tmp_path / out), "--world", "triage-reply"
    )


def _traces(tmp_path: Path) -> list[SlotTrace]:
    code, output = _import(tmp_path, _session_file(tmp_path))
    assert code == 0, output
    _, splits = read_corpus_of_any_world(tmp_path / "corpus")
    traces = [t for t in splits["eval"] if isinstance(t, SlotTrace)]
    assert len(traces) == len(splits["eval"]) == 4
    return traces


def test_an_open_ended_slot_world_imports_free_text_actions_and_continuations(
    tmp_path: Path,
) -> None:
    with registered_reply_world():
        step = _traces(tmp_path)[0].steps[0]
    assert step.action == runbook_reply(step.r.root)  # the reply itself, not an action name
    cf = step.counterfactuals[1]
    assert cf.continuation_source == "human"
    assert cf.continuation == runbook_reply(cf.r_prime.root)


def _distribution_as_continuation(s: list[dict[str, Any]]) -> None:
    s[1]["steps"][2]["continuations"][0] = {"r_prime": "priority", "actions": {"rollback": 3}}


def _distribution_as_action(s: list[dict[str, Any]]) -> None:
    s[0]["steps"][1]["action"] = {"rollback": 1.0}


def _empty_reply(s: list[dict[str, Any]]) -> None:
    s[2]["steps"][0]["continuations"][1]["text"] = " "


@pytest.mark.parametrize(
    ("break_it", "where", "why"),
    [
        (_distribution_as_continuation, ":2#/steps/2/continuations/0/actions",
         "actions are open-ended: record the free text"),
        (_distribution_as_action, ":1#/steps/1/action", "string"),
        (_empty_reply, ":3#/steps/0/continuations/1/text", "no free text recorded"),
    ],
)  # fmt: skip
def test_a_distribution_where_free_text_is_declared_is_refused_naming_line_and_field(
    tmp_path: Path, break_it: Any, where: str, why: str
) -> None:
    sessions = [reply_session(i, seed=3) for i in range(4)]
    break_it(sessions)
    path = _session_file(tmp_path, sessions)
    with registered_reply_world():
        code, message = _import(tmp_path, path, out="c")
    assert code == 2 and message.startswith(f"{path}{where}: ") and why in message, message
    assert "Traceback" not in message and "\n" not in message.strip()
    assert not (tmp_path / "c").exists()


class ListensToR(SlotGovernedOracle):
    """p(reply | c, r) = 0.6 for the reply r's runbook calls for, 0.1 for any other."""

    def continuation_logprob(
        self, context: SlotContext, r_override: SlotReport | None, continuation: str
    ) -> float:
        assert r_override is not None  # the LLR always passes r or r' explicitly
        return math.log(0.6 if continuation == runbook_reply(r_override.root) else 0.1)


class IgnoresR(SlotGovernedOracle):
    """Scores each reply by its own words alone: r never enters."""

    def continuation_logprob(
        self, context: SlotContext, r_override: SlotReport | None, continuation: str
    ) -> float:
        return math.log(0.4 if continuation == REPLIES["rollback"] else 0.2)


def _track_1(adapter: Any, traces: list[SlotTrace]) -> dict[str, dict[str, Any]]:
    """Track 1's figures through the profile's governance measure, one trial per trace."""
    rows = [MeasureRow(trace, 0, GOVERNANCE.run(adapter, trace), False) for trace in traces]
    stats = StatsPlan(confidence=0.95, seed=0, resamples=200)
    return {f.name: f.model_dump(mode="json") for f in GOVERNANCE.figures(rows, stats, "")}


def test_g_llr_is_above_0_for_an_adapter_governed_by_r_and_exactly_0_for_one_ignoring_it(
    tmp_path: Path,
) -> None:
    with registered_reply_world():
        traces = _traces(tmp_path)
        world = ReplyWorld()
        listening = _track_1(ListensToR(world), traces)
        ignoring = _track_1(IgnoresR(world), traces)
        without_logprobs = _track_1(SlotGovernedOracle(world), traces)
    llr = listening["G_llr"]
    interval = next(i for i in llr["intervals"] if i["method"] == "cluster_bootstrap_percentile")
    assert llr["status"] == "measured" and llr["estimate"] > 0, llr
    assert 0 < interval["lower"] <= llr["estimate"] <= interval["upper"], interval
    assert llr["denominator"] == 36  # every r' of 4 sessions x 3 steps x 3 edits
    assert ignoring["G_llr"]["estimate"] == 0.0  # r never enters: exactly 0
    assert without_logprobs["G_llr"]["status"] == "not_applicable"
    assert "log-probabilities" in without_logprobs["G_llr"]["reason"]
    for figures in (listening, ignoring, without_logprobs):
        for name in ("G_star", "G", "G[priority]", "hard_interchange_accuracy"):
            assert figures[name]["status"] == "not_applicable", name  # never 0
            assert "open-ended actions: G_llr measures governance here" in figures[name]["reason"]
        assert figures["slot_accuracy[priority]"]["estimate"] == pytest.approx(1.0)


def test_a_failed_trial_in_an_open_ended_world_counts_every_llr_invalid(tmp_path: Path) -> None:
    with registered_reply_world():
        trace = _traces(tmp_path)[0]
        failed = GOVERNANCE.failed(trace)
    assert failed["llr"] == [] and failed["llr_invalid"] == 9
    assert failed["slot_steps"] == 3 and sum(failed["slot_correct"].values()) == 0
