"""What the Hugging Face adapter benches share: their options and the SmolLM2 they load.

`bench.hf_emit` and `bench.hf_act` time the same model on the same generated eval traces, so
they read the same workload options and load it the same way.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from trustbench.trb.proxy import HFCausalLMProxyAdapter


def hf_parser(description: str) -> argparse.ArgumentParser:
    """A parser with the shared options: `--folder`, `--traces`, `--steps`, `--threads`,
    `--repeats`."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--folder", help="a dequantised SmolLM2 folder (default: smollm2_folder)")
    parser.add_argument("--traces", type=int, default=2)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=2)
    return parser


def load_smollm2(args: argparse.Namespace) -> HFCausalLMProxyAdapter:
    """SmolLM2 from `--folder` (default: `smollm2_folder()`), on `--threads` torch threads."""
    torch.set_num_threads(args.threads)
    if args.folder:
        folder = Path(args.folder)
    else:
        from trustbench.trb.proxy import smollm2_folder

        folder = smollm2_folder()
    return HFCausalLMProxyAdapter.from_path(folder, "smollm2")
