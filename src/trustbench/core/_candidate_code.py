"""An in-process candidate's code: which factory an `entry` may name, and what the manifest pins.

Which entry. `entry = "module:name"` must name a *candidate factory*: a Python function or class
(not a builtin, not a method of some object), defined in Python source outside the standard
library, that accepts one positional argument, the candidate's settings. That refuses
`os:system`, `subprocess:run` or `builtins:eval` (the standard library holds no candidate), and
anything that cannot be called as a factory, at freeze and with one line, instead of at run time
with a traceback.

What is pinned. Hashing only the entry's file misses the code it imports: a helper module edited
after the run changed the candidate while `verify` said "intact". So the manifest hashes the
candidate's code as a whole (role `candidate_package`): every file of the top-level package the
entry's module belongs to (all of it, data included, `__pycache__` left out), wherever it is
installed. A top-level module outside any package is pinned with the sibling modules and
packages it imports (found from its source, transitively, so the set does not depend on what a
process happened to import first). Code outside (the standard library, other installed
distributions) is pinned by the environment record's versions, not file by file.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.machinery
import importlib.util
import inspect
import os
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from trustbench._imports import import_object
from trustbench.core._track import ResolvedItem
from trustbench.errors import InputError

ROLE = "candidate_package"
"""Role of the files of a candidate's package in the manifest."""
MAX_FILES = 20_000
"""A package with more files than this is refused: name a factory in a smaller package."""


def _stdlib_dirs() -> tuple[Path, ...]:
    paths = sysconfig.get_paths()
    return tuple(Path(paths[key]).resolve() for key in ("stdlib", "platstdlib") if key in paths)


def _in_stdlib(source: str | None) -> bool:
    """Whether a module file lies in the standard library (not in site-packages)."""
    if source is None or source in ("built-in", "frozen"):
        return True
    path = Path(source).resolve()
    site = {Path(p).resolve() for key in ("purelib", "platlib") if (p := sysconfig.get_path(key))}
    if any(path.is_relative_to(s) for s in site):
        return False
    return any(path.is_relative_to(d) for d in _stdlib_dirs())


def _spec_in_stdlib(spec: importlib.machinery.ModuleSpec) -> bool:
    if spec.origin in (None, "namespace"):  # a namespace package: judge its folders
        return any(_in_stdlib(p) for p in spec.submodule_search_locations or [])
    return _in_stdlib(spec.origin)


def load_factory(entry: str, where: str) -> Any:
    """Import the factory an in-process candidate's `entry` names, refusing what is not one.

    Raises:
        InputError: naming the candidate's `entry` and the rule it breaks.
    """
    location = f"{where} entry"
    module_name, colon, attribute = entry.partition(":")
    if not colon or not module_name or not attribute:
        raise InputError(f"entry {entry!r} must be 'module:factory'", location=location)
    top = module_name.partition(".")[0]
    spec = None
    if top not in sys.stdlib_module_names and top not in sys.builtin_module_names:
        with contextlib.suppress(ImportError, ValueError):
            spec = importlib.util.find_spec(top)  # the top-level package: nothing runs yet
    if (
        top in sys.stdlib_module_names
        or top in sys.builtin_module_names
        or (spec is not None and _spec_in_stdlib(spec))
    ):
        raise InputError(
            f"entry {entry!r} names the standard library: an entry must name a candidate "
            "factory of your own code",
            location=location,
        )
    factory = import_object(entry, what=location)
    if not (inspect.isfunction(factory) or inspect.isclass(factory)):
        raise InputError(
            f"entry {entry!r} is a {type(factory).__name__}, not a factory (a Python function "
            "or class taking the candidate's settings)",
            location=location,
        )
    source = _source(factory)
    if source is None or _in_stdlib(source):
        raise InputError(
            f"entry {entry!r} is not defined in Python source outside the standard library",
            location=location,
        )
    try:
        inspect.signature(factory).bind({})
    except (TypeError, ValueError):
        raise InputError(
            f"entry {entry!r} cannot be called with one argument (the candidate's settings): "
            "not a candidate factory",
            location=location,
        ) from None
    return factory


def _source(factory: Any) -> str | None:
    try:
        return inspect.getsourcefile(factory)
    except TypeError:
        return None


def code_items(factory: Any) -> list[ResolvedItem]:
    """The files pinning `factory`'s code as a whole (see the module docstring)."""
    module = sys.modules.get(getattr(factory, "__module__", "") or "")
    top_name = (module.__name__ if module else "").partition(".")[0]
    top = sys.modules.get(top_name)
    roots: list[tuple[str, Path]] = []
    if top is not None and getattr(top, "__path__", None):
        roots = [(top_name, Path(p)) for p in top.__path__]
    elif module is not None and (module_file := getattr(module, "__file__", None)):
        roots = list(_imported_siblings(Path(module_file)))
    items: dict[str, ResolvedItem] = {}
    for prefix, root in roots:
        for parts, path in _files(root):
            name = f"{prefix}/{'/'.join(parts)}" if parts else prefix
            items.setdefault(name, ResolvedItem(ROLE, name, path=path))
            if len(items) > MAX_FILES:
                raise InputError(
                    f"the candidate's package {top_name!r} holds more than {MAX_FILES} files: "
                    "put the factory in a package of its own"
                )
    return list(items.values())


def _files(root: Path) -> Iterator[tuple[tuple[str, ...], Path]]:
    """Every file under `root`, in `sorted(root.rglob("*"))` order; no `__pycache__`, no `.pyc`.

    Each with its path's parts below `root` (none for a `root` that is a file): its name in the
    manifest, with no `relative_to` per file. Symbolic links to files are included, linked
    folders not entered, as `rglob` does. Walked with `os.walk` on strings, as a run re-lists
    the whole package at start-up: `rglob` makes a `Path` per entry (16 ms against 11 ms for
    the 900 files of trustbench itself).
    """
    if root.is_file():
        yield (), root
        return
    if "__pycache__" in root.parts:
        return
    found: list[tuple[str, ...]] = []
    for folder, subfolders, names in os.walk(root):
        subfolders[:] = [name for name in subfolders if name != "__pycache__"]
        base = tuple(Path(folder).relative_to(root).parts)
        found.extend(
            (*base, name)
            for name in names
            if os.path.splitext(name)[1] != ".pyc" and os.path.isfile(os.path.join(folder, name))
        )
    for parts in sorted(found):
        yield parts, root.joinpath(*parts)


def _imported_siblings(module_file: Path) -> Iterator[tuple[str, Path]]:
    """A top-level module and the sibling modules / packages it imports, transitively."""
    folder = module_file.parent
    pending, seen = [module_file], set()
    while pending:
        path = pending.pop()
        if path in seen:
            continue
        seen.add(path)
        yield path.name, path
        if not path.is_file():
            continue
        try:
            tree = ast.parse(path.read_bytes())
        except (SyntaxError, ValueError, OSError):
            continue
        for node in ast.walk(tree):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module]
                if isinstance(node, ast.ImportFrom) and node.module and not node.level
                else []
            )
            for name in names:
                top = name.partition(".")[0]
                for candidate in (folder / f"{top}.py", folder / top):
                    if candidate.exists() and candidate not in seen:
                        pending.append(candidate)
