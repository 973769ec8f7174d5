"""Governed held-out sets: sealed answer keys, an exposure log, retirement.

See docs/held-out-sets.md.

A sealed set keeps what a candidate may see (exported inputs, the prompt, the response schema) in
the clear and everything only the grader may see (case files with their expectations and
authoring metadata, the evaluation-id map) encrypted to the set owner's X25519 public key, so a
candidate handed the folder cannot look an answer up.
"""
