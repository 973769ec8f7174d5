"""TRB, the Trace AI Reflection Benchmark: does a self-representation govern action?"""

__all__: list[str] = []
