"""RTB, the Recursive Trust Benchmark: reviewer, control-path and workflow tracks.

Each public name has one home, its subpackage. The corpus API is `trustbench.rtb.corpus`:
`load_corpus` / `validate_corpus` read a corpus folder (the built-in starter by default),
`export_candidate_inputs` prepares what reviewers see, and `find_leaks` with `grader_only_values`
scans any candidate-visible payload for answer-key information. This package itself exports
nothing, so that a name is imported from one place only.
"""

__all__: list[str] = []
