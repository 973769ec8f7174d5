"""The bench's OpenAI-compatible server, in its own process so its CPU is not the harness's.

Every request is answered, after a fixed latency, with the reference-policy reviewer's reply to
the review it carries (so replies are valid findings and the harness does the full validation).
The preflight probe `trustbench run` sends first is answered after the same latency: a real
server takes as long for it (until 2026-12-05 it was answered at once, so the process figures
left out one round trip that `run` waited for before its first trial).
Replies are cached per case: between trials they differ only by the evaluation id.

Run: `python -m bench._server LATENCY_S [loop [TIMELINE]]`; prints the port on one line, serves
until stdin closes. With `loop` it serves a reviewer-gated workflow (`bench/loop_critical_path.py`):
a request that offers tools is the agent's turn (the first requests the brief's proposal, the next
stops), any other is a review, answered by the v0.2 reference policy's reviewer; each answer is
written the latency after its request was received (the server's own work is inside it, as a
model's is), and the reviewer answers one review before the port is printed. With `TIMELINE`
(a file path) it writes one JSON line per request when it stops: when the request was received
(its body read), when its answer was decided (the reviewer's reply computed) and written (all
`time.time()`), what it was (`probe`, `agent`, `review`, `closing`) and the proposal it concerns,
so the bench can place the harness's gaps between a trial's calls
(`bench.loop_critical_path.timeline`).
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from typing import Any

from tests.support.openai_server import Behaviour, OpenAIServer, probe_reply

from bench._workload import reference_reply, reply_cache_key


def loop_answer(latency_s: float) -> Any:
    """Answers of the workflow loop: the agent's two turns and the reviewer's finding."""
    from trustbench.rtb.policy._registry import parse_candidate_input
    from trustbench.rtb.review.reviewers._registry import make_reviewer

    reviewer = make_reviewer("reference-policy-v2")

    def answer(body: Any, number: int) -> Behaviour:
        probe = probe_reply(body)
        if probe is not None:
            return dataclasses.replace(probe, latency_s=latency_s)
        messages = body["messages"]
        if "tools" not in body:
            finding = reviewer.review(
                messages[0]["content"], parse_candidate_input(messages[-1]["content"])
            )
            return Behaviour("reply", text=finding, latency_s=latency_s)
        if any(m["role"] == "assistant" for m in messages):
            return Behaviour("reply", text="Done.", latency_s=latency_s)
        proposal = json.loads(messages[1]["content"])["proposal"]
        call = [{"name": "request_change", "arguments": proposal}]
        return Behaviour("reply", tool_calls=call, latency_s=latency_s)

    warm_up(answer)
    return answer


def warm_up(answer: Any) -> None:
    """Answer one review before serving.

    The reviewer's first reply imports and builds what later ones reuse (0.2 s of the server's
    CPU on 2026-12-06): answered during the first wave, it delayed every review behind it in
    the server's one event loop, and the bench charged that to the harness.
    """
    from trustbench.rtb.corpus._load import builtin_corpus_root, load_corpus
    from trustbench.rtb.policy._registry import policy_for
    from trustbench.rtb.review.reviewers._llm import build_review_messages

    corpus = load_corpus(builtin_corpus_root("0.2"))
    # Any policy's input model: the messages only serialise it as JSON.
    shown: Any = policy_for(corpus.policy_id).candidate_input(corpus.cases[0], "rtb-" + "0" * 32)
    answer({"messages": build_review_messages(corpus.review_prompt, shown)}, 0)


def main() -> None:
    latency_s = float(sys.argv[1])
    if sys.argv[2:3] == ["loop"]:
        timeline = sys.argv[3] if len(sys.argv) > 3 else None
        _serve(loop_answer(latency_s), timeline, loop=True)
        return
    cache: dict[str, str] = {}

    def answer(body: Any, number: int) -> Behaviour:
        probe = probe_reply(body)  # `trustbench run` preflights, as against a real server
        if probe is not None:  # which answers it after the same latency as any request
            return dataclasses.replace(probe, latency_s=latency_s)
        content = body["messages"][-1]["content"]
        eid, key = reply_cache_key(content)
        template = cache.get(key)
        if template is None:
            template = cache[key] = reference_reply(body).replace(eid, "\x00")
        return Behaviour("reply", text=template.replace("\x00", eid), latency_s=latency_s)

    _serve(answer)


def loop_call(body: Any) -> tuple[str, str]:
    """What a loop request is (`probe`, `agent`, `review`, `closing`) and its proposal's key.

    The key (the proposal as sorted JSON) ties a trial's three calls together: the agent's brief
    carries the proposal, the review's candidate input carries the same one.
    """
    if probe_reply(body) is not None:
        return "probe", ""
    messages = body["messages"]
    if "tools" not in body:
        proposal = json.loads(messages[-1]["content"])["proposal"]
        return "review", json.dumps(proposal, sort_keys=True)
    proposal = json.loads(messages[1]["content"])["proposal"]
    kind = "closing" if any(m["role"] == "assistant" for m in messages) else "agent"
    return kind, json.dumps(proposal, sort_keys=True)


class _TimedServer(OpenAIServer):
    """The loop's server: each answer written `latency_s` after its request was received.

    The fixed latency counts from receipt, so the server's own work on a request (the
    reference reviewer's finding, a few ms of its CPU, while other requests wait in its one
    event loop) is inside the latency, as a model's work is, rather than added to it. It notes
    when each request was received, decided and answered (the timeline).
    """

    timeline: list[dict[str, Any]]
    _entry_of: dict[int, dict[str, Any]]
    """Each request's timeline entry by its parsed body's identity (`_choose` to `_respond`)."""

    def _choose(self, body: Any, number: int) -> Behaviour:
        received = time.time()
        behaviour = super()._choose(body, number)
        kind, key = loop_call(body)
        entry = {"received": received, "decided": time.time(), "kind": kind, "key": key}
        self.timeline.append(entry)
        self._entry_of[id(body)] = entry
        return behaviour

    async def _respond(self, writer: Any, path: str, body: Any, behaviour: Behaviour) -> bool:
        spent = time.time() - self._entry_of[id(body)]["received"]
        left = dataclasses.replace(behaviour, latency_s=max(behaviour.latency_s - spent, 0.0))
        written = await super()._respond(writer, path, body, left)
        self._entry_of.pop(id(body))["answered"] = time.time()
        return written


def _serve(answer: Any, timeline: str | None = None, *, loop: bool = False) -> None:
    server = _TimedServer() if loop else OpenAIServer()
    if isinstance(server, _TimedServer):
        server.timeline, server._entry_of = [], {}
    server.script(answer)
    with server:
        # Keep memory flat over many requests: the bench does not inspect them.
        server.requests = _Discard()
        print(server.port, flush=True)
        sys.stdin.read()
    if isinstance(server, _TimedServer) and timeline:
        with open(timeline, "w", encoding="utf-8") as out:
            out.writelines(json.dumps(entry) + "\n" for entry in server.timeline)


class _Discard(list):  # type: ignore[type-arg]
    def append(self, item: object) -> None:
        self.clear()
        super().append(item)


if __name__ == "__main__":
    main()
