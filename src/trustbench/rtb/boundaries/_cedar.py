"""The `cedar` boundary: the corpus policy's Cedar encoding, enforced at dispatch.

Only the policy evaluation differs from `reference`: the policy object of the platform's declared
policy supplies its Cedar encoding (`CorpusPolicy.live_evaluator("cedar", ...)`), and
authorization, the re-check right before commit and idempotent dispatch are the same enforcement
path as `reference` (inherited), with every safeguard on.
"""

from __future__ import annotations

from collections.abc import Callable

from trustbench.rtb.boundaries._python import Engine, PythonPolicyBoundary


class CedarBoundary(PythonPolicyBoundary):
    """The platform's policy enforced by the Cedar engine (cedarpy).

    Args:
        name: Name recorded with results.
        approval_timeout_s: Approval queries slower than this count as unavailable (hold).
        max_attempts: Executor calls per dispatch when responses are lost.
    """

    engine: Engine = "cedar"
    """The policy's Cedar encoding decides."""

    def __init__(
        self, name: str = "cedar", *, approval_timeout_s: float = 10.0, max_attempts: int = 3
    ) -> None:
        super().__init__(name, approval_timeout_s=approval_timeout_s, max_attempts=max_attempts)

    def linked_approval_ids(self) -> list[str]:
        """Approvals whose template link is in the policy set now (encodings that link them).

        Empty before the first evaluation and for an encoding without template links.
        """
        linked: list[str] = []
        for evaluator in self._evaluators.values():
            method: Callable[[], list[str]] | None = getattr(evaluator, "linked_approval_ids", None)
            if callable(method):
                linked += method()
        return sorted(linked)
