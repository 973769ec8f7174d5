"""RTB, the Recursive Trust Benchmark: reviewer, control-path and workflow tracks.

The corpus API: `load_corpus` / `validate_corpus` read a corpus folder (the built-in starter by
default), `export_candidate_inputs` prepares what reviewers see, and `find_leaks` with
`grader_only_values` scans any candidate-visible payload for answer-key information.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trustbench._lazy import lazy_exports
from trustbench.rtb import corpus

if TYPE_CHECKING:
    from trustbench.rtb.corpus import *  # noqa: F403  (the corpus API, listed once there)

__all__: list[str] = []
__all__ += corpus.__all__

__getattr__, __dir__ = lazy_exports(__name__, __file__)
