"""A world registered by a plug-in is first-class: imported, measured, served, or refused clearly.

The plug-in is `tests/support/queue_world.py` (a support queue with its own declaration, words
and option keys `serve` / `wait` / `admit`), the same code as docs/trb.md's "Bring your own
world". Its sessions are written as `trb import` reads them from exact reference traces, so
Phi(r') is the reference agent's and the governed oracle's G is 1 up to rounding.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest
from aiohttp.test_utils import TestClient, TestServer
from tests.support.child_env import child_env
from tests.support.cli import invoke
from tests.support.openai_server import OpenAIServer, raw_body
from tests.support.queue_world import (
    QUEUE_DECLARATION,
    QueueWorld,
    queue_session,
    queue_traces,
    registered_queue_world,
)
from tests.support.trb_spec import world_profile_spec
from tests.trb.collect_fixtures import PROTOCOL

from trustbench.errors import InputError
from trustbench.trb.collect import freeze_protocol
from trustbench.trb.collect._app import CollectionRun
from trustbench.trb.corpus import read_corpus, write_corpus
from trustbench.trb.instruments import TextUniformOracle
from trustbench.trb.proxy._chat import ChatProxyAdapter, ChatTextAgent
from trustbench.trb.track import freeze_run_report
from trustbench.trb.world import (
    WORLD_ENTRY_POINTS,
    ActionSpace,
    TaskWording,
    TextContext,
    TextTask,
    TextWorldAdapter,
    known_world_ids,
    register_world,
    world_sha256,
)


def _session_file(tmp_path: Path, sessions: list[dict[str, Any]] | None = None) -> Path:
    """A small session file of the queue world: three eval sessions."""
    if sessions is None:
        sessions = [queue_session(trace) for trace in queue_traces("eval", 3, seed=5)]
    path = tmp_path / "queue_sessions.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in sessions))
    return path


def test_a_plug_in_world_session_file_imports_through_its_own_slot_schema(
    tmp_path: Path,
) -> None:
    with registered_queue_world():
        path, out = _session_file(tmp_path), tmp_path / "corpus"
        code, output = invoke("trb", "import", str(path), "--out", str(out), "--world", "queue")
        assert code == 0, output
        manifest, splits = read_corpus(out)
        assert (manifest.world_id, manifest.world_sha256) == ("queue", world_sha256("queue"))
    first = splits["eval"][0]
    assert first.task == TextTask(kind="queue")
    # option keys and words are read back as the dynamics' values the tracks compare
    assert first.steps[0].action in ("left", "stay", "right")
    assert first.steps[0].r.goal in ("left", "right")


def _text_ops_words(sessions: list[dict[str, Any]]) -> None:
    sessions[1]["steps"][0]["r"]["planned_next"] = "add a replica"


def _text_ops_action(sessions: list[dict[str, Any]]) -> None:
    sessions[0]["steps"][1]["action"] = "increase"


def _unknown_task_kind(sessions: list[dict[str, Any]]) -> None:
    sessions[2]["task"] = {"kind": "replicas"}


@pytest.mark.parametrize(
    ("break_it", "where", "why"),
    [
        (_text_ops_words, ":2#/steps/0/r/planned_next", "'add a replica'"),
        (_text_ops_action, ":1#/steps/1/action", "known: serve, wait, admit"),
        (_unknown_task_kind, ":3#/task/kind", "is not one of world queue's"),
    ],
)
def test_a_plug_in_world_session_outside_its_schema_is_one_line_naming_file_line_and_field(
    tmp_path: Path, break_it: Any, where: str, why: str
) -> None:
    sessions = [queue_session(trace) for trace in queue_traces("eval", 3, seed=5)]
    break_it(sessions)
    path = _session_file(tmp_path, sessions)
    with registered_queue_world():
        code, message = invoke(
            "trb", "import", str(path), "--out", str(tmp_path / "c"), "--world", "queue"
        )
    assert code == 2 and message.startswith(f"{path}{where}: ") and why in message, message
    assert "Traceback" not in message and not (tmp_path / "c").exists()


SPEC = (
    world_profile_spec(["governance", "attribution", "grounding"])
    + """

[[candidates]]
name = "governed"
kind = "inprocess"
model = "text-oracle:governed"

[[candidates]]
name = "r-blind"
kind = "inprocess"
model = "text-oracle:r-ignoring"

[[candidates]]
name = "corridor-oracle"
kind = "inprocess"
model = "oracle:perfectly-governed"
"""
)


def test_tracks_1_and_3_on_an_imported_plug_in_world_corpus_run_through_the_harness(
    tmp_path: Path,
) -> None:
    with registered_queue_world():
        code, output = invoke(
            "trb", "import", str(_session_file(tmp_path)), "--out", str(tmp_path / "corpus"),
            "--world", "queue",
        )  # fmt: skip
        assert code == 0, output
        (tmp_path / "spec.toml").write_text(SPEC)
        freeze_run_report(tmp_path / "spec.toml", tmp_path / "run")
    record = json.loads((tmp_path / "run" / "record.json").read_text())
    assert record["trb"]["world_id"] == "queue"
    profile = record["trb"]["profile"]
    governed, blind = profile["governed"], profile["r-blind"]
    assert governed["G"]["status"] == "measured" and governed["G"]["value"] > 0.9999
    assert governed["attr"]["status"] == "measured" and governed["attr"]["value"] == 1.0
    assert blind["G"]["value"] == pytest.approx(0.0, abs=1e-9)  # G* at its floor
    # what cannot run says so on its axis, never a figure: Track 2 runs in a plug-in text
    # world too, but the text oracle has no activation access
    assert governed["ground"]["status"] == "not run"
    assert "activation access" in json.dumps(governed["ground"])
    corridor_only = json.dumps(profile["corridor-oracle"]["G"])
    assert profile["corridor-oracle"]["G"]["status"] == "not run"
    assert "this trace is in world queue" in corridor_only, corridor_only


def test_the_text_adapters_act_with_the_plug_in_worlds_declared_option_keys() -> None:
    trace = queue_traces("eval", 1, seed=2)[0]
    with registered_queue_world():
        world = QueueWorld(trace.task, trace.world)
        context = trace.context(0)
        text = TextContext(
            trace_id=trace.trace_id, t=0, prompt=world.render_context(context),
            task=world.task, dynamics=world.dynamics,
        )  # fmt: skip
        assert "serve: serve a ticket" in text.prompt and "decrease" not in text.prompt
        assert set(TextUniformOracle().act_text(text, None)) == {"serve", "wait", "admit"}
        adapter = TextWorldAdapter(TextUniformOracle(), world)
        assert adapter.act(context) == pytest.approx({"left": 1 / 3, "stay": 1 / 3, "right": 1 / 3})


def _queue_chat_model(world: QueueWorld) -> Any:
    """A scripted chat model in the queue world: states the reference block, then picks the
    option key its (edited) block plans, read from logprobs."""

    def script(body: dict[str, Any], _n: int) -> Any:
        prompt = body["messages"][0]["content"]
        if not body.get("logprobs"):
            own = world.render_report(world.reference_report(prompt))
            return raw_body(_completion(f"Looking at the queue.\n{own}"))
        plan = world.parse_report(body["messages"][-1]["content"]).planned_next
        key = next(iter(world.to_option_keys({plan: 1.0})))
        others = [k for k in world.option_keys if k != key]
        top = [(f" {key}", 0.8), (f" {others[0]}", 0.1), (f" {others[1]}", 0.1)]
        return raw_body(_completion(key, top))

    return script


def _completion(text: str, top: list[tuple[str, float]] | None = None) -> str:
    choice: dict[str, Any] = {
        "index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop",
    }  # fmt: skip
    if top is not None:
        choice["logprobs"] = {"content": [{
            "token": top[0][0], "logprob": math.log(top[0][1]),
            "top_logprobs": [{"token": t, "logprob": math.log(p)} for t, p in top],
        }]}  # fmt: skip
    return json.dumps({"id": "x", "model": "scripted", "choices": [choice]})


def test_the_chat_proxy_reads_the_plug_in_worlds_option_keys_after_its_edited_block() -> None:
    trace = queue_traces("eval", 1, seed=2)[0]
    with registered_queue_world(), OpenAIServer() as server:
        world = QueueWorld(trace.task, trace.world)
        server.script(_queue_chat_model(world))
        chat = ChatTextAgent(ChatProxyAdapter(server.base_url, "scripted", name="chat"))
        adapter = TextWorldAdapter(chat, world)
        context = trace.context(1)
        r = adapter.emit_r(context)
        r_prime = r.model_copy(
            update={"planned_next": "left" if r.planned_next != "left" else "right"}
        )
        dist = adapter.act(context, r_override=r_prime)
        adapter.close()
        prefill = server.requests[-1].body["messages"][-1]["content"]
    assert prefill.endswith(f"{world.render_report(r_prime)}\nOption:")
    assert max(dist, key=dist.__getitem__) == r_prime.planned_next
    assert dist[r_prime.planned_next] == pytest.approx(0.8)


def test_the_collection_app_serves_an_item_of_the_plug_in_world(tmp_path: Path) -> None:
    with registered_queue_world():
        write_corpus(tmp_path / "source", {"eval": queue_traces("eval", 2, seed=4)})
        (tmp_path / "protocol.toml").write_text(PROTOCOL, encoding="utf-8")
        freeze_protocol(tmp_path / "protocol.toml", tmp_path / "collection")

        async def first_page() -> str:
            with CollectionRun(tmp_path / "collection") as served:
                assert served.app is not None
                token = next(iter(served.tokens))
                async with TestClient(TestServer(served.app, host="127.0.0.1")) as client:
                    return await (await client.get(f"/s/{token}")).text()

        page = asyncio.run(first_page())
    assert 'id="situation"' in page and "open tickets" in page
    # the options are offered in the queue task's words (the form posts the dynamics' action)
    assert re.search(r'value="(left|stay|right)" required> (serve a ticket|admit a ticket)', page)


def test_a_corpus_of_an_unregistered_world_is_refused_naming_it_and_how_to_register_it(
    tmp_path: Path,
) -> None:
    with registered_queue_world():
        write_corpus(tmp_path / "corpus", {"eval": queue_traces("eval", 1, seed=1)})
    with pytest.raises(InputError, match="unknown TRB world 'queue'") as refused:
        read_corpus(tmp_path / "corpus")
    assert str(refused.value.location).endswith("manifest.json#/world_id")
    assert "register_world(world)" in refused.value.message
    assert WORLD_ENTRY_POINTS in refused.value.message
    code, message = invoke(
        "trb", "import", str(_session_file(tmp_path)), "--out", str(tmp_path / "c"),
        "--world", "queue",
    )  # fmt: skip
    assert code == 2 and "unknown TRB world 'queue'" in message and WORLD_ENTRY_POINTS in message


def test_trb_corpus_refuses_a_plug_in_world_it_cannot_generate(tmp_path: Path) -> None:
    with registered_queue_world():
        code, message = invoke("trb", "corpus", str(tmp_path / "out"), "--world", "queue")
    assert code == 2 and "cannot generate world 'queue'" in message, message
    assert "trb import --world queue" in message and not (tmp_path / "out").exists()


def test_an_installed_entry_point_serves_its_world_to_a_fresh_trustbench_process(
    tmp_path: Path,
) -> None:
    """A package's `trustbench.trb_worlds` entry point, and nothing else, makes `--world queue`
    known to the CLI (a fresh process: no test code registered it; without the package the
    same command says the world is unknown)."""
    site = tmp_path / "site"
    dist = site / "queue_plugin-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: queue-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        f"[{WORLD_ENTRY_POINTS}]\nqueue = tests.support.queue_world:QueueWorld\n"
    )
    root = Path(__file__).parents[2]

    def trb_corpus_world_queue(*path: Path) -> subprocess.CompletedProcess[str]:
        # `trb corpus` looks the world up before anything costly is imported; a known plug-in
        # world gets "cannot generate", an unknown one "unknown TRB world"
        return subprocess.run(
            [sys.executable, "-m", "trustbench", "trb", "corpus", str(tmp_path / "out"),
             "--world", "queue"],
            env=child_env(tmp_path, pythonpath=[*path, root]), capture_output=True, text=True,
            timeout=120, check=False,
        )  # fmt: skip

    installed, bare = trb_corpus_world_queue(site), trb_corpus_world_queue()
    assert installed.returncode == 2 and "cannot generate world 'queue'" in installed.stderr
    assert bare.returncode == 2 and "unknown TRB world 'queue'" in bare.stderr
    for done in (installed, bare):
        assert "Traceback" not in done.stderr and done.stderr.strip().count("\n") == 0


def test_the_docs_bring_your_own_world_code_is_the_test_queue_world() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "trb.md").read_text(encoding="utf-8")
    section = doc.split("## Bring your own world", 1)[1].split("\n## ")[0]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict[str, Any] = {}
    exec(compile(code, "docs/trb.md", "exec"), namespace)  # the documented plug-in, as written
    assert namespace["QUEUE_DECLARATION"] == QUEUE_DECLARATION
    assert namespace["QueueWorld"].wordings == QueueWorld.wordings


def test_a_text_world_whose_words_miss_a_declared_option_key_is_refused_at_registration() -> None:
    class TwoOptionQueue(QueueWorld):
        declaration = QUEUE_DECLARATION.model_copy(
            update={"world_id": "queue-two", "action_space": ActionSpace(
                kind="discrete", actions=("serve", "admit"))}
        )  # fmt: skip
        wordings: ClassVar[Mapping[str, TaskWording]] = {"queue-two": QueueWorld.wordings["queue"]}

    with pytest.raises(InputError, match="a text world declares three option keys"):
        register_world(TwoOptionQueue())
    assert "queue-two" not in known_world_ids()
