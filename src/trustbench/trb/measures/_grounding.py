"""Track 2's building blocks: concept directions, and the detection AUC (white-box only).

Concept injection (Lindsey 2025) for a concept "slot = value" (goal = right, belief = closed):
the direction is fitted on train contexts here; the trials, their controls and figures are the
`grounding` measure's (`trb.track._trace_measures`, with its strength sweep in
`_grounding_sweep`).

1. Direction. Run the model on fit contexts (train split) and take the hidden state at the
   position the report is read from, at layer l: d = mean(h | concept true) -
   mean(h | concept false) (a difference of means), and its unit vector u = d / |d|; beside
   it the RMS norm s of that layer's hidden states on the fit contexts, so an injection
   alpha * s * u has a strength alpha relative to the activations' own scale.
2. Detection AUC (Mann-Whitney): P(score_injected > score_control) + 1/2 P(tie), against the
   null (no injection) and against a norm-matched random direction.

The headline is declared before any result: the last hooked layer at alpha = 1
(`HEADLINE_ALPHA`), pooled over concepts, against the random control (the stricter one: it
discounts any score change a push of that size causes in an arbitrary direction).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch
from torch import nn

from trustbench.trb.adapter._protocol import ACTIONS, DOOR_STATES, GOALS, SelfReport, StepContext
from trustbench.trb.corpus._format import Trace
from trustbench.trb.corpus._generate import text_worlds
from trustbench.trb.reference import NativeModelAdapter
from trustbench.trb.reference._model import encode_observation, encode_report, soft_report
from trustbench.trb.world import TextContext

# ------------------------------------------------------------------------------------------------
# White-box access for Track 2 and the native no-r ablation, via plain torch forward hooks.
#
# Track 2 needs three things from a model, and nothing else: the modules whose outputs are
# hidden states (`hook_layers`), the probability its self-report gives a concept
# (`slot_probability`, computed by a forward pass so hooks apply), and where in the sequence
# the report is read and the current step starts (`read_positions`, `step_starts`).
# `LocalLMProxyAdapter` provides them for a causal LM (blocks return tensors);
# `ReferenceWhiteBox` provides them for the reference native model (its GRU returns a tuple);
# in a text world `HFTextAgent` provides them over the world's rendering (`TextWhiteBox`),
# and `TextWorldWhiteBox` renders each step context in its trace's world for it.
# Hooks here accept both output shapes.


@runtime_checkable
class WhiteBox(Protocol):
    """What Track 2 needs from a model with activation access."""

    def hook_layers(self) -> list[nn.Module]:
        """Modules whose outputs are the hidden states, in depth order."""
        ...

    def slot_probability(
        self, contexts: Sequence[StepContext], slot: str, value: str
    ) -> np.ndarray:
        """P(self-report slot = value) per context, by forward passes (hooks apply)."""
        ...

    def read_positions(self, contexts: Sequence[StepContext]) -> list[int]:
        """Sequence index the report is read from in the first forward pass, per context."""
        ...

    def step_starts(self, contexts: Sequence[StepContext]) -> list[int]:
        """Sequence index where the current step begins, per context."""
        ...


@runtime_checkable
class TextWhiteBox(Protocol):
    """`WhiteBox` of a text agent: the same four hooks over the world's own rendering.

    `HFTextAgent` offers it for a Hugging Face causal LM: the decoder layers' residual stream,
    the token where the slot block's first value is read, the token where the current step's
    line begins, and each slot's declared values' probability as the task words them.
    """

    def hook_layers(self) -> list[nn.Module]:
        """Modules whose outputs are the hidden states, in depth order."""
        ...

    def slot_probability(
        self, contexts: Sequence[TextContext], slot: str, value: str
    ) -> np.ndarray:
        """P(slot = value, in the task's words) per context, by forward passes (hooks apply)."""
        ...

    def read_positions(self, contexts: Sequence[TextContext]) -> list[int]:
        """Token index the block's first slot is read from in the first forward pass."""
        ...

    def step_starts(self, contexts: Sequence[TextContext]) -> list[int]:
        """Token index where the current step's line begins, per context."""
        ...


class TextWorldWhiteBox:
    """A text agent's white box seen as a `WhiteBox`: each context in its own trace's world.

    Track 2 fits directions on train contexts and probes eval ones, and a text corpus states
    several tasks (kinds, phrasings, report languages), so each step context is rendered by
    the world its trace states (`text_worlds`) before the agent reads it; the concepts stay r's
    (`goal = right`, `belief = closed`), which every text world words as its goal and hidden
    fact, so directions are fitted and injected exactly as on the corridor.

    Args:
        agent: The text agent's white box (`TextWorldAdapter.text_whitebox`).
        traces: Every trace whose contexts it will be asked about (fit and probed ones).
    """

    def __init__(self, agent: TextWhiteBox, traces: Sequence[Trace]) -> None:
        self.agent = agent
        self.model = getattr(agent, "model", agent)
        """What the concept directions are cached by (`trb.track._measures._directions`)."""
        self._worlds = text_worlds(traces)

    def _texts(self, contexts: Sequence[StepContext]) -> list[TextContext]:
        return [self._worlds[c.trace_id].text_context(c) for c in contexts]

    def hook_layers(self) -> list[nn.Module]:
        """The agent's hooked layers."""
        return self.agent.hook_layers()

    def slot_probability(
        self, contexts: Sequence[StepContext], slot: str, value: str
    ) -> np.ndarray:
        """The agent's probability of the slot value, in each trace's words."""
        return self.agent.slot_probability(self._texts(contexts), slot, value)

    def read_positions(self, contexts: Sequence[StepContext]) -> list[int]:
        """Where the agent reads the block's first slot, per context."""
        return self.agent.read_positions(self._texts(contexts))

    def step_starts(self, contexts: Sequence[StepContext]) -> list[int]:
        """Where each context's current step begins in its rendering."""
        return self.agent.step_starts(self._texts(contexts))


def _hidden(output: Any) -> torch.Tensor:
    return output[0] if isinstance(output, tuple) else output


def _replace(output: Any, hidden: torch.Tensor) -> Any:
    return (hidden, *output[1:]) if isinstance(output, tuple) else hidden


@contextmanager
def capture(layer: nn.Module, positions: Sequence[int]) -> Iterator[list[torch.Tensor]]:
    """Record the layer's output at one position per row, from the first forward pass only."""
    seen: list[torch.Tensor] = []
    index = torch.tensor(list(positions))

    def hook(_module: nn.Module, _inputs: Any, output: Any) -> None:
        if not seen:
            h = _hidden(output)
            rows = torch.arange(h.shape[0], device=h.device)
            # Kept on the CPU in float64 whatever the model's device and dtype.
            seen.append(h[rows, index.to(h.device)].detach().double().cpu())

    handle = layer.register_forward_hook(hook)
    try:
        yield seen
    finally:
        handle.remove()


@contextmanager
def inject(layer: nn.Module, vectors: torch.Tensor, starts: Sequence[int]) -> Iterator[None]:
    """Add `vectors[b]` to the layer's output of row b at every position >= starts[b]."""
    start = torch.tensor(list(starts)).unsqueeze(1)

    def hook(_module: nn.Module, _inputs: Any, output: Any) -> Any:
        h = _hidden(output)
        steps = torch.arange(h.shape[1], device=h.device).unsqueeze(0)
        mask = (steps >= start.to(h.device)).to(h.dtype).unsqueeze(-1)
        push = vectors[: h.shape[0]].unsqueeze(1).to(device=h.device, dtype=h.dtype)
        return _replace(output, h + mask * push)

    handle = layer.register_forward_hook(hook)
    try:
        yield
    finally:
        handle.remove()


_SLOT_INDEX = (
    {("goal", g): i for i, g in enumerate(GOALS)}
    | {("belief", d): 2 + i for i, d in enumerate(DOOR_STATES)}
    | {("plan", a): 4 + i for i, a in enumerate(ACTIONS)}
)


class ReferenceWhiteBox(NativeModelAdapter):
    """The native adapter with batched hooks, Track 2 access and the mean-r ablation.

    Behaves exactly like `NativeModelAdapter` for `emit_r` and `act` (it is one), and adds
    `emit_many` / `act_many` (one batched forward per call), white-box access and
    `act_without_r_many`, which routes the policy's r input to the mean of the model's own
    r over `fit_contexts` (spec Track 4: r routed to zero or its mean; the mean keeps the
    policy's input in range).

    Args:
        model: A trained reference model.
        name: Name in result rows.
        length: Corridor length the model was trained on.
        horizon: Horizon the model was trained on.
        fit_contexts: Contexts (train split) whose mean own r the ablation uses.
    """

    ablation_kind = "r routed to the mean of the model's own r over train contexts"

    def __init__(
        self,
        model: Any,
        name: str,
        length: int,
        horizon: int,
        fit_contexts: Sequence[StepContext],
    ) -> None:
        super().__init__(model, name, length, horizon)
        with torch.no_grad():
            self.mean_r = self._soft(fit_contexts).mean(0)

    def accepts(self, length: int, horizon: int) -> str | None:
        """None when a world of this size can be encoded, else why not."""
        if (length, horizon) != (self._length, self._horizon):
            return (
                f"the reference encoder is sized for a {self._length}-cell corridor with "
                f"horizon {self._horizon}; this world has {length} cells, horizon {horizon}"
            )
        return None

    def _batch(self, contexts: Sequence[StepContext]) -> torch.Tensor:
        width = max(len(c.observations) for c in contexts)
        rows = []
        for c in contexts:
            enc = [encode_observation(o, self._length, self._horizon) for o in c.observations]
            rows.append(enc + [enc[-1]] * (width - len(enc)))  # right padding; read at t
        return torch.tensor(rows)

    def _encode_at_t(self, contexts: Sequence[StepContext]) -> tuple[torch.Tensor, torch.Tensor]:
        h, logits = self.model.encode(self._batch(contexts))
        rows, idx = torch.arange(len(contexts)), torch.tensor([c.t for c in contexts])
        return h[rows, idx], logits[rows, idx]

    def _encode_shared(self, contexts: Sequence[StepContext]) -> tuple[torch.Tensor, torch.Tensor]:
        """`_encode_at_t`, encoding each trace's history once instead of once per context.

        The encoder is causal, so the state at step t of a trace's longest context equals the
        state of any context that is a prefix of it: Track 1 asks K counterfactuals per step of
        every step, and this turns K x steps sequence passes per trace into one (the same work
        a hand-written batched forward does). Falls back to `_encode_at_t` when some context is
        not a prefix of its trace's longest one, or when forward hooks are attached (Track 2's
        injections address batch rows one per context).
        """
        if self.model.gru._forward_hooks or self.model.gru._forward_pre_hooks:
            return self._encode_at_t(contexts)
        longest: dict[str, StepContext] = {}
        for c in contexts:
            known = longest.get(c.trace_id)
            if known is None or c.t > known.t:
                longest[c.trace_id] = c
        for c in contexts:
            full = longest[c.trace_id].observations
            if c.observations != full[: len(c.observations)]:
                return self._encode_at_t(contexts)
        representatives = list(longest.values())
        row = {c.trace_id: i for i, c in enumerate(representatives)}
        h, logits = self.model.encode(self._batch(representatives))
        rows = torch.tensor([row[c.trace_id] for c in contexts])
        steps = torch.tensor([c.t for c in contexts])
        return h[rows, steps], logits[rows, steps]

    def _soft(self, contexts: Sequence[StepContext]) -> torch.Tensor:
        return soft_report(self._encode_at_t(contexts)[1])

    def _policy(self, h: torch.Tensor, r: torch.Tensor) -> list[dict[str, float]]:
        p = torch.softmax(self.model.policy_logits(h, r).double(), -1)
        p = p / p.sum(-1, keepdim=True)
        # One `tolist` instead of a tensor element access per action: same floats, far fewer calls.
        return [dict(zip(ACTIONS, row, strict=True)) for row in p.tolist()]

    def emit_many(self, contexts: Sequence[StepContext]) -> list[SelfReport]:
        """`emit_r` for many contexts in one forward pass."""
        with torch.no_grad():
            soft = self._soft(contexts)
        return [
            SelfReport(
                goal=GOALS[int(s[0:2].argmax())],  # type: ignore[arg-type]
                belief=DOOR_STATES[int(s[2:4].argmax())],  # type: ignore[arg-type]
                planned_next=ACTIONS[int(s[4:7].argmax())],  # type: ignore[arg-type]
                confidence=float(s[7]),
                caused_by_self=None if c.t == 0 else float(s[8]),
            )
            for c, s in zip(contexts, soft, strict=True)
        ]

    def act_many(
        self, contexts: Sequence[StepContext], overrides: Sequence[SelfReport | None]
    ) -> list[dict[str, float]]:
        """`act` for many contexts in one forward pass (do(r := r') where given)."""
        with torch.no_grad():
            h, logits = self._encode_shared(contexts)
            r = soft_report(logits)
            given = [i for i, o in enumerate(overrides) if o is not None]
            if given:
                r[given] = torch.tensor(
                    [encode_report(overrides[i]) for i in given],  # type: ignore[arg-type]
                    dtype=r.dtype,
                )
            return self._policy(h, r)

    def act_zero_r_many(self, contexts: Sequence[StepContext]) -> list[dict[str, float]]:
        """Spec Track 4's ablation: the policy reads r routed to zero (an all-zero r input)."""
        with torch.no_grad():
            h, _ = self._encode_shared(contexts)
            return self._policy(h, torch.zeros_like(self.mean_r).expand(len(contexts), -1))

    def act_without_r_many(self, contexts: Sequence[StepContext]) -> list[dict[str, float]]:
        """No-r ablation: the policy reads the mean r instead of its own."""
        with torch.no_grad():
            h, _ = self._encode_shared(contexts)
            return self._policy(h, self.mean_r.expand(len(contexts), -1))

    def hook_layers(self) -> list[nn.Module]:
        """The GRU (its output is a tuple: sequence, final state)."""
        return [self.model.gru]

    def slot_probability(
        self, contexts: Sequence[StepContext], slot: str, value: str
    ) -> np.ndarray:
        """Soft r-head probability of the slot value (a fresh forward pass: hooks apply)."""
        with torch.no_grad():
            return self._soft(contexts)[:, _SLOT_INDEX[(slot, value)]].double().numpy()

    def read_positions(self, contexts: Sequence[StepContext]) -> list[int]:
        """The r head reads the GRU output at step t."""
        return [c.t for c in contexts]

    def step_starts(self, contexts: Sequence[StepContext]) -> list[int]:
        """One sequence position per step."""
        return [c.t for c in contexts]


CONCEPTS: tuple[tuple[str, str, str], ...] = (
    ("goal", "right", "left"),
    ("belief", "closed", "open"),
)
"""(slot, injected value, the value it is injected into)."""
HEADLINE_ALPHA = 1.0
"""The declared strength of the headline AUC, relative to the layer's RMS hidden-state norm."""


def mann_whitney_auc(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """AUC = P(X > Y) + 1/2 P(X = Y) over all pairs; vectorised over leading axes.

    Equals U / (n_x n_y) of the Mann-Whitney U statistic (Hanley & McNeil 1982).
    """
    diff = x[..., :, None] - y[..., None, :]
    return (np.sign(diff) + 1).mean(axis=(-1, -2)) / 2


def _label(trace: Trace, index: int, slot: str) -> str:
    """The true slot value at the trace's `index`-th evaluated step (not its step number t)."""
    return getattr(trace.steps[index].r, slot)


def _fit_contexts(traces: Sequence[Trace], limit: int) -> list[tuple[StepContext, Trace, int]]:
    out = []
    for trace in traces[:limit]:
        for index, step in enumerate(trace.steps):
            out.append((trace.context(step.t), trace, index))
    return out


def concept_directions(
    box: WhiteBox, fit_traces: Sequence[Trace], *, fit_limit: int = 200
) -> dict[tuple[int, str], dict[str, Any]]:
    """Unit concept directions and activation scales per (layer index, slot)."""
    fit = _fit_contexts(fit_traces, fit_limit)
    contexts = [c for c, _, _ in fit]
    out: dict[tuple[int, str], dict[str, Any]] = {}
    for li, layer in enumerate(box.hook_layers()):
        with capture(layer, box.read_positions(contexts)) as seen:
            box.slot_probability(contexts, "goal", "right")
        h = seen[0]
        scale = float(h.pow(2).sum(-1).mean().sqrt())
        for slot, pos, _neg in CONCEPTS:
            mask = torch.tensor([_label(tr, t, slot) == pos for _, tr, t in fit])
            if mask.all() or not mask.any():
                continue
            d = h[mask].mean(0) - h[~mask].mean(0)
            out[(li, slot)] = {"unit": d / d.norm(), "norm": float(d.norm()), "scale": scale}
    return out
