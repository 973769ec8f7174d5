"""A minimal track for testing the harness end to end: one chat request per trial.

Corpus: a folder with `cases/*.json`, each `{"id": ..., "prompt": ...}`. Each trial sends the
case's prompt to the candidate and stores the reply. Track option `sleep_s` makes each trial
sleep after its call (for kill-and-resume tests). Also: helpers that write a corpus and a spec.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trustbench.core import (
    Manifest,
    Resolution,
    ResolvedItem,
    TrialContext,
    TrialKey,
    TrialOutcome,
    cross_product,
    register_track,
)
from trustbench.providers import ChatRequest

TRACK_ID = "test/echo"
TRACK_TARGET = "tests.support.echo_track:EchoTrack"
SYSTEM_PROMPT = "Repeat the user's message."


def register() -> None:
    """Register the echo track as `test/echo`."""
    register_track(TRACK_ID, TRACK_TARGET)


class EchoTrack:
    """Sends each case's prompt once per trial and records the reply."""

    def __init__(self) -> None:
        self._cases: dict[str, dict[str, Any]] | None = None

    def resolve(self, spec: Any, base_dir: Path) -> Resolution:
        root = (base_dir / spec.corpus.path).resolve()
        items = [
            ResolvedItem("corpus", path.relative_to(root).as_posix(), path=path)
            for path in sorted(root.glob("cases/*.json"))
        ]
        items.append(ResolvedItem("prompt", "system", text=SYSTEM_PROMPT))
        return Resolution(corpus_version=None, corpus_root=str(root), items=items)

    def _load(self, root: str) -> dict[str, dict[str, Any]]:
        if self._cases is None:
            self._cases = {}
            for path in sorted(Path(root).glob("cases/*.json")):
                case = json.loads(path.read_text())
                self._cases[case["id"]] = case
        return self._cases

    def plan(self, manifest: Manifest) -> Sequence[TrialKey]:
        return cross_product(list(self._load(manifest.corpus.root)), manifest)

    async def run_trial(self, key: TrialKey, ctx: TrialContext) -> TrialOutcome:
        case = self._load(ctx.manifest.corpus.root)[key.case_id]
        reply = await ctx.chat(
            ChatRequest(
                messages=[
                    {"role": "system", "content": SYSTEM_PROMPT},
                    {"role": "user", "content": case["prompt"]},
                ]
            )
        )
        sleep_s = float(ctx.manifest.spec.track_options.get("sleep_s", 0))
        if sleep_s:
            await asyncio.sleep(sleep_s)
        return TrialOutcome("completed", {"reply": reply.text, "model": reply.reported_model})


def echo_responder(settings: dict[str, Any]) -> Any:
    """In-process candidate factory: a fresh responder that echoes with a prefix."""
    prefix = settings.get("prefix", "")
    seen: list[str] = []  # per-trial state: must never exceed one request per trial

    def respond(request: ChatRequest) -> str:
        seen.append(request.messages[-1]["content"])
        return f"{prefix}{request.messages[-1]['content']} (calls in this context: {len(seen)})"

    return respond


def crash_once_responder(settings: dict[str, Any]) -> Any:
    """In-process candidate factory that kills its own process on the first call of the run.

    The first call anywhere creates the file `settings["marker"]` (exclusively, so only one call
    wins) and ends the process at once, as a lost machine would; every later call echoes. Only
    for a Ray worker: in the harness's own process it would end the test run.
    """
    marker = Path(settings["marker"])
    echo = echo_responder(settings)

    def respond(request: ChatRequest) -> str:
        try:
            marker.open("x").close()
        except FileExistsError:
            return echo(request)
        os._exit(1)

    return respond


def write_corpus(root: Path, n_cases: int) -> Path:
    """Write `n_cases` echo cases under `root/cases`; return `root`."""
    (root / "cases").mkdir(parents=True, exist_ok=True)
    for index in range(n_cases):
        case = {"id": f"case-{index:03d}", "prompt": f"prompt of case-{index:03d}"}
        (root / "cases" / f"case-{index:03d}.json").write_text(json.dumps(case))
    return root


def write_spec(path: Path, text: str) -> Path:
    """Write a spec file (dedented by the caller)."""
    path.write_text(text)
    return path


def two_candidate_spec(
    base_url: str, *, trials: int = 3, extra: str = "", concurrency: int = 4
) -> str:
    """Spec text: echo track, two OpenAI-compatible candidates at `base_url`, K=`trials`."""
    return f"""
suite = "test"
track = "echo"
trials_per_case = {trials}
concurrency = {concurrency}
timeout_s = 2.0
order_seed = 11
{extra}

[corpus]
path = "corpus"

[retry]
transport_max_retries = 3
backoff_base_s = 0.01
backoff_max_s = 0.05

[[candidates]]
name = "alpha"
kind = "openai_chat"
model = "alpha-model"
base_url = "{base_url}"
api_key_env = "TB_TEST_ALPHA_KEY"
settings = {{ temperature = 0.0 }}
price = {{ input_per_mtok = 1.0, output_per_mtok = 2.0 }}

[[candidates]]
name = "beta"
kind = "openai_chat"
model = "beta-model"
base_url = "{base_url}"
"""
