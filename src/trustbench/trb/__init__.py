"""TRB, the Trace AI Reflection Benchmark: does a self-representation govern action?

Each public name has one home, its subpackage: the adapter contract (`trustbench.trb.adapter`:
`Adapter`, `AdapterTier`, `SelfReport`, `StepContext`, `OverrideUnsupported`, the conformance
kit), the exact reference world (`trustbench.trb.world`), the corpus format
(`trustbench.trb.corpus`), the tracks (1 and 3 in `trustbench.trb.track`; 2, 4, 5, 6 and the
governance gap in `trustbench.trb.measures`), the proxy adapters (`trustbench.trb.proxy`), the
oracle audit and Goodhart cheats (`trustbench.trb.instruments`), the reference run and the
five-baseline profile (`trustbench.trb.profile`). This package itself exports nothing, so that
a name is imported from one place only.
"""

__all__: list[str] = []
