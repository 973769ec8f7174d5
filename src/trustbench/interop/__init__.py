"""Interoperation with other evaluation tools (Inspect AI: the optional `inspect` extra).

This package may import `trustbench.core` and the suites; neither imports it. Inspect AI itself
is imported only when an interop function runs, so everything here loads without it.
"""

from __future__ import annotations

from trustbench.interop._inspect import export_inspect_logs, import_inspect_log
from trustbench.interop._rtb_export import ExportedReview, load_exported_review

__all__ = [
    "ExportedReview",
    "export_inspect_logs",
    "import_inspect_log",
    "load_exported_review",
]
