"""Shared harness: freezing, ledger, runner, statistics, gates and reports; knows no suite."""

__all__: list[str] = []
