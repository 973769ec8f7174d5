"""trustbench: measure whether an AI system's safeguards and stated reasoning govern what happens.

Two benchmarks share one harness:

- RTB, the Recursive Trust Benchmark (`trustbench.rtb`): reviewer comparison, control-path testing
  of an enforcement boundary, and end-to-end agent workflows.
- TRB, the Trace AI Reflection Benchmark (`trustbench.trb`): does a model's self-representation
  causally govern its actions?

The shared harness (`trustbench.core`) freezes experiments, runs trials, keeps a tamper-evident
ledger of every attempt, computes statistics and writes reports.
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
