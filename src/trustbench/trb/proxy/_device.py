"""Device and dtype of a local model, validated before any weight is loaded."""

from __future__ import annotations

import torch

from trustbench.errors import InputError

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}
"""Weight dtypes the adapter accepts, by name."""


def resolve_device_dtype(
    device: str, dtype: str, location: str
) -> tuple[torch.device, torch.dtype]:
    """Validate a device and dtype name pair before any weight is loaded.

    Raises:
        InputError: an unknown name, or cuda asked for on a machine where torch has none
            (never a silent fall back to the CPU: the run would report numbers from another
            precision and speed than the one declared).
    """
    if dtype not in DTYPES:
        raise InputError(
            f"dtype {dtype!r} is not one of {', '.join(DTYPES)}", location=f"{location} (dtype)"
        )
    try:
        where = torch.device(device)
    except (RuntimeError, ValueError):
        where = None
    if where is None or where.type not in ("cpu", "cuda"):
        raise InputError(
            f"device {device!r} is not cpu, cuda or cuda:N", location=f"{location} (device)"
        )
    if where.type == "cuda":
        if not torch.cuda.is_available():
            raise InputError(
                f"device {device!r} requested but torch {torch.__version__} sees no CUDA device",
                location=f"{location} (device)",
            )
        if where.index is not None and where.index >= torch.cuda.device_count():
            raise InputError(
                f"device {device!r} requested but only {torch.cuda.device_count()} CUDA "
                "device(s) are visible",
                location=f"{location} (device)",
            )
    return where, DTYPES[dtype]
