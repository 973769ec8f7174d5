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

Found without running. Only a freeze imports the entry (to check it names a factory). The files
are found from the sources (`entry_code_items`): `verify` and `report` never execute candidate
code, and `run` compares the files with the manifest before the candidate is imported, since a
module that ran first could patch the very hashing that judges it.
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


def entry_code_items(entry: str, where: str) -> list[ResolvedItem]:
    """The files pinning an `entry`'s code, found without importing (executing) any of it.

    `verify` and `report` re-hash these and `run` compares them with the manifest before the
    candidate is imported: a module that ran first could patch the hashing that judges it (a
    helper edited to replace `hash_items` made `verify` say "intact"). So the package is found
    with `find_spec` on the top-level name alone (a dotted name would import the parents) and
    the factory's file by reading the sources (`factory_file`). First item: the factory's file
    (role `candidate_code`, named by the entry); then the package (see the module docstring).

    Raises:
        InputError: naming the candidate's `entry` when its module cannot be found.
    """
    module_name, _, attribute = entry.partition(":")
    top_name = module_name.partition(".")[0]
    top = _module_spec(top_name)
    factory = factory_file(module_name, attribute)
    if top is None or factory is None:
        raise InputError(f"cannot find the module of {entry!r}", location=f"{where} entry")
    items = [ResolvedItem("candidate_code", entry, path=factory)]
    if top.submodule_search_locations is not None:
        roots = [(top_name, Path(p)) for p in top.submodule_search_locations]
    else:  # a lone module: it and the siblings it imports (the factory's file may lie elsewhere)
        roots = list(_imported_siblings(Path(top.origin) if top.origin else factory))
    outer = _package_root(factory)
    if outer is not None and not any(factory.is_relative_to(root) for _, root in roots):
        roots.append((outer.name, outer))  # a factory re-exported from another package
    return items + _package_items(top_name, roots)


def _package_root(path: Path) -> Path | None:
    """The top-level package folder holding the module file `path` (None outside a package).

    Code outside the standard library and installed distributions is pinned file by file, so a
    factory re-exported from another package of the user's pins that package as a whole.
    """
    if _in_stdlib(str(path)) or any(
        path.resolve().is_relative_to(Path(site).resolve())
        for key in ("purelib", "platlib")
        if (site := sysconfig.get_path(key))
    ):
        return None
    folder, root = path.parent, None
    while (folder / "__init__.py").is_file():
        root, folder = folder, folder.parent
    return root


def _module_spec(name: str) -> importlib.machinery.ModuleSpec | None:
    """A module's spec, its parents searched by path rather than imported."""
    parts = name.split(".")
    try:
        spec = importlib.util.find_spec(parts[0])  # a top-level name imports nothing
        for depth in range(1, len(parts)):
            if spec is None or spec.submodule_search_locations is None:
                return None
            spec = importlib.machinery.PathFinder.find_spec(
                ".".join(parts[: depth + 1]), list(spec.submodule_search_locations)
            )
    except (ImportError, ValueError):
        return None
    return spec


def factory_file(module_name: str, attribute: str, depth: int = 0) -> Path | None:
    """The source file defining `module_name.attribute`, read from the sources, not imported.

    The last top-level binding of the name decides: a `from X import name` is followed (up to
    eight modules deep) to X's file, anything else (def, class, assignment) is this module's.
    """
    spec = _module_spec(module_name)
    if spec is None or not spec.origin or not spec.has_location:
        return None
    origin = Path(spec.origin)
    try:
        tree = ast.parse(origin.read_bytes())
    except (SyntaxError, ValueError, OSError):
        return origin
    is_package = spec.submodule_search_locations is not None
    package = module_name if is_package else module_name.rpartition(".")[0]
    source: tuple[str, str] | None = None
    for node in _module_level(tree.body):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name) == attribute:
                    source = (_absolute(node, package), alias.name)
        elif attribute in _bound_names(node):
            source = None
    if source is None or not source[0] or depth >= 8:
        return origin
    return factory_file(*source, depth=depth + 1) or origin


def _module_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """A module's statements in source order, those inside its top-level `if` and `try` too.

    A package may name some of its imports under `if TYPE_CHECKING:` only; they count too.
    """
    for node in body:
        if isinstance(node, ast.If):
            yield from _module_level([*node.body, *node.orelse])
        elif isinstance(node, ast.Try):
            handlers = [statement for handler in node.handlers for statement in handler.body]
            # A handler binds only when the body failed: the body's binding is the one to keep.
            yield from _module_level([*handlers, *node.body, *node.orelse, *node.finalbody])
        else:
            yield node


def _absolute(node: ast.ImportFrom, package: str) -> str:
    """The absolute module name a `from ... import` reads from (empty when it leaves the tree)."""
    if not node.level:
        return node.module or ""
    parts = package.split(".") if package else []
    if node.level - 1 > len(parts) or not parts:
        return ""
    base = parts[: len(parts) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _bound_names(node: ast.stmt) -> set[str]:
    """Names a top-level statement other than `from ... import` binds."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {node.name}
    if isinstance(node, ast.Import):
        return {(alias.asname or alias.name).partition(".")[0] for alias in node.names}
    targets = node.targets if isinstance(node, ast.Assign) else []
    if isinstance(node, ast.AnnAssign | ast.AugAssign):
        targets = [node.target]
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _package_items(top_name: str, roots: list[tuple[str, Path]]) -> list[ResolvedItem]:
    """Every file under the package's folders (or the sibling modules), named from `top_name`."""
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
    folders not entered, as `rglob` does; a folder that cannot be read is skipped, as `os.walk`
    skips it. Walked with `os.scandir`, whose entries know their type from the listing, as a
    run re-lists the whole package at start-up: `rglob` makes a `Path` per entry and `os.walk`
    needs a `stat` per file (16, 8 and 4 ms for the 920 files of trustbench itself).
    """
    if root.is_file():
        yield (), root
        return
    if "__pycache__" in root.parts:
        return
    found: list[tuple[str, ...]] = []
    _list_files(str(root), (), found)
    for parts in sorted(found):
        yield parts, root.joinpath(*parts)


def _list_files(folder: str, base: tuple[str, ...], found: list[tuple[str, ...]]) -> None:
    """Add to `found` the parts of every file below `folder` (see `_files`)."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        if entry.is_dir():
            if entry.name != "__pycache__" and not entry.is_symlink():
                _list_files(entry.path, (*base, entry.name), found)
        elif entry.is_file() and os.path.splitext(entry.name)[1] != ".pyc":
            found.append((*base, entry.name))


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
