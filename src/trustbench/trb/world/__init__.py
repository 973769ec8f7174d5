"""TRB worlds: the world protocol, its registry, and the built-in worlds (corridor, text).

A world declares its slot schema, action space, observation format, Track 1's editable slots,
Track 3's attribution slot and whether it has an exact reference agent (`WorldDeclaration`);
a TRB corpus names its world and the digest of that declaration. The windy corridor is an
exact finite-state world whose do-effects are computed, not estimated; the text world states
short operations tasks in natural language over the same exact dynamics.
"""

from __future__ import annotations

from trustbench.trb.world._corridor import (
    CORRIDOR_DECLARATION,
    CORRIDOR_WORLD_ID,
    CorridorConfig,
    CorridorWorld,
    Episode,
    LeadInRecord,
    StepRecord,
    reference_continuation,
    sample_action,
)
from trustbench.trb.world._protocol import (
    ActionSpace,
    CategoricalSlot,
    NumberSlot,
    ObservationFormat,
    TextSlot,
    World,
    WorldDeclaration,
    declaration_sha256,
    distribution_problem,
    slot_problems,
    slot_value_problem,
)
from trustbench.trb.world._registry import (
    DEFAULT_WORLD_ID,
    WORLD_ENTRY_POINTS,
    known_world_ids,
    register_world,
    text_world_for_task,
    unregister_world,
    world_for,
    world_sha256,
)
from trustbench.trb.world._slots import (
    SlotBlockError,
    SlotContext,
    SlotReport,
    SlotWorld,
    SlotWorldError,
)
from trustbench.trb.world._text import (
    TEXT_ACTIONS,
    TEXT_DECLARATION,
    TEXT_WORLD_ID,
    TaskWording,
    TextAgent,
    TextContext,
    TextParseError,
    TextTask,
    TextWorld,
    TextWorldAdapter,
)

__all__ = [
    "CORRIDOR_DECLARATION",
    "CORRIDOR_WORLD_ID",
    "DEFAULT_WORLD_ID",
    "TEXT_ACTIONS",
    "TEXT_DECLARATION",
    "TEXT_WORLD_ID",
    "WORLD_ENTRY_POINTS",
    "ActionSpace",
    "CategoricalSlot",
    "CorridorConfig",
    "CorridorWorld",
    "Episode",
    "LeadInRecord",
    "NumberSlot",
    "ObservationFormat",
    "SlotBlockError",
    "SlotContext",
    "SlotReport",
    "SlotWorld",
    "SlotWorldError",
    "StepRecord",
    "TaskWording",
    "TextAgent",
    "TextContext",
    "TextParseError",
    "TextSlot",
    "TextTask",
    "TextWorld",
    "TextWorldAdapter",
    "World",
    "WorldDeclaration",
    "declaration_sha256",
    "distribution_problem",
    "known_world_ids",
    "reference_continuation",
    "register_world",
    "sample_action",
    "slot_problems",
    "slot_value_problem",
    "text_world_for_task",
    "unregister_world",
    "world_for",
    "world_sha256",
]
