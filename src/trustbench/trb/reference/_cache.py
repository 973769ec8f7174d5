"""Train-on-first-use checkpoint cache for the reference models, verified by SHA-256.

Checkpoints live under `$TRUSTBENCH_CACHE/trb/models` (default `~/.cache/trustbench`), named
`<name>-<key>.pt` where the key hashes everything that determines the weights: the model
name and objective, the training config, the train split's hash and the torch version. A
sidecar JSON records the checkpoint's SHA-256; a checkpoint whose bytes no longer match is
refused, not silently used or overwritten.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
from pathlib import Path
from typing import Any

import torch

from trustbench.core._ledger_integrity import cache_root
from trustbench.errors import CheckFailed, InputError
from trustbench.trb.corpus._format import CorpusManifest, Trace, canonical_sha256, trace_sha256
from trustbench.trb.corpus._store import assert_trainable
from trustbench.trb.reference._model import ReferenceNativeModel
from trustbench.trb.reference._train import Objective, TrainConfig, train_reference_model

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
    (`trb.measures._gap.seed_trace_gap_figure`) pairs the full and ablation models of a seed.

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
