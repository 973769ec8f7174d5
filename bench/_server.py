"""The bench's OpenAI-compatible server, in its own process so its CPU is not the harness's.

Every request is answered, after a fixed latency, with the reference-policy reviewer's reply to
the review it carries (so replies are valid findings and the harness does the full validation).
The preflight probe `trustbench run` sends first is answered after the same latency: a real
server takes as long for it (until 2026-12-05 it was answered at once, so the process figures
left out one round trip that `run` waited for before its first trial).
Replies are cached per case: between trials they differ only by the evaluation id.

Run: `python -m bench._server LATENCY_S [loop]`; prints the port on one line, serves until stdin
closes. With `loop` it serves a reviewer-gated workflow (`bench/loop_critical_path.py`): a request
that offers tools is the agent's turn (the first requests the brief's proposal, the next stops),
any other is a review, answered by the v0.2 reference policy's reviewer.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

from tests.support.openai_server import Behaviour, OpenAIServer, probe_reply

from bench._workload import reference_reply, reply_cache_key


def loop_answer(latency_s: float) -> Any:
    """Answers of the workflow loop: the agent's two turns and the reviewer's finding."""
    import json

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

    return answer


def main() -> None:
    latency_s = float(sys.argv[1])
    if sys.argv[2:] == ["loop"]:
        _serve(loop_answer(latency_s))
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


def _serve(answer: Any) -> None:
    server = OpenAIServer()
    server.script(answer)
    with server:
        # Keep memory flat over many requests: the bench does not inspect them.
        server.requests = _Discard()
        print(server.port, flush=True)
        sys.stdin.read()


class _Discard(list):  # type: ignore[type-arg]
    def append(self, item: object) -> None:
        self.clear()
        super().append(item)


if __name__ == "__main__":
    main()
