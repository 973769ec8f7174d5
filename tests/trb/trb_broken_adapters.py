"""Deliberately broken adapters for the conformance kit tests (one defect each)."""

from __future__ import annotations

import itertools

from trustbench.trb.adapter import AdapterTier, OverrideUnsupported, SelfReport, StepContext
from trustbench.trb.instruments import GovernedOracle
from trustbench.trb.world import reference_continuation


class Unnormalised(GovernedOracle):
    def act(self, context: StepContext, r_override: SelfReport | None = None) -> dict[str, float]:
        return {a: 2 * p for a, p in super().act(context, r_override).items()}


class IgnoresOverride(GovernedOracle):
    def act(self, context: StepContext, r_override: SelfReport | None = None) -> dict[str, float]:
        return reference_continuation(self.emit_r(context))


class OutOfRangeConfidence(GovernedOracle):
    def emit_r(self, context: StepContext) -> dict:
        return {**super().emit_r(context).model_dump(), "confidence": 1.7}

    def act(self, context: StepContext, r_override: SelfReport | None = None) -> dict[str, float]:
        return reference_continuation(r_override or GovernedOracle.emit_r(self, context))


class Nondeterministic(GovernedOracle):
    _calls = itertools.count()

    def act(self, context: StepContext, r_override: SelfReport | None = None) -> dict[str, float]:
        jitter = (next(self._calls) % 7) * 1e-3
        return {"left": 0.5 - jitter, "stay": 0.25 + jitter, "right": 0.25}


class HonestNoOverride(IgnoresOverride):
    supports_override = False

    def act(self, context: StepContext, r_override: SelfReport | None = None) -> dict[str, float]:
        if r_override is not None:
            raise OverrideUnsupported("proxy without span editing")
        return super().act(context)


class SilentNoOverride(IgnoresOverride):
    supports_override = False


class BadTier(GovernedOracle):
    tier = "white-box"  # type: ignore[assignment]


def unnormalised() -> Unnormalised:
    return Unnormalised()


def ignores_override() -> IgnoresOverride:
    return IgnoresOverride()


def out_of_range_confidence() -> OutOfRangeConfidence:
    return OutOfRangeConfidence()


def nondeterministic() -> Nondeterministic:
    return Nondeterministic()


def honest_no_override() -> HonestNoOverride:
    return HonestNoOverride()


def silent_no_override() -> SilentNoOverride:
    return SilentNoOverride()


def bad_tier() -> BadTier:
    return BadTier()


def governed() -> GovernedOracle:
    return GovernedOracle()


def proxy_tier_is_accepted() -> GovernedOracle:
    adapter = GovernedOracle()
    adapter.tier = AdapterTier.PROXY
    return adapter


class CrashesLate(GovernedOracle):
    def emit_r(self, context: StepContext) -> SelfReport:
        if context.t == 3:
            raise KeyError("slot head missing")
        return super().emit_r(context)


def crashes_late() -> CrashesLate:
    return CrashesLate()


def raises() -> GovernedOracle:
    raise RuntimeError("no weights found")


class InDistributionOnly(GovernedOracle):
    """Governed from the training start cell (3); elsewhere it ignores every override.

    A model that learned its governance only where it was trained: perfect in distribution,
    epiphenomenal from an unseen start cell (the `transfer_start` and `transfer_length`
    families), so Track 6 must flag it.
    """

    def act(self, context: StepContext, r_override: SelfReport | None = None) -> dict[str, float]:
        if context.observations[0].position == 3:
            return super().act(context, r_override)
        return reference_continuation(self.emit_r(context))


def in_distribution_only() -> InDistributionOnly:
    return InDistributionOnly()


class FirstObservationCue(GovernedOracle):
    """The cheapest cue-delay cheat: memorised "the cue is in observation 0".

    It reads goal and door from `observations[0]` only. Wherever observation 0 carries the cue
    (every train and eval trace) it is the governed oracle; after a delayed cue it has no r to
    condition on, states a default ("left", "open") and acts on that whatever r_override says.
    Perfect in distribution, epiphenomenal on `transfer_cue_delay`: Track 6 must show it.
    """

    def emit_r(self, context: StepContext) -> SelfReport:
        first, now = context.observations[0], context.observations[-1]
        if first.goal_cue is not None:
            return super().emit_r(context)
        world = self._world_for(context)
        return world.coherent_report(now.position, "left", "open", now.steps_left, None)

    def act(self, context: StepContext, r_override: SelfReport | None = None) -> dict[str, float]:
        if context.observations[0].goal_cue is None:
            return reference_continuation(self.emit_r(context))
        return super().act(context, r_override)


def first_observation_cue() -> FirstObservationCue:
    return FirstObservationCue()
