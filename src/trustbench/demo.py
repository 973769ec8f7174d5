"""`trustbench demo`: the main job on built-in defaults (no network, no API keys)."""

from __future__ import annotations


def run_demo(out: str | None) -> None:
    """Run every built-in demonstration step and print where the results are."""
    raise NotImplementedError("demo steps arrive with the corpus")
