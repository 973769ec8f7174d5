"""Implementation of `trustbench.core.stats`; import from there, not from here."""
