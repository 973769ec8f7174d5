"""Reference native models (torch, CPU, seeded): the Trace-AI ablation and full pair."""

from __future__ import annotations

from trustbench.trb.reference._model import NativeModelAdapter, ReferenceNativeModel
from trustbench.trb.reference._train import (
    REFERENCE_MODELS,
    TrainConfig,
    cache_dir,
    load_reference_model,
    load_reference_seeds,
    train_reference_model,
)

__all__ = [
    "REFERENCE_MODELS",
    "NativeModelAdapter",
    "ReferenceNativeModel",
    "TrainConfig",
    "cache_dir",
    "load_reference_model",
    "load_reference_seeds",
    "train_reference_model",
]
