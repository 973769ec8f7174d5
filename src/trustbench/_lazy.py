"""Lazy re-exports for package `__init__` modules (PEP 562), so importing a package costs nothing.

A package lists its public names once, as ordinary imports under `if TYPE_CHECKING:` (which type
checkers and editors read), plus `__all__`. A package that re-exports a whole lazy subpackage says
`from SUBPACKAGE import *` there and adds `SUBPACKAGE.__all__` to its own, so the list stands
once. At run time nothing under that block executes; instead `lazy_exports` reads the block from
the package's own source and resolves each name on first access. So `trustbench --help` does not
import torch, scipy or ray just because a command module lives in a package whose `__init__`
re-exports heavy code, and the public surface is still the one explicit list.
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _exports(init_file: str) -> dict[str, tuple[str, str]]:
    """Public name -> (module, attribute), from the `if TYPE_CHECKING:` imports of `init_file`.

    `from PACKAGE import *` stands for every name of that (lazy) package's `__all__`.
    """
    tree = ast.parse(Path(init_file).read_text(encoding="utf-8"), filename=init_file)
    exports: dict[str, tuple[str, str]] = {}
    for node in tree.body:
        if not (isinstance(node, ast.If) and _is_type_checking(node.test)):
            continue
        for statement in node.body:
            if isinstance(statement, ast.ImportFrom) and statement.module and statement.level == 0:
                for alias in statement.names:
                    if alias.name == "*":
                        star = importlib.import_module(statement.module).__all__
                        exports.update((name, (statement.module, name)) for name in star)
                    else:
                        exports[alias.asname or alias.name] = (statement.module, alias.name)
    return exports


def lazy_exports(
    package: str, init_file: str
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Build a package's module-level `__getattr__` and `__dir__` for its lazy public names.

    Args:
        package: The package's `__name__`.
        init_file: The package's `__file__` (its `__init__.py`), whose `if TYPE_CHECKING:` block
            lists `from MODULE import NAME` re-exports.

    Returns:
        `(__getattr__, __dir__)` to assign at the end of the `__init__`.
    """
    exports = _exports(init_file)
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str) -> Any:
        try:
            module, attribute = exports[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        value = getattr(importlib.import_module(module), attribute)
        namespace[name] = value  # resolved once; later lookups are plain attribute reads
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *exports})

    return __getattr__, __dir__
