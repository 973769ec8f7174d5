"""One constant decides the default corpus (`DEFAULT_VERSION`): every shipped RTB spec runs it.

The demos, the examples (reviewer, control, workflow, human sessions) and, through the demo
spec, `rtb review --model` name a built-in corpus; each must name the default, so moving the
default is one edit and a test that names every spec still out of step.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from trustbench.rtb.corpus._load import BUILTIN_VERSIONS, DEFAULT_VERSION

ROOT = Path(__file__).resolve().parents[2]
SHIPPED_SPECS = sorted(
    [
        *(ROOT / "examples").glob("rtb-*.toml"),
        *(ROOT / "src" / "trustbench" / "rtb" / "experiments").glob("demo_*.toml"),
    ]
)
ON_PURPOSE_ELSEWHERE = {"demo_loop.toml": "v0.2"}
"""Specs that run another corpus by design: the loop demo shows v0.2's reviewer in the loop."""


def test_every_shipped_rtb_spec_names_the_default_corpus_unless_declared_elsewhere() -> None:
    assert len(SHIPPED_SPECS) >= 10
    for spec_file in SHIPPED_SPECS:
        corpus = tomllib.loads(spec_file.read_text(encoding="utf-8"))["corpus"]
        expected = ON_PURPOSE_ELSEWHERE.get(spec_file.name, f"v{DEFAULT_VERSION}")
        corpus.pop("families", None)  # a declared subset of the same corpus (the demo's)
        assert corpus == {"builtin": expected}, spec_file.name


def test_the_default_is_the_newest_shipped_corpus() -> None:
    newest = max(BUILTIN_VERSIONS, key=lambda v: tuple(map(int, v.split("."))))
    assert newest == DEFAULT_VERSION
