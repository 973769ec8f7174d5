"""A validation problem (file + JSON pointer + message), shared by every corpus check.

A leaf module, so the policies' structural checks can report problems without importing the
schema machinery that in turn asks the policies for their models.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict


class Problem(BaseModel):
    """One validation problem: which file, where in it, and what is wrong."""

    model_config = ConfigDict(use_attribute_docstrings=True, frozen=True)

    file: str
    """Path relative to the corpus root (POSIX), e.g. `cases/dns_changes-01-permitted.json`."""
    pointer: str = ""
    """RFC 6901 JSON pointer inside the file; empty when the problem concerns the whole file."""
    message: str
    """What is wrong and, where useful, how to fix it."""

    def __str__(self) -> str:
        where = f"{self.file}: {self.pointer}" if self.pointer else self.file
        return f"{where}: {self.message}"


def json_pointer(parts: Iterable[str | int]) -> str:
    """RFC 6901 JSON pointer for a path of keys and indices (`~` and `/` escaped)."""
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in parts)


def duplicate_case_ids(case_files: Iterable[tuple[str, Any]]) -> list[Problem]:
    """A problem for each case file whose case id an earlier file already used (any policy)."""
    first_seen: dict[str, str] = {}
    problems = []
    for rel, case in case_files:
        if case.case_id in first_seen:
            problems.append(
                Problem(
                    file=rel,
                    pointer="/case_id",
                    message=f"duplicate case id {case.case_id!r} "
                    f"(also in {first_seen[case.case_id]})",
                )
            )
        first_seen.setdefault(case.case_id, rel)
    return problems
