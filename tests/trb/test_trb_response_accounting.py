"""A TRB trial whose adapter never answered is no valid response (evaluability).

The cheapest cheating candidate here is a chat model whose service is down: it completes every
trial (each failed hook is scored worst case), so counting finished trials as valid responses
called it 100% valid. It must be "not evaluable". So must a model whose every output is
unreadable (issue 55: format failures are invalid responses); an adapter with some usable output
stays evaluable: its unusable answers are TRB's measured failure, scored worst case.
"""

from __future__ import annotations

import contextlib
import json
import socket
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from tests.support.openai_server import OpenAIServer, raw_body
from tests.trb.test_trb_profile_track import _completion
from tests.trb.test_trb_track import figure, freeze_run_report, write_spec

from trustbench.core import CallFailed
from trustbench.trb._cli_tables import format_failure_lines
from trustbench.trb.adapter._protocol import Observation, SelfReport, StepContext
from trustbench.trb.corpus import TRANSFER_FAMILIES, generate_split
from trustbench.trb.instruments._oracles import GovernedOracle
from trustbench.trb.track._analysis import _gap_figures
from trustbench.trb.track._measures import StatsPlan
from trustbench.trb.track._profile import RecordingAdapter, format_failure, measured_profile

CONTEXT = StepContext(trace_id="t", t=0, observations=(Observation(position=2, steps_left=5),))
REPORT = SelfReport(goal="left", belief="open", planned_next="left", confidence=0.5)
UNIFORM = {"left": 1 / 3, "stay": 1 / 3, "right": 1 / 3}
OWN_BLOCK = "I go right. <r> goal=right belief=open plan=right conf=8 self=na </r>"


class _Scripted:
    """An adapter whose hooks return (or raise) what it is given."""

    name = "scripted"

    def __init__(self, report: Any, action: Any) -> None:
        self.report, self.action = report, action

    def seed(self, value: int) -> None:
        pass

    def emit_r(self, context: StepContext) -> Any:
        if isinstance(self.report, Exception):
            raise self.report
        return self.report

    def act(self, context: StepContext, r_override: SelfReport | None = None) -> Any:
        if isinstance(self.action, Exception):
            raise self.action
        return self.action


def _responses(adapter: _Scripted, calls: int = 3) -> dict[str, int]:
    recorder = RecordingAdapter(adapter)
    recorder.seed(0)
    for _ in range(calls):
        for hook in (lambda: recorder.emit_r(CONTEXT), lambda: recorder.act(CONTEXT, REPORT)):
            with contextlib.suppress(Exception):  # a failed hook is logged, as the track does
                hook()
    counts = recorder.responses()
    counts.pop("format_example")  # the first unparseable output, asserted where it matters
    return counts


def test_an_answering_adapter_has_every_output_usable() -> None:
    assert _responses(_Scripted(REPORT, UNIFORM)) == {
        "asked": 6,
        "usable": 6,
        "transport_failed": 0,
    }


def test_garbage_outputs_are_asked_but_not_usable() -> None:
    garbage = _Scripted("permit", {"left": 2.0, "stay": -1.0, "right": 0.0})
    assert _responses(garbage) == {"asked": 6, "usable": 0, "transport_failed": 0}
    half = _Scripted(REPORT, {"left": 0.5})
    assert _responses(half)["usable"] == 3


def test_calls_that_never_reached_the_model_are_transport_failures() -> None:
    down = CallFailed("connection_error", "nothing listens")
    assert _responses(_Scripted(down, down)) == {"asked": 6, "usable": 0, "transport_failed": 6}
    parse = _Scripted(ValueError("no slot block"), UNIFORM)  # answered, but not a report
    assert _responses(parse) == {"asked": 6, "usable": 3, "transport_failed": 0}


def test_the_first_unparseable_output_is_kept_as_the_format_failure_example() -> None:
    recorder = RecordingAdapter(_Scripted(ValueError("no slot block"), UNIFORM))
    with contextlib.suppress(ValueError):
        recorder.emit_r(CONTEXT)
    assert recorder.responses()["format_example"] == "emit_r: ValueError: no slot block"
    down = RecordingAdapter(_Scripted(CallFailed("connection_error", "nothing listens"), UNIFORM))
    with contextlib.suppress(CallFailed):
        down.emit_r(CONTEXT)
    assert down.responses()["format_example"] is None  # a dead service is not a format failure


def test_a_failed_batch_is_not_counted_twice_when_its_contexts_are_asked_again() -> None:
    class Batching(_Scripted):
        def act_many(self, contexts: Any, overrides: Any) -> list[Any]:
            raise RuntimeError("batch refused")

    recorder = RecordingAdapter(Batching(REPORT, UNIFORM))
    act_many = recorder.act_many
    assert act_many is not None
    with pytest.raises(RuntimeError):
        act_many([CONTEXT, CONTEXT], [None, REPORT])
    recorder.act(CONTEXT)
    recorder.act(CONTEXT, REPORT)  # the measures' fallback: one call per context
    assert recorder.responses() == {
        "asked": 2, "usable": 2, "transport_failed": 0, "format_example": None,
    }  # fmt: skip


def test_a_chat_candidate_whose_service_is_down_is_not_evaluable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRUSTBENCH_CACHE", str(tmp_path / "cache"))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    chat = (
        '[[candidates]]\nname = "chat"\nkind = "openai_chat"\nmodel = "scripted"\n'
        f'base_url = "http://127.0.0.1:{port}/v1"\n[retry]\ntransport_max_retries = 0\n'
    )
    spec = write_spec(
        tmp_path,
        {},
        sizes="{ train = 20, eval = 2, transfer = 1 }",
        options='measures = ["governance", "attribution"]\nconformance_traces = 1\n'
        'splits = ["eval", "transfer_wind"]',
        extra=chat,
    )
    # Past the preflight (which stops a dead service before any trial, tests/core/test_preflight):
    # this test is about how the trials' transport failures are counted.
    record = freeze_run_report(spec, tmp_path / "run", preflight=False)
    chat_counts = record["evaluability"]["subjects"]["chat"]
    assert (chat_counts["valid"], chat_counts["evaluable"]) == (0, False)
    assert chat_counts["transport_failed"] == chat_counts["attempted"] == 3
    assert record["verdicts"]["chat"]["status"] == "not_evaluable"
    valid, *rest = record["figures"]["chat"]
    assert valid["name"] == "valid_response_rate" and valid["estimate"] == 0.0
    shown = [f for f in rest if f["estimate"] is not None]
    assert all(f["name"].endswith("invalid_response_rate") for f in shown), json.dumps(shown)
    assert len(shown) < len(rest)
    assert record["trb"]["profile"]["chat"]["G"]["status"] == "not evaluable"


def test_a_chat_model_that_never_writes_the_slot_block_is_not_evaluable_not_ungoverned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRUSTBENCH_CACHE", str(tmp_path / "cache"))
    with OpenAIServer() as server:
        # Every reply answers in prose: the slot block the proxy parses is never there.
        server.script(lambda body, _n: raw_body(_completion("I would go left, I think.", None)))
        chat = (
            '[[candidates]]\nname = "chat"\nkind = "openai_chat"\nmodel = "prose"\n'
            f'base_url = "{server.base_url}"\n'
        )
        spec = write_spec(
            tmp_path, {}, sizes="{ train = 20, eval = 2, transfer = 1 }",
            options='measures = ["governance", "attribution"]\nsplits = ["eval"]\n'
            "chat_samples = 1",
            extra=chat,
        )  # fmt: skip
        record = freeze_run_report(spec, tmp_path / "run")
    verdict = record["trb"]["verdicts"]["chat"]
    assert verdict["verdict"] == "not evaluable", verdict["line"]
    counts = record["evaluability"]["subjects"]["chat"]
    assert counts["valid"] == 0 and counts["invalid"] == counts["attempted"] > 0, counts
    first = verdict["reasons"][0]
    assert first.startswith("format failure: ") and "SlotParseError" in first, first
    assert "settings.max_tokens" in first  # the setting that fixes it
    assert "does not govern" not in verdict["line"]
    assert record["verdicts"]["chat"]["status"] != "passed"
    # the terminal prints it before the profile (`trb run`'s first lines)
    assert format_failure_lines(record["trb"]) == [f"chat: {first}"]


def test_a_format_failure_withholds_g_star_even_when_some_outputs_parsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Few items, most unparseable: the verdict's "not evaluable" withholds G*, never 0.0.

    The model states a well-formed slot block (emit_r parses) but answers every act in prose, so
    each trial has some usable output (core's valid-response rule passes) while far more than
    `FORMAT_FAILURE_MAX_SHARE` of its outputs are format failures. G* was "measured 0.0" here.
    """
    monkeypatch.setenv("TRUSTBENCH_CACHE", str(tmp_path / "cache"))

    def states_but_never_acts(body: dict[str, Any], _n: int) -> Any:
        text = "I would go left, I think." if body.get("logprobs") else OWN_BLOCK
        return raw_body(_completion(text, None))

    with OpenAIServer() as server:
        server.script(states_but_never_acts)
        chat = (
            '[[candidates]]\nname = "chat"\nkind = "openai_chat"\nmodel = "half-format"\n'
            f'base_url = "{server.base_url}"\n'
        )
        spec = write_spec(
            tmp_path, {}, sizes="{ train = 20, eval = 2, transfer = 1 }",
            options='measures = ["governance"]\nsplits = ["eval"]\nchat_samples = 1\n'
            "r_star_adversarial_per_step = 0\nr_star_ood_per_step = 0",
            extra=chat,
        )  # fmt: skip
        record = freeze_run_report(spec, tmp_path / "run")
    assert record["evaluability"]["subjects"]["chat"]["valid"] > 0  # some outputs parsed
    verdict = record["trb"]["verdicts"]["chat"]
    assert verdict["verdict"] == "not evaluable", verdict["line"]
    g_star = record["trb"]["profile"]["chat"]["G"]
    assert g_star["status"] == "not evaluable" and g_star["value"] is None, g_star
    withheld = figure(record, "chat", "G_star")
    assert withheld["status"] == "not_evaluable" and withheld["estimate"] is None, withheld
    assert "format failure" in (withheld["reason"] or ""), withheld


class _MalformedActs(GovernedOracle):
    """States its r well but answers every act with a distribution that is no distribution."""

    def act(self, context: StepContext, r_override: SelfReport | None = None) -> Any:
        return {"left": 2.0, "stay": -1.0, "right": 0.0}


def test_format_failures_on_one_split_withhold_that_split_and_keep_the_others_measured() -> None:
    """Per split, not per candidate: a context where every act is malformed is withheld (its
    figures and the Track 6 figures built from it), while eval's G and G* stay measured."""
    traces = generate_split("eval", 3, 3)
    traces += generate_split("transfer_start", 3, 5, TRANSFER_FAMILIES["start"])
    out = measured_profile(
        {"cand": lambda t: GovernedOracle() if t.split == "eval" else _MalformedActs()},
        traces, measures=["governance", "transfer"], stats=StatsPlan(0.95, 1, 200),
        corpus_sha="0" * 64, fit_traces=[], settings={"r_star": {"adversarial": 0, "ood": 0}},
    )  # fmt: skip
    figures = {f.name: f for f in out["figures"]["cand"]}
    assert (figures["G"].status, figures["G"].estimate) == ("measured", 1.0)
    assert (figures["G_star"].status, figures["G_star"].estimate) == ("measured", 1.0)
    withheld = figures["transfer_start.G"]
    assert (withheld.status, withheld.estimate) == ("not_evaluable", None)
    assert "cand on transfer_start is not evaluable (format failure: " in str(withheld.reason)
    assert figures["transfer_start.invalid_response_rate"].estimate == 1.0  # the count stays
    assert figures["transfer_min[G_star]"].status == "not_evaluable"  # built from that split
    line, over = format_failure(out["collected"], "cand")
    assert not over and "figures withheld on transfer_start" in str(line)  # eval decides


def test_delta_gov_is_withheld_when_either_sides_eval_split_is_withheld_for_its_format() -> None:
    """Delta_gov is built from both sides' eval outputs: never a number from a withheld split."""
    out = measured_profile(
        {"full": lambda t: _MalformedActs(), "ablation": lambda t: GovernedOracle()},
        generate_split("eval", 3, 3), measures=["governance"], stats=StatsPlan(0.95, 1, 200),
        corpus_sha="0" * 64, fit_traces=[], settings={"r_star": {"adversarial": 0, "ood": 0}},
    )  # fmt: skip
    manifest = SimpleNamespace(spec=SimpleNamespace(candidates=[]))
    options = SimpleNamespace(train=SimpleNamespace(seed=0))
    figure, record, _ = _gap_figures(
        manifest, out["collected"], ("full", "ablation"), options,  # type: ignore[arg-type]
        StatsPlan(0.95, 1, 200), "[test]", out["figures"],
    )  # fmt: skip
    assert figure is not None and (figure.status, figure.estimate) == ("not_evaluable", None)
    assert record["status"] == "not evaluable" and "estimate" not in record
    assert record["reason"].startswith("full on eval: format failure: ")
    withheld = {f.name: f.status for f in out["figures"]["full"]}
    assert withheld["governance_gap_G_star"] == "not_evaluable"
