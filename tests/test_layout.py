"""Layout contracts: one direction of imports, no cycles, one public home per name, a light CLI."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from tests.support.child_env import child_env
from tests.support.import_graph import PACKAGE_ROOT, cycles, import_graph, with_package_inits

import trustbench

HEAVY = ("torch", "scipy", "statsmodels", "ray", "transformers", "matplotlib", "cedarpy", "sklearn")
"""Dependencies a command must import only when it needs them."""


def test_no_import_cycle_even_through_imports_inside_functions() -> None:
    found = cycles(import_graph(lazy_too=True))
    assert found == [], f"import cycles: {found}"


def test_no_import_cycle_between_packages_counting_the_inits_an_import_runs() -> None:
    found = cycles(with_package_inits(import_graph()))
    assert found == [], f"import cycles through package __init__s: {found}"


def test_core_imports_nothing_from_either_suite() -> None:
    graph = import_graph(lazy_too=True)
    leaks = {
        (module, target)
        for module, targets in graph.items()
        if module.startswith("trustbench.core")
        for target in targets
        if target.startswith(("trustbench.rtb", "trustbench.trb"))
    }
    assert leaks == set()


def test_providers_import_nothing_from_core() -> None:
    graph = import_graph(lazy_too=True)
    leaks = {
        (module, target)
        for module, targets in graph.items()
        if module.startswith("trustbench.providers")
        for target in targets
        if target.startswith("trustbench.core")
    }
    assert leaks == set()


@pytest.mark.parametrize(
    "folder",
    [
        "rtb/corpus", "rtb/review", "rtb/control", "rtb/workflow", "rtb/human", "rtb/platform",
        "rtb/boundaries", "trb/adapter", "trb/world", "trb/corpus", "trb/reference", "trb/proxy",
        "trb/measures", "trb/track", "trb/profile", "trb/instruments",
    ],
)  # fmt: skip
def test_each_part_of_the_layout_is_a_package(folder: str) -> None:
    assert (PACKAGE_ROOT / folder / "__init__.py").is_file()


def test_no_second_folder_is_named_like_the_first() -> None:
    names = {path.stem for path in (PACKAGE_ROOT / "trb").iterdir()}
    assert not names & {"_track", "tracks", "_tracks", "worlds"}
    assert not (PACKAGE_ROOT / "rtb" / "_review_track").exists()


def _imported_after(code: str, tmp: Path) -> set[str]:
    probe = (
        "import sys\n"
        f"try:\n    {code}\nexcept SystemExit:\n    pass\n"
        f"print('HEAVY=' + ','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True, text=True, check=True, env=child_env(tmp),
    )  # fmt: skip
    line = next(x for x in reversed(result.stdout.splitlines()) if x.startswith("HEAVY="))
    return set(filter(None, line.removeprefix("HEAVY=").split(",")))


def test_importing_the_cli_imports_no_heavy_dependency(tmp_path: Path) -> None:
    assert _imported_after("import trustbench.cli", tmp_path) == set()


@pytest.mark.parametrize("argv", [["--help"], ["version"], ["rtb", "--help"], ["trb", "--help"]])
def test_help_and_version_import_no_heavy_dependency(argv: list[str], tmp_path: Path) -> None:
    code = f"sys.argv = ['trustbench', *{argv!r}]; import trustbench.cli; trustbench.cli.main()"
    assert _imported_after(code, tmp_path) == set()


LOADED_ON_USE = ("numpy", "asyncio", "trustbench.core.report", "trustbench.trb.collect")
"""What the top-level help and `version` must not import (0.15 s for numpy; 10 to 20 ms for
asyncio with ssl; the report's page models; the TRB collection and corpus models behind
`trb collect`): `trustbench.core`, which every command imports, loads them in the functions
that use them (issue 47)."""


@pytest.mark.parametrize("argv", [["--help"], ["version"]])
def test_help_and_version_leave_numpy_the_report_and_trb_collect_unimported(
    argv: list[str], tmp_path: Path
) -> None:
    probe = (
        "import sys, io, contextlib\n"
        f"sys.argv = ['trustbench', *{argv!r}]\n"
        "import trustbench.cli\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n        trustbench.cli.main()\n    except SystemExit:\n        pass\n"
        f"print('LOADED=' + ','.join(m for m in {LOADED_ON_USE!r} if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True, text=True, check=True, env=child_env(tmp_path),
    )  # fmt: skip
    assert result.stdout.strip() == "LOADED=", result.stdout


def test_trb_help_still_lists_the_collect_group_built_on_lookup(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "trustbench", "trb", "--help"],
        capture_output=True, text=True, check=True, env=child_env(tmp_path),
    )  # fmt: skip
    commands = result.stdout.split("Commands:", 1)[1].split()
    assert "collect" in commands and "smoke" in commands


@pytest.mark.parametrize(
    "package",
    ["trustbench.core", "trustbench.providers", "trustbench.rtb", "trustbench.trb",
     "trustbench.rtb.corpus", "trustbench.trb.track", "trustbench.trb.measures"],
)  # fmt: skip
def test_every_public_name_of_a_package_resolves(package: str) -> None:
    module = __import__(package, fromlist=["__all__"])
    missing = [name for name in module.__all__ if getattr(module, name, None) is None]
    assert missing == []


def test_an_unknown_attribute_of_a_package_is_an_attribute_error() -> None:
    core = importlib.import_module("trustbench.core")
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        _ = core.not_a_name


def _public_modules() -> list[str]:
    """Every module and package of trustbench with no underscored part in its dotted name."""
    found = pkgutil.walk_packages(trustbench.__path__, "trustbench.")
    public = [i.name for i in found if not any(p.startswith("_") for p in i.name.split("."))]
    return ["trustbench", *sorted(public)]


def test_each_public_name_has_one_home() -> None:
    """A name (the same object) is in the `__all__` of one public module only (layout v4).

    Two import paths for one object are two things a reader must check are the same, and two
    lists to keep in step; re-export shims and whole-package re-exports made 52 such names.
    """
    homes: defaultdict[tuple[str, int], list[str]] = defaultdict(list)
    for module_name in _public_modules():
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", ()):
            homes[name, id(getattr(module, name))].append(module_name)
    twice = {name: modules for (name, _), modules in homes.items() if len(modules) > 1}
    assert twice == {}, f"exported from more than one public module: {twice}"


def _readme_layout_packages() -> dict[str, str]:
    """Folder -> its line in README's layout map (the tree in the `## Layout` section)."""
    readme = (PACKAGE_ROOT.parents[1] / "README.md").read_text()
    section = readme.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    tree = section.split("```", 2)[1]
    entries: dict[str, str] = {}
    parents: list[tuple[int, str]] = []
    for line in tree.splitlines()[1:]:
        stripped = line.lstrip()
        name = stripped.split(" ", 1)[0]
        if not name.endswith("/") or name == "src/trustbench/":
            continue
        indent = len(line) - len(stripped)
        while parents and parents[-1][0] >= indent:
            parents.pop()
        path = "/".join([p for _, p in parents] + [name.rstrip("/")])
        parents.append((indent, name.rstrip("/")))
        entries[path] = stripped[len(name) :].strip()
    return entries


def test_readme_layout_names_every_package_and_no_other() -> None:
    packages = {
        str(init.parent.relative_to(PACKAGE_ROOT))
        for init in PACKAGE_ROOT.rglob("__init__.py")
        if init.parent != PACKAGE_ROOT
    }
    listed = _readme_layout_packages()
    assert set(listed) == packages, (
        f"missing from README's layout: {sorted(packages - set(listed))}; "
        f"listed but not a package: {sorted(set(listed) - packages)}"
    )
    assert all(listed.values()), f"a package line without its job: {listed}"
