"""A command table whose sub-groups are imported on first lookup (the CLI's suite groups).

`trustbench run` needs the core commands only; building the `rtb` and `trb` groups imports every
suite command module and what those import at module level. Typer has no lazy groups, so the
top-level click group gets this mapping as its `commands`: the names are all there, in order, for
help pages, suggestions and shell completion, and a group is built (exactly as `add_typer` would
build it, with the top-level app's settings) when its value is first read. A suite group whose
sub-group's package is costly to import does the same (`trb collect`: its package builds the
collection and TRB corpus models, which `trustbench --help` has no use for).
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from typing import Any

import typer
from typer.core import TyperGroup

from trustbench._imports import import_object

CLI_SETTINGS: dict[str, Any] = {
    "pretty_exceptions_enable": False,
    "add_completion": False,
    # Plain (click) help, not typer's rich panels: those print `<bool>` beside every flag, as if
    # `--quiet` took a value; the plain formatter shows a type only where a value is expected.
    "rich_markup_mode": None,
}
"""The `trustbench` app's Typer settings, which every group built on first lookup is built with
(as when Typer builds the whole tree from the top-level app)."""


def lazy_group(lazy: dict[str, str]) -> type[TyperGroup]:
    """A Typer group class (`typer.Typer(cls=...)`) whose `lazy` sub-groups are built on lookup.

    Args:
        lazy: Sub-group name -> `module:attribute` of its Typer app; listed after the group's
            own commands, where Typer lists the groups it adds with `add_typer`.

    Returns:
        The group class.
    """

    class LazyGroup(TyperGroup):
        def __init__(self, **attrs: Any) -> None:
            super().__init__(**attrs)
            self.commands = LazyCommands(self.commands, lazy, CLI_SETTINGS)

    return LazyGroup


class LazyCommands(MutableMapping[str, Any]):
    """Name -> click command, the `lazy` groups built on first access, listed after the rest."""

    def __init__(
        self, commands: MutableMapping[str, Any], lazy: dict[str, str], settings: dict[str, Any]
    ) -> None:
        """Wrap `commands`; `lazy` maps a group name to the `module:attribute` of its Typer app.

        `settings` are the Typer settings of the app that holds the table (how the group is
        built, as `add_typer` on that app would).
        """
        self._built: dict[str, Any] = dict(commands)
        self._lazy = {name: target for name, target in lazy.items() if name not in self._built}
        self._settings = settings

    def __getitem__(self, name: str) -> Any:
        if name not in self._built and name in self._lazy:
            holder = typer.Typer(**self._settings)
            holder.add_typer(import_object(self._lazy[name], what="command group"), name=name)
            group = typer.main.get_group(holder)
            self._built[name] = group.commands[name]
        return self._built[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self._lazy.pop(name, None)
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        if name not in self:
            raise KeyError(name)
        self._lazy.pop(name, None)
        self._built.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        yield from (name for name in self._built if name not in self._lazy)
        yield from self._lazy

    def __len__(self) -> int:
        return len(self._built) + sum(name not in self._built for name in self._lazy)

    def __contains__(self, name: object) -> bool:
        return name in self._built or name in self._lazy
