"""The registry of TRB worlds: a corpus names its world by id, and everything asks this registry.

Built in: the windy corridor (`corridor`, the world of every corpus that names none) and the
text world (`text-ops`). A plug-in world is found one of two ways: the plug-in calls
`register_world(world)` before it writes or loads a corpus of it (Python code, tests), or its
package declares an entry point named by the world id in the group `trustbench.trb_worlds`
(`queue = "my_pkg.worlds:QueueWorld"`: a `World` or a zero-argument factory of one), which
`world_for` loads the first time a corpus, a spec or `--world` names that id, so the CLI, the
harness and the collection app serve it with no option to pass. A registered id is never
replaced (core's `Registry`: call `unregister_world` first), and a built-in one can be neither
replaced nor removed.

A text world (`TextWorld` and its plug-in subclasses) also owns its task kinds: a text trace
names its task kind, and `text_world_for_task` finds the registered world that states it, so a
trace's words are rendered and parsed by its own world wherever it is read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trustbench._imports import import_object
from trustbench.core import Registry
from trustbench.errors import InputError
from trustbench.trb.world._corridor import CORRIDOR_WORLD_ID, CorridorWorld
from trustbench.trb.world._protocol import World, declaration_sha256
from trustbench.trb.world._text import TEXT_WORLD_ID, TextParseError, TextWorld

if TYPE_CHECKING:
    from trustbench.trb.world._corridor import CorridorConfig
    from trustbench.trb.world._text import TextTask

WORLD_ENTRY_POINTS = "trustbench.trb_worlds"
"""The entry-point group a package declares its worlds in (name: the world id)."""

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
        InputError: the object does not satisfy the `World` protocol (or is a class, not
            a world).
    """
    if isinstance(world, type) or not isinstance(world, World):
        raise InputError(
            f"{type(world).__name__} is not a TRB world: it needs `declaration`, "
            "`render_context` and `reference_continuation`",
            location="register_world",
        )
    if isinstance(world, TextWorld):
        _check_text_world(world)
    _WORLDS.register(world.declaration.world_id, world)


def _check_text_world(world: TextWorld) -> None:
    """A text world words its three declared option keys, and its task kinds are its own.

    Three: the keys map in order onto the dynamics' decrease / hold / increase. Its own: a
    trace's task kind names one world (`text_world_for_task`).
    """
    keys = world.declaration.action_space.actions
    for kind, wording in world.wordings.items():
        if len(keys) != 3 or set(wording.options) != set(keys):
            raise InputError(
                f"text world {world.declaration.world_id!r}: task kind {kind!r} words the "
                f"options {sorted(wording.options)}, the declaration lists {list(keys)} (a text "
                "world declares three option keys, for decrease, hold and increase)",
                location="register_world",
            )
    for other in _WORLDS.values():
        shared = sorted(set(world.wordings) & set(getattr(other, "wordings", {})))
        if shared and other.declaration.world_id != world.declaration.world_id:
            raise InputError(
                f"text world {world.declaration.world_id!r} states task kinds {shared} that "
                f"world {other.declaration.world_id!r} already states; name your task kinds "
                "apart",
                location="register_world",
            )


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
        _load_entry_points(world_id)
        world = _WORLDS.get(world_id)
    if world is None:
        raise InputError(
            f"unknown TRB world {world_id!r}; registered: {', '.join(_WORLDS.keys())}; a "
            "plug-in world is registered with register_world(world) before the corpus is read, "
            f'or by an entry point {world_id} = "module:factory" in the group '
            f'{WORLD_ENTRY_POINTS} (docs/trb.md, "Bring your own world")',
            location="world_id",
        )
    return world


def _load_entry_points(world_id: str | None) -> None:
    """Register the installed plug-in worlds named `world_id` (every one when None).

    Scanned only for an id the registry lacks (a built-in world never pays for the ~10 ms
    of reading the installed distributions' metadata).

    Raises:
        InputError: an entry point that cannot be imported or is not a `World`.
    """
    from importlib.metadata import entry_points

    for point in entry_points(group=WORLD_ENTRY_POINTS):
        if (world_id is not None and point.name != world_id) or point.name in _WORLDS:
            continue
        found = import_object(point.value, what=f"{WORLD_ENTRY_POINTS}/{point.name}")
        # a class (a `TextWorld` subclass) or a factory is called; a `World` object is used
        world = found() if isinstance(found, type) or not isinstance(found, World) else found
        if not isinstance(world, World) or world.declaration.world_id != point.name:
            raise InputError(
                f"{point.value} does not give a TRB world declared as {point.name!r}",
                location=f"{WORLD_ENTRY_POINTS}/{point.name}",
            )
        register_world(world)


def text_world_for_task(task: TextTask, dynamics: CorridorConfig | None = None) -> TextWorld:
    """The registered text world that states `task`'s kind, for that task and dynamics.

    Raises:
        TextParseError: no registered text world states the task kind (naming the kinds).
    """
    for attempt in range(2):
        for world in _WORLDS.values():
            if isinstance(world, TextWorld) and task.kind in world.wordings:
                return type(world)(task, dynamics)
        if attempt == 0:
            _load_entry_points(None)
    kinds = [k for w in _WORLDS.values() if isinstance(w, TextWorld) for k in w.wordings]
    raise TextParseError(f"no registered text world states task kind {task.kind!r} ({kinds})")


def known_world_ids() -> tuple[str, ...]:
    """Every registered world id, built-in first."""
    return _WORLDS.keys()


def world_sha256(world_id: str) -> str:
    """The digest of a registered world's declaration (`sha256:<hex>`)."""
    return declaration_sha256(world_for(world_id).declaration)
