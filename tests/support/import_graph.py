"""The static import graph of the `trustbench` package, read from source with `ast`.

By default edges are the imports a module executes when it is imported: module-level statements,
including those inside module-level `if`/`try` blocks, but not imports inside functions. With
`lazy_too` the imports inside functions count as well: a cycle through a deliberately lazy import
is still a cycle in the design. Imports under `if TYPE_CHECKING:` never count (never executed).
`from pkg import name` is an edge to `pkg.name` when that is a module, else to `pkg`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parents[2] / "src" / "trustbench"


def module_files(root: Path = PACKAGE_ROOT) -> dict[str, Path]:
    """Every module of the package: dotted name -> file."""
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = ("trustbench", *path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _executed_imports(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                yield from _executed_imports(node.body)
            yield from _executed_imports(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody):
                yield from _executed_imports(block)
            for handler in node.handlers:
                yield from _executed_imports(handler.body)


def _all_imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import anywhere in the tree (function bodies too), except type-checking-only ones."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            for other in node.orelse:
                yield from _all_imports(other)
        else:
            yield from _all_imports(node)


def _targets(node: ast.Import | ast.ImportFrom, modules: dict[str, Path]) -> Iterator[str]:
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield alias.name
        return
    base = node.module or ""
    for alias in node.names:
        candidate = f"{base}.{alias.name}"
        yield candidate if candidate in modules else base


def import_graph(*, lazy_too: bool = False) -> dict[str, set[str]]:
    """Module -> the `trustbench` modules it imports (module level only unless `lazy_too`)."""
    modules = module_files()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        nodes = _all_imports(tree) if lazy_too else _executed_imports(tree.body)
        graph[name] = {
            target
            for node in nodes
            for target in _targets(node, modules)
            if target.startswith("trustbench") and target != name
        }
    return graph


def with_package_inits(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """`graph` plus the package `__init__`s each import runs first.

    Importing `a.b._c` executes `a/__init__.py` and `a/b/__init__.py` before `_c`, and those
    import their public names. So a module that imports a sibling package's private module
    depends on that whole package: the edge the plain graph misses, and the one that makes
    `ImportError: ... partially initialized module` when two packages' `__init__`s import each
    other. A package's own modules are not given edges to their own ancestors (importing them
    from inside runs nothing new).
    """
    packages = {name for name, path in module_files().items() if path.name == "__init__.py"}
    widened: dict[str, set[str]] = {}
    for module, targets in graph.items():
        ancestors = {
            ".".join(target.split(".")[:depth])
            for target in targets
            for depth in range(1, target.count(".") + 1)
        }
        widened[module] = targets | {
            package
            for package in ancestors & packages
            if module != package and not module.startswith(package + ".")
        }
    return widened


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in graph:
                continue
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found
