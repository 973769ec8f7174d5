"""Seeded CPU training of the reference native model, with and without L_gov."""

from __future__ import annotations

import hashlib
import io
import json
import logging
import time
from pathlib import Path
from typing import Any, Literal

import torch
import torch.nn.functional as F
from pydantic import BaseModel, Field, StrictFloat, StrictInt

from trustbench._docstrings import documented
from trustbench.core import cache_root
from trustbench.errors import CheckFailed, InputError
from trustbench.trb.adapter._protocol import ACTIONS, DOOR_STATES, GOALS
from trustbench.trb.corpus._format import CorpusManifest, Trace, canonical_sha256, trace_sha256
from trustbench.trb.corpus._store import assert_trainable
from trustbench.trb.reference._model import (
    ReferenceNativeModel,
    encode_observation,
    encode_report,
    soft_report,
)

Objective = Literal["ablation", "full"]


class TrainConfig(BaseModel):
    """Hyper-parameters of one reference-model training run (all part of the cache key)."""

    model_config = documented(extra="forbid", frozen=True)

    hidden: StrictInt = Field(default=64, ge=4)
    """GRU and policy width."""
    epochs: StrictInt = Field(default=40, ge=1)
    """Passes over the training split."""
    batch_size: StrictInt = Field(default=128, ge=1)
    """Traces per optimisation step."""
    learning_rate: StrictFloat = Field(default=3e-3, gt=0)
    """Adam step size."""
    gov_weight: StrictFloat = Field(default=1.0, ge=0)
    """Weight of L_gov in the full objective (unused by the ablation)."""
    seed: StrictInt = 0
    """Seeds initialisation and batch order."""
    threads: StrictInt = Field(default=1, ge=1)
    """torch CPU threads (the machine is shared; keep small)."""


def _tensors(traces: list[Trace]) -> dict[str, torch.Tensor]:
    world = traces[0].world
    length, horizon = world.length, world.horizon
    obs = [[encode_observation(s.observation, length, horizon) for s in t.steps] for t in traces]
    steps = [t.steps for t in traces]
    return {
        "obs": torch.tensor(obs),
        "action": torch.tensor([[ACTIONS.index(s.action) for s in st] for st in steps]),
        "goal": torch.tensor([[GOALS.index(s.r.goal) for s in st] for st in steps]),
        "belief": torch.tensor([[DOOR_STATES.index(s.r.belief) for s in st] for st in steps]),
        "plan": torch.tensor([[ACTIONS.index(s.r.planned_next) for s in st] for st in steps]),
        "conf": torch.tensor([[s.r.confidence for s in st] for st in steps]),
        "cbs": torch.tensor([[s.r.caused_by_self or 0.0 for s in st] for st in steps]),
        "cbs_mask": torch.tensor([[s.r.caused_by_self is not None for s in st] for st in steps]),
        "cf_r": torch.tensor(
            [[[encode_report(c.r_prime) for c in s.counterfactuals] for s in st] for st in steps]
        ),
        "cf_phi": torch.tensor(
            [
                [[[c.continuation[a] for a in ACTIONS] for c in s.counterfactuals] for s in st]
                for st in steps
            ]
        ),
    }


def _losses(
    model: ReferenceNativeModel, b: dict[str, torch.Tensor], objective: Objective
) -> dict[str, torch.Tensor]:
    h, r_logits = model.encode(b["obs"])
    logits = model.policy_logits(h, soft_report(r_logits))
    l_trace = F.cross_entropy(logits.reshape(-1, len(ACTIONS)), b["action"].reshape(-1))
    ce = F.cross_entropy
    l_self = (
        ce(r_logits[..., 0:2].reshape(-1, 2), b["goal"].reshape(-1))
        + ce(r_logits[..., 2:4].reshape(-1, 2), b["belief"].reshape(-1))
        + ce(r_logits[..., 4:7].reshape(-1, 3), b["plan"].reshape(-1))
        + F.binary_cross_entropy_with_logits(r_logits[..., 7], b["conf"])
        + F.binary_cross_entropy_with_logits(
            r_logits[..., 8][b["cbs_mask"]], b["cbs"][b["cbs_mask"]]
        )
    )
    out = {"trace": l_trace, "selfrep": l_self}
    if objective == "full":
        k = b["cf_r"].shape[2]
        h_k = h.unsqueeze(2).expand(-1, -1, k, -1)
        log_q = torch.log_softmax(model.policy_logits(h_k, b["cf_r"]), dim=-1)
        phi = b["cf_phi"]
        # KL(Phi || pi) = sum Phi (log Phi - log pi); 0 log 0 := 0 via xlogy.
        kl = (torch.xlogy(phi, phi) - phi * log_q).sum(-1)
        out["gov"] = kl.mean()
    return out


def train_reference_model(
    traces: list[Trace], manifest: CorpusManifest, objective: Objective, config: TrainConfig
) -> tuple[ReferenceNativeModel, dict[str, Any]]:
    """Train one reference model on the train split (held-out traces are refused by hash).

    Args:
        traces: Training traces.
        manifest: Corpus manifest holding the held-out trace hashes.
        objective: `ablation` (L_trace + L_selfrep) or `full` (+ L_gov).
        config: Hyper-parameters.

    Returns:
        The trained model (eval mode) and a JSON-serialisable training summary.
    """
    assert_trainable(traces, manifest)
    delayed = next((t for t in traces if t.lead_in), None)
    if delayed is not None:  # `_tensors` reads evaluated steps only: the lead-in would vanish
        raise InputError(
            "the reference models train on undelayed traces only; this trace has a cue-delay "
            f"lead-in of {len(delayed.lead_in)} steps",
            location=delayed.trace_id,
        )
    torch.set_num_threads(config.threads)
    torch.manual_seed(config.seed)
    world = traces[0].world
    model = ReferenceNativeModel(world.length, world.horizon, config.hidden)
    data = _tensors(traces)
    opt = torch.optim.Adam(model.parameters(), lr=config.learning_rate)
    gen = torch.Generator().manual_seed(config.seed)
    n = len(traces)
    started = time.perf_counter()
    last: dict[str, float] = {}
    for _ in range(config.epochs):
        order = torch.randperm(n, generator=gen)
        for start in range(0, n, config.batch_size):
            idx = order[start : start + config.batch_size]
            batch = {k: v[idx] for k, v in data.items()}
            parts = _losses(model, batch, objective)
            loss = parts["trace"] + parts["selfrep"] + config.gov_weight * parts.get("gov", 0.0)
            opt.zero_grad()
            loss.backward()
            opt.step()
            last = {k: float(v.detach()) for k, v in parts.items()}
    model.eval()
    return model, {
        "objective": objective,
        "losses": "L_trace + L_selfrep" + (" + L_gov" if objective == "full" else ""),
        "final_batch_losses": last,
        "train_traces": n,
        "train_seconds": round(time.perf_counter() - started, 2),
        "config": config.model_dump(),
    }


# ------------------------------------------------------------------------------------------------
# Train-on-first-use checkpoint cache for the reference models, verified by SHA-256.
#
# Checkpoints live under `$TRUSTBENCH_CACHE/trb/models` (default `~/.cache/trustbench`), named
# `<name>-<key>.pt` where the key hashes everything that determines the weights: the model
# name and objective, the training config, the train split's hash and the torch version. A
# sidecar JSON records the checkpoint's SHA-256; a checkpoint whose bytes no longer match is
# refused, not silently used or overwritten.

_LOG = logging.getLogger(__name__)

REFERENCE_MODELS: dict[str, Objective] = {
    "trace-ai-ablation": "ablation",
    "trace-ai-full": "full",
}
"""Reference model names (spec baselines 4 and 5) and their training objectives."""


def cache_dir() -> Path:
    """`$TRUSTBENCH_CACHE/trb/models`, or `~/.cache/trustbench/trb/models`."""
    return cache_root() / "trb" / "models"


def load_reference_model(
    name: str, traces: list[Trace], manifest: CorpusManifest, config: TrainConfig
) -> tuple[ReferenceNativeModel, dict[str, Any]]:
    """Load a reference model by name, training and caching it on first use.

    Args:
        name: One of `REFERENCE_MODELS`.
        traces: The train split (used only when training is needed).
        manifest: The corpus manifest; held-out traces are refused by hash before a cached
            checkpoint is even looked up.
        config: Training config (part of the cache key).

    Returns:
        The model and its card: name, objective, checkpoint path and SHA-256, training summary.
    """
    if name not in REFERENCE_MODELS:
        raise InputError(f"unknown reference model {name!r}; known: {sorted(REFERENCE_MODELS)}")
    objective = REFERENCE_MODELS[name]
    assert_trainable(traces, manifest)
    # Hash the traces actually given, not a file name: the key follows the data.
    train_hash = canonical_sha256([trace_sha256(t) for t in traces])
    key = canonical_sha256(
        {
            "name": name,
            "objective": objective,
            "config": config.model_dump(),
            "train": train_hash,
            "torch": torch.__version__.split("+")[0],
        }
    )[:16]
    folder = cache_dir()
    weights, card_path = folder / f"{name}-{key}.pt", folder / f"{name}-{key}.json"
    world = traces[0].world
    if weights.exists() and card_path.exists():
        card = json.loads(card_path.read_text(encoding="utf-8"))
        digest = hashlib.sha256(weights.read_bytes()).hexdigest()
        if digest != card.get("sha256"):
            raise CheckFailed(
                f"checkpoint SHA-256 {digest[:12]}... differs from its card "
                f"{str(card.get('sha256'))[:12]}...; delete both files to retrain",
                location=str(weights),
            )
        model = ReferenceNativeModel(world.length, world.horizon, config.hidden)
        state = torch.load(io.BytesIO(weights.read_bytes()), weights_only=True)
        model.load_state_dict(state)
        model.eval()
        return model, {**card, "loaded_from_cache": True}
    # Minutes on a busy CPU: say so (the demo and `trb run` show this logger's lines).
    _LOG.info("training reference model %s on %d train traces (first use; cached after)",
              name, len(traces))  # fmt: skip
    model, summary = train_reference_model(traces, manifest, objective, config)
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    raw = buffer.getvalue()
    folder.mkdir(parents=True, exist_ok=True)
    weights.write_bytes(raw)
    card = {
        "name": name,
        "objective": objective,
        "checkpoint": weights.name,
        "sha256": hashlib.sha256(raw).hexdigest(),
        "cache_key": key,
        "training": summary,
    }
    card_path.write_text(json.dumps(card, indent=2), encoding="utf-8")
    return model, {**card, "loaded_from_cache": False}


def load_reference_seeds(
    name: str,
    traces: list[Trace],
    manifest: CorpusManifest,
    config: TrainConfig,
    seeds: list[int],
) -> list[tuple[ReferenceNativeModel, dict[str, Any]]]:
    """One reference model per training seed (`config` with its `seed` replaced), cached.

    Each seed is its own cache entry (the seed is part of the config, hence of the key), so
    adding a seed trains only that one. Delta_gov's seed-and-trace interval
    (`trb.measures._governance.seed_trace_gap_figure`) pairs the full and ablation models of a seed.

    Raises:
        InputError: no seeds, or a seed given twice (a duplicated seed would count one model
            twice and shrink the seed-level spread).
    """
    if not seeds or len(set(seeds)) != len(seeds):
        raise InputError(f"training seeds must be distinct and non-empty; got {seeds}")
    return [
        load_reference_model(name, traces, manifest, config.model_copy(update={"seed": s}))
        for s in seeds
    ]
