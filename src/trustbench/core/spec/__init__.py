"""The experiment spec and the frozen manifest made from it.

`_spec` reads and validates a spec (strict values, SDK defaults, hints for typos), `_values` its
strict numbers and the credentials it names, `_manifest` freezes it into a manifest (hashes of
every input, versions, gates, the seeded plan) and checks a frozen run against it. Its public
names are `trustbench.core`'s.
"""
