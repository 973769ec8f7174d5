"""The registry of TRB worlds: a corpus names its world by id, and everything asks this registry.

Built in: the windy corridor (`corridor`, the world of every corpus that names none) and the
text world (`text-ops`). A plug-in registers its own world with `register_world(world)` before
it writes or loads a corpus of it; a registered id is never replaced (core's `Registry`: call
`unregister_world` first), and a built-in one can be neither replaced nor removed.
"""

from __future__ import annotations

from trustbench.core import Registry
from trustbench.errors import InputError
from trustbench.trb.world._corridor import CORRIDOR_WORLD_ID, CorridorWorld
from trustbench.trb.world._protocol import World, declaration_sha256
from trustbench.trb.world._text import TEXT_WORLD_ID, TextWorld

DEFAULT_WORLD_ID = CORRIDOR_WORLD_ID
"""The world of a corpus whose manifest names none (every corpus written before worlds)."""

_WORLDS: Registry[World] = Registry(
    "TRB world",
    {CORRIDOR_WORLD_ID: CorridorWorld(), TEXT_WORLD_ID: TextWorld()},
    unregister_with="unregister_world",
)


def register_world(world: World) -> None:
    """Register a world under its declared id.

    Raises:
        AlreadyRegistered: the id is built in or registered already.
        InputError: the object does not satisfy the `World` protocol.
    """
    if not isinstance(world, World):
        raise InputError(
            f"{type(world).__name__} is not a TRB world: it needs `declaration`, "
            "`render_context` and `reference_continuation`",
            location="register_world",
        )
    _WORLDS.register(world.declaration.world_id, world)


def unregister_world(world_id: str) -> None:
    """Remove a registered world (a built-in one cannot be removed)."""
    _WORLDS.unregister(world_id)


def world_for(world_id: str) -> World:
    """The world registered under `world_id`.

    Raises:
        InputError: no world has that id (naming the registered ones).
    """
    world = _WORLDS.get(world_id)
    if world is None:
        raise InputError(
            f"unknown TRB world {world_id!r}; registered: {', '.join(_WORLDS.keys())}",
            location="world_id",
        )
    return world


def known_world_ids() -> tuple[str, ...]:
    """Every registered world id, built-in first."""
    return _WORLDS.keys()


def world_sha256(world_id: str) -> str:
    """The digest of a registered world's declaration (`sha256:<hex>`)."""
    return declaration_sha256(world_for(world_id).declaration)
