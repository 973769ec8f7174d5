"""trustbench: measure whether an AI system's safeguards and stated reasoning govern what happens.

Two benchmarks share one harness:

- RTB, the Recursive Trust Benchmark (`trustbench.rtb`): reviewer comparison, control-path testing
  of an enforcement boundary, and end-to-end agent workflows.
- TRB, the Trace AI Reflection Benchmark (`trustbench.trb`): does a model's self-representation
  causally govern its actions?

The shared harness (`trustbench.core`) freezes experiments, runs trials, keeps a tamper-evident
ledger of every attempt, computes statistics and writes reports. From Python,
`trustbench.core.run_spec` (or `await trustbench.core.run_spec_async`) freezes, runs and reports
one experiment; see `docs/python-api.md`. This package exports only `__version__`: importing it
(which every `trustbench.*` import does) must not import the harness.
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
