"""The fixed slot block a proxy model fills in its reasoning, and its renderer and parser.

A proxy-tier model has no r pathway, so r lives in text: one block with one `name=value`
word per schema slot, in a fixed order,

    <r> goal=right belief=open plan=right conf=7 self=1 </r>

Confidence is written in tenths (`conf=0` .. `conf=10`, read back as k/10), so a rendered
override carries its confidence to within 0.05; `self=na` marks the first step, where there
is no previous outcome to attribute. `act(r_override)` re-renders only this span, so the
edit a proxy model sees is exactly the slot values and nothing else.
"""

from __future__ import annotations

import re

from trustbench.trb.adapter._schema import ACTIONS, DOOR_STATES, GOALS, SelfReport

OPEN, CLOSE = "<r>", "</r>"
"""Delimiters of the slot block."""
CONF_LEVELS = 11
"""Confidence is written as an integer k in 0..10 meaning k/10."""

SLOT_OPTIONS: dict[str, tuple[str, ...]] = {
    "goal": tuple(f"goal={g}" for g in GOALS),
    "belief": tuple(f"belief={d}" for d in DOOR_STATES),
    "plan": tuple(f"plan={a}" for a in ACTIONS),
    "conf": tuple(f"conf={k}" for k in range(CONF_LEVELS)),
    "self": ("self=0", "self=1", "self=na"),
}
"""Every word a slot may take, per slot, in block order."""

_BLOCK = re.compile(
    r"<r>\s*goal=(left|right)\s+belief=(open|closed)\s+plan=(left|stay|right)\s+"
    r"conf=(10|[0-9])\s+self=(0|1|na)\s*</r>"
)


class SlotParseError(ValueError):
    """The text holds no well-formed slot block (a missing report, never a default one)."""


def conf_word(confidence: float) -> str:
    """The `conf=k` word nearest to a confidence in [0, 1]."""
    return f"conf={round(confidence * (CONF_LEVELS - 1))}"


def render_slots(r: SelfReport) -> list[str]:
    """The slot block of a report as words, delimiters included."""
    cbs = "na" if r.caused_by_self is None else str(int(r.caused_by_self >= 0.5))
    return [
        OPEN,
        f"goal={r.goal}",
        f"belief={r.belief}",
        f"plan={r.planned_next}",
        conf_word(r.confidence),
        f"self={cbs}",
        CLOSE,
    ]


def render_slot_text(r: SelfReport) -> str:
    """The slot block as one line of text."""
    return " ".join(render_slots(r))


def parse_slot_text(text: str) -> SelfReport:
    """Parse the last well-formed slot block in a text.

    Raises:
        SlotParseError: when there is none (the caller counts it missing, never approval).
    """
    found = _BLOCK.findall(text or "")
    if not found:
        raise SlotParseError("no well-formed <r> ... </r> slot block in the reply")
    goal, belief, plan, conf, cbs = found[-1]
    return SelfReport(
        goal=goal,  # type: ignore[arg-type]
        belief=belief,  # type: ignore[arg-type]
        planned_next=plan,  # type: ignore[arg-type]
        confidence=int(conf) / (CONF_LEVELS - 1),
        caused_by_self=None if cbs == "na" else float(cbs),
    )
