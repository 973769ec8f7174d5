"""trustbench: measure whether an AI system's safeguards and stated reasoning govern what happens.

Two benchmarks share one harness:

- RTB, the Recursive Trust Benchmark (`trustbench.rtb`): reviewer comparison, control-path testing
  of an enforcement boundary, and end-to-end agent workflows.
- TRB, the Trace AI Reflection Benchmark (`trustbench.trb`): does a model's self-representation
  causally govern its actions?

The shared harness (`trustbench.core`) freezes experiments, runs trials, keeps a tamper-evident
ledger of every attempt, computes statistics and writes reports. From Python, `run_spec` (or
`await run_spec_async`) freezes, runs and reports one experiment; see `docs/python-api.md`.
"""

from typing import TYPE_CHECKING

from trustbench._lazy import lazy_exports

if TYPE_CHECKING:
    from trustbench.core import ExperimentResult, run_spec, run_spec_async

__version__ = "0.1.0"
__all__ = ["ExperimentResult", "__version__", "run_spec", "run_spec_async"]

__getattr__, __dir__ = lazy_exports(__name__, __file__)
