"""RTB, the Recursive Trust Benchmark: reviewer, control-path and workflow tracks."""

__all__: list[str] = []
