"""The measures use an adapter's batched hooks when it has them, with per-item results (issue 28).

The same Hugging Face adapter (a tiny randomly initialised GPT-2 saved by path) is measured
twice: as itself, offering `emit_many` / `act_many`, and behind a wrapper exposing only the
one-context hooks. Track 1/1b and Track 3 rows must agree, and the batched run must really
have gone through the batched hooks (counted), so neither path can pass for the other.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest

pytest.importorskip("transformers", reason="transformers is not installed (trustbench[hf])")
pytest.importorskip("tokenizers", reason="tokenizers is not installed")

from tests.trb.test_proxy_hf import _save_tiny_gpt2

from trustbench.trb.adapter import BatchedAdapter
from trustbench.trb.adapter._protocol import SelfReport, StepContext
from trustbench.trb.corpus import generate_split
from trustbench.trb.measures._governance import attribution_rows, governance_rows
from trustbench.trb.proxy import HFCausalLMProxyAdapter
from trustbench.trb.reference._token_world import vocabulary


class PerItem:
    """The adapter's one-context hooks only: the measures must fall back to them."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.name, self.tier, self.supports_override = inner.name, inner.tier, True
        self.seed = inner.seed

    def emit_r(self, context: StepContext) -> SelfReport:
        return self._inner.emit_r(context)

    def act(self, context: StepContext, r_override: SelfReport | None = None) -> dict[str, float]:
        return self._inner.act(context, r_override=r_override)


class Counted(HFCausalLMProxyAdapter):
    """The HF adapter, keeping the largest batch each batched hook was given."""

    calls: Counter[str]

    def emit_many(self, contexts: Sequence[StepContext]) -> list[SelfReport]:
        self.calls["emit_many"] = max(self.calls["emit_many"], len(contexts))
        return super().emit_many(contexts)

    def act_many(
        self, contexts: Sequence[StepContext], overrides: Sequence[SelfReport | None]
    ) -> list[dict[str, float]]:
        self.calls["act_many"] = max(self.calls["act_many"], len(contexts))
        return super().act_many(contexts, overrides)


def _close(a: Any, b: Any) -> None:
    if isinstance(a, dict):
        assert set(a) == set(b)
        for key in a:
            _close(a[key], b[key])
    elif isinstance(a, float):
        assert a == pytest.approx(b, abs=1e-6)  # float32 batch vs single rows
    else:
        assert a == b


def test_batched_and_per_item_paths_give_the_same_track_1_and_3_rows(tmp_path) -> None:
    folder = _save_tiny_gpt2(tmp_path / "tiny", vocabulary())
    traces = [t.model_copy(update={"steps": t.steps[:2]}) for t in generate_split("eval", 2, 5)]
    batched = Counted.from_path(folder, "tiny-gpt2")
    batched.calls = Counter()
    per_item = PerItem(HFCausalLMProxyAdapter.from_path(folder, "tiny-gpt2"))
    assert isinstance(batched, BatchedAdapter) and not isinstance(per_item, BatchedAdapter)

    track_1 = lambda a: governance_rows(a, traces, seed=3)  # noqa: E731
    track_3 = lambda a: attribution_rows(a, traces)  # noqa: E731
    for rows_of in (track_1, track_3):
        got, want = rows_of(batched), rows_of(per_item)
        assert len(got) == len(want) == len(traces)
        for a, b in zip(got, want, strict=True):
            _close(a, b)
    # Track 1 sent each trace's act calls (4+ per step) and its 2 steps' reports as one batch each.
    assert batched.calls["act_many"] >= 4 * 2 and batched.calls["emit_many"] == 2
    assert governance_rows(batched, traces, seed=3)[0]["invalid"] == 0
