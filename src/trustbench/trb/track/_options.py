"""The `track_options` of a `trb/profile` experiment spec, validated at resolve time."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError

from trustbench.core import ExperimentSpec
from trustbench.errors import InputError
from trustbench.trb.corpus._format import TRANSFER_FAMILY_SPLITS
from trustbench.trb.profile._sizes import MEASURES, ProfileSizes
from trustbench.trb.reference import TrainConfig

HeldOutSplit = Literal[
    "eval", "transfer",
    "transfer_wind", "transfer_start", "transfer_door_prior", "transfer_length",
    "transfer_cue_delay", "transfer_encoding",
]  # fmt: skip
"""A split whose traces may be cases (see `trb.corpus._format.HELD_OUT`)."""

BUILTIN_CORPUS = "reference-world"
"""`corpus.builtin` label of the generated reference-world corpus."""


class _CorpusAndMeasures(BaseModel):
    """The options a `trb/profile` spec lists first: its corpus, cases, pair and measures.

    A base of `TrbTrackOptions` only so its fields keep their place ahead of `ProfileSizes`'
    (pydantic orders a model's fields base by base, and validation reports the first bad one).
    """

    model_config = ConfigDict(use_attribute_docstrings=True, extra="forbid", frozen=True)

    corpus_sizes: dict[Literal["train", "dev", "eval", "transfer"], StrictInt] = Field(
        default_factory=lambda: {"train": 1500, "dev": 200, "eval": 300, "transfer": 200}
    )
    """Traces per split of the generated corpus (`corpus.builtin = "reference-world"` only);
    `transfer` is the total over the transfer families, split between them as evenly as
    possible (the first families get one more)."""
    corpus_seed: StrictInt = 0
    """Seed of the generated corpus (`corpus.builtin` only)."""
    train: TrainConfig = TrainConfig()
    """Training config of the reference models (ablation and full differ only in L_gov)."""
    splits: tuple[HeldOutSplit, ...] = ("eval", *TRANSFER_FAMILY_SPLITS)
    """Held-out splits whose traces are cases; each keeps its split label in the report and
    every non-eval split is one Track 6 transfer context. The built-in corpus holds one split
    per transfer family (`transfer_wind`, `transfer_start`, `transfer_door_prior`,
    `transfer_length`, `transfer_cue_delay`, `transfer_encoding`:
    `trb.corpus._format.TRANSFER_FAMILY_SPLITS`); `transfer` is the single transfer split of
    older corpus folders."""
    max_traces: StrictInt | None = Field(default=None, ge=2)
    """Use only the first N traces of each split (by id): a smaller run, stated in the report."""
    adapter_seed: StrictInt = 0
    """`adapter.seed(adapter_seed + trial_index)` starts every trial."""
    gap: tuple[str, str] | None = None
    """(full, ablation) candidate names for Delta_gov; by default the candidates whose adapters
    are `trace-ai-full` and `trace-ai-ablation`."""
    measures: tuple[str, ...] = MEASURES
    """Registered TRB measures to run (keys of `trustbench.trb.track.measure_targets()` or
    `module:attribute` import strings); each fills one axis of the profile."""


class TrbTrackOptions(ProfileSizes, _CorpusAndMeasures):
    """What a `trb/profile` run measures and how its reference corpus and models are built."""

    chat_samples: StrictInt = Field(default=8, ge=1)
    """Completions per act of a chat candidate (`proxy:chat`) whose endpoint returns no
    logprobs; their sampling error widens Track 1's G interval (`trb.measures._sampling`)."""
    chat_estimator: Literal["auto", "sampling"] = "auto"
    """`auto`: logprobs when the endpoint returns them, else `chat_samples` completions;
    `sampling`: never ask for logprobs (an endpoint that offers none, or ignores the field)."""
    r_star_adversarial_per_step: StrictInt = Field(default=1, ge=0, le=1)
    """Adversarial r' added to R* per eval step (0 or 1; `trb.measures._r_star`): the plan moved
    farthest from r_t's at confidence 1. Their G and share of R* are reported beside G."""
    r_star_ood_per_step: StrictInt = Field(default=1, ge=0, le=1)
    """Out-of-distribution r' added to R* per eval step (0 or 1): goal and belief flipped with a
    plan incoherent with both, an edit shape no stored edit has. G and share reported beside G."""
    conformance_traces: StrictInt = Field(default=4, ge=1)
    """Reference-world traces the conformance kit runs a user adapter on at freeze."""
    adapter_read_paths: tuple[str, ...] = ()
    """Extra paths a `MODULE:FACTORY` adapter's sandboxed worker may read (e.g. a local model's
    weights); one that holds or lies inside the corpus or the TRB cache is refused at freeze."""


def track_options(spec: ExperimentSpec) -> TrbTrackOptions:
    """Validate `spec.track_options`, naming the offending option on error.

    Raises:
        InputError: with the JSON pointer of the first invalid option.
    """
    try:
        return TrbTrackOptions.model_validate(spec.track_options)
    except ValidationError as error:
        first = error.errors()[0]
        pointer = "/".join(str(part) for part in first["loc"])
        raise InputError(first["msg"], location=f"track_options/{pointer}") from None
