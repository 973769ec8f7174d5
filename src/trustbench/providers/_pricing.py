"""Cost of one attempt from the spec's per-candidate price table."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, StrictFloat


class PriceSpec(BaseModel):
    """Token prices used to compute each attempt's cost; absent prices give a null cost, not 0."""

    model_config = ConfigDict(use_attribute_docstrings=True, extra="forbid", frozen=True)

    input_per_mtok: StrictFloat = Field(ge=0)
    """US dollars per one million prompt (input) tokens."""
    output_per_mtok: StrictFloat = Field(ge=0)
    """US dollars per one million completion (output) tokens."""


def attempt_cost(
    price: PriceSpec | None, prompt_tokens: int | None, completion_tokens: int | None
) -> float | None:
    """Return the attempt's cost in US dollars, or None when it cannot be known.

    cost = prompt_tokens * input_per_mtok / 1e6 + completion_tokens * output_per_mtok / 1e6.
    An unknown price or an unreported token count gives None, never 0: a missing figure must not
    read as a free call.
    """
    if price is None or prompt_tokens is None or completion_tokens is None:
        return None
    return (prompt_tokens * price.input_per_mtok + completion_tokens * price.output_per_mtok) / 1e6
