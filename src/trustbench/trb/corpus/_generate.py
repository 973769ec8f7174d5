"""Generation of the reference-world corpus: simulated traces with synthetic edits.

Every counterfactual generated here is a `synthetic` edit of the true r_t, one per editable
slot, and its continuation is the exact reference agent's Phi(r') (`reference_agent`), never
human data. Goal and belief edits are coherent revisions: the plan and confidence are
re-derived from the edited goal or belief by the world's planner and dynamic programme.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from trustbench.trb.adapter._protocol import ACTIONS, EDITABLE_SLOTS, SelfReport
from trustbench.trb.corpus._format import (
    SPLITS,
    TEXT_TRANSFER_SPLITS,
    TRANSFER_FAMILY_SPLITS,
    Attribution,
    Counterfactual,
    LeadInStep,
    Split,
    Step,
    Trace,
)
from trustbench.trb.world import (
    CorridorConfig,
    CorridorWorld,
    TextTask,
    TextWorld,
    reference_continuation,
    text_world_for_task,
)
from trustbench.trb.world._text import SEEN_TASK_KINDS, TEXT_DYNAMICS, UNSEEN_TASK_KINDS

if TYPE_CHECKING:
    import numpy as np


def _counterfactuals(
    world: CorridorWorld, step_r: SelfReport, cell: int, steps_left: int, rng: np.random.Generator
) -> tuple[Counterfactual, ...]:
    """One synthetic edit per editable slot, each with its reference continuation."""
    out: list[Counterfactual] = []
    for slot in EDITABLE_SLOTS:
        if slot == "goal":
            goal = "right" if step_r.goal == "left" else "left"
            rp = world.coherent_report(cell, goal, step_r.belief, steps_left, step_r.caused_by_self)
        elif slot == "belief":
            belief = "closed" if step_r.belief == "open" else "open"
            rp = world.coherent_report(cell, step_r.goal, belief, steps_left, step_r.caused_by_self)
        elif slot == "planned_next":
            others = [a for a in ACTIONS if a != step_r.planned_next]
            rp = step_r.model_copy(update={"planned_next": others[int(rng.integers(2))]})
        else:
            grid = [v for v in (0.05, 0.35, 0.65, 0.95) if abs(v - step_r.confidence) > 0.25]
            rp = step_r.model_copy(update={"confidence": grid[int(rng.integers(len(grid)))]})
        out.append(
            Counterfactual(
                slot=slot,  # type: ignore[arg-type]
                r_prime=rp,
                provenance="synthetic",
                continuation=reference_continuation(rp),
                continuation_source="reference_agent",
            )
        )
    return tuple(out)


def generate_split(
    split: Split, n_traces: int, seed: int, config: CorridorConfig | None = None
) -> list[Trace]:
    """Simulate `n_traces` reference-agent episodes with synthetic counterfactuals.

    Args:
        split: Split name stored on every trace.
        n_traces: Number of episodes.
        seed: Seed of the numpy generator that draws every recorded noise value.
        config: World parameters (a transfer split uses different ones).

    Returns:
        The traces, deterministic given the arguments.
    """
    import numpy as np  # 0.15 s: loaded to generate, not with the corpus format (`trb --help`)

    world = CorridorWorld(config)
    rng = np.random.default_rng(seed)
    traces: list[Trace] = []
    for i in range(n_traces):
        episode = world.simulate(rng)
        lead_in = tuple(
            LeadInStep(t=t, observation=rec.observation, action="stay", gust_draw=rec.gust_draw)
            for t, rec in enumerate(episode.lead_in)
        )
        steps = []
        for t, rec in enumerate(episode.steps, start=len(lead_in)):
            attribution = None
            if rec.caused_by_self is not None:
                attribution = Attribution(
                    caused_by_self=rec.caused_by_self,
                    improved=bool(rec.improved),
                    false_credit=bool(rec.false_credit),
                )
            steps.append(
                Step(
                    t=t,
                    observation=rec.observation,
                    r=rec.r,
                    action=rec.action,
                    action_draw=rec.action_draw,
                    gust_draw=rec.gust_draw,
                    reach_probability=rec.reach_probability,
                    attribution=attribution,
                    counterfactuals=_counterfactuals(
                        world, rec.r, rec.observation.position, rec.observation.steps_left, rng
                    ),
                )
            )
        traces.append(
            Trace(
                trace_id=f"{split}-{i:05d}",
                split=split,
                world=world.config,
                goal=episode.goal,
                door=episode.door,
                lead_in=lead_in,
                steps=tuple(steps),
            )
        )
    return traces


TRANSFER_WORLD = CorridorConfig(start_cells=(2, 3, 4), gust_probability=0.45)
"""The single `transfer` split's world: other start cells and stronger wind than training."""

CUE_DELAY_STEPS = 2
"""Lead-in steps of the `cue_delay` family: the start cell (3) plus two gusts at most reaches
cells 1..5, so no episode starts at a goal, and 2 + horizon 6 = 8 steps, the longest history
of any family (the `length` family's horizon)."""

TRANSFER_FAMILIES: dict[str, CorridorConfig] = {
    "wind": CorridorConfig(gust_probability=0.45),
    "start": CorridorConfig(start_cells=(1, 2, 4, 5)),
    "door_prior": CorridorConfig(door_closed_probability=0.7),
    "length": CorridorConfig(length=9, horizon=8, start_cells=(4,)),
    "cue_delay": CorridorConfig(cue_step=CUE_DELAY_STEPS),
    "encoding": CorridorConfig(),
}
"""Held-out context families (world parameters differing from training in one factor, or,
for `encoding`, the training world with the self-report asked in another encoding).

`cue_delay` shows the goal cue and door sign after a lead-in of `CUE_DELAY_STEPS` unevaluated
steps instead of at step 0 (same corridor, horizon counted from the cue): a model that learned
"the cue is in observation 0" rather than to remember the cue loses it here.

Each is stored as its own split `transfer_<family>` by `generate_reference_corpus(...,
transfer_families=True)`, so Track 6 takes its minimum over them as separate contexts."""

TRANSFER_ENCODINGS: dict[str, str] = {"encoding": "renamed"}
"""Family -> the proxy tier's slot encoding on its split (every other family: `standard`).
The `encoding` family changes only how a proxy model is asked for its report: the slots in
another order with renamed keys and values (`trb.proxy._local.RENAMED`, named here rather than
imported: `trb.proxy` imports torch; `tests/trb/test_transfer.py` keeps the two equal). A corpus
manifest records each split's encoding (`SplitInfo.report_encoding`), so a stored corpus keeps
it."""


def split_encodings(split_names: Iterable[str]) -> dict[str, str]:
    """The declared report encoding of each named split that is not `standard`."""
    declared = {f"transfer_{family}": name for family, name in TRANSFER_ENCODINGS.items()}
    return {split: declared[split] for split in split_names if split in declared}


def family_sizes(total: int) -> dict[str, int]:
    """`total` transfer traces split between the families as evenly as possible.

    The first `total % n` families get one trace more, so the corpus (and a run's case count)
    is the same size as the single `transfer` split it replaces.
    """
    n = len(TRANSFER_FAMILIES)
    return {name: total // n + (k < total % n) for k, name in enumerate(TRANSFER_FAMILIES)}


def generate_reference_corpus(
    sizes: dict[str, int] | None = None, seed: int = 0, *, transfer_families: bool = False
) -> dict[str, list[Trace]]:
    """A full reference-world corpus: train/dev/eval on the default world, transfer on others.

    Args:
        sizes: Traces per split (defaults: 1500/200/300/200).
        seed: Base seed; each split uses seed + its index so splits never share draws.
        transfer_families: Replace the single `transfer` split (one world, `TRANSFER_WORLD`)
            by one split per family of `TRANSFER_FAMILIES`, `sizes["transfer"]` traces in all
            (`family_sizes`), family k seeded with `seed * 1000 + 100 + k`.
    """
    sizes = {"train": 1500, "dev": 200, "eval": 300, "transfer": 200, **(sizes or {})}
    out = {
        split: generate_split(
            split,
            sizes[split],
            seed * 1000 + index,
            TRANSFER_WORLD if split == "transfer" else None,
        )
        for index, split in enumerate(SPLITS)
        if not (transfer_families and split == "transfer")
    }
    if transfer_families:
        per_family = family_sizes(sizes["transfer"])
        for k, ((name, config), split) in enumerate(
            zip(TRANSFER_FAMILIES.items(), TRANSFER_FAMILY_SPLITS, strict=True)
        ):
            assert split == f"transfer_{name}"
            out[split] = generate_split(split, per_family[name], seed * 1000 + 100 + k, config)
    return out


# ------------------------------------------------------------------------------------------------
# The text world's corpus (`trb.world._text`): the same exact traces, each stating a task in words.

TEXT_TRANSFER_FAMILIES: dict[str, tuple[TextTask, ...]] = {
    "phrasing": tuple(TextTask(kind=k, phrasing="log") for k in SEEN_TASK_KINDS),
    "language": tuple(TextTask(kind=k, language="fr") for k in SEEN_TASK_KINDS),
    "task_kind": tuple(TextTask(kind=k) for k in UNSEEN_TASK_KINDS),
}
"""The text world's held-out families, each stored as split `transfer_<family>`: the seen task
kinds in another phrasing (a terse operations log), the seen task kinds with the self-report in
another language (French), and a task kind never shown in train/dev/eval."""
TEXT_IN_DISTRIBUTION: tuple[TextTask, ...] = tuple(TextTask(kind=k) for k in SEEN_TASK_KINDS)
"""The tasks of the train, dev and eval splits: the seen kinds, plain English."""


def generate_text_split(
    split: Split,
    n_traces: int,
    seed: int,
    tasks: tuple[TextTask, ...] = TEXT_IN_DISTRIBUTION,
    dynamics: CorridorConfig = TEXT_DYNAMICS,
) -> list[Trace]:
    """Text-world traces: reference-agent episodes, each stating one of `tasks` in words.

    The episodes, their lead-in, their coherent revisions r' and Phi(r') are `generate_split`'s
    on the text world's dynamics (exact, `synthetic` / `reference_agent` provenance); trace i
    states task i mod len(tasks).
    """
    traces = generate_split(split, n_traces, seed, dynamics)
    return [
        trace.model_copy(update={"task": tasks[i % len(tasks)]}) for i, trace in enumerate(traces)
    ]


def generate_text_corpus(
    sizes: dict[str, int] | None = None, seed: int = 0
) -> dict[str, list[Trace]]:
    """A text-world corpus: train/dev/eval on the seen tasks, one split per transfer family.

    Args:
        sizes: Traces per split (`train`, `dev`, `eval`, and per family `transfer`;
            defaults 60/10/20/10).
        seed: Base seed; split k uses seed * 1000 + k, family k seed * 1000 + 100 + k.
    """
    sizes = {"train": 60, "dev": 10, "eval": 20, "transfer": 10, **(sizes or {})}
    out: dict[str, list[Trace]] = {
        split: generate_text_split(split, sizes[split], seed * 1000 + k)
        for k, split in enumerate(("train", "dev", "eval"))
    }
    for k, ((family, tasks), split) in enumerate(
        zip(TEXT_TRANSFER_FAMILIES.items(), TEXT_TRANSFER_SPLITS, strict=True)
    ):
        assert split == f"transfer_{family}"
        out[split] = generate_text_split(split, sizes["transfer"], seed * 1000 + 100 + k, tasks)
    return out


def text_worlds(traces: Iterable[Trace]) -> dict[str, TextWorld]:
    """Trace id -> the text world each trace states (what `TextWorldAdapter` renders with).

    Raises:
        ValueError: a trace states no text task (a corridor trace).
    """
    worlds = {}
    for trace in traces:
        if trace.task is None:
            raise ValueError(f"trace {trace.trace_id} states no text task")
        worlds[trace.trace_id] = text_world_for_task(trace.task, trace.world)
    return worlds
