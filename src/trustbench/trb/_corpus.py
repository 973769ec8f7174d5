"""The TRB corpus: traces with r_t snapshots and per-step counterfactual continuations.

Format (one JSON object per line, one file per split, a `manifest.json` beside them):

- a `Trace` holds its steps; each `Step` has the candidate-visible `observation`, the grader-only
  r_t snapshot, the action taken, the recorded noise draws, the attribution label, and K
  `Counterfactual` values r' each with its provenance and reference continuation Phi(r').
- Splits (train, dev, eval, transfer) are stored in separate files. The manifest records each
  split's SHA-256 and the hash of every held-out trace, so training can refuse eval/transfer
  data by content, not by file name.
- The corpus hash is the SHA-256 of the RFC 8785 canonical JSON of the split hashes.

Honesty about provenance: counterfactuals generated from the reference world are `synthetic`
edits and their continuations are `reference_agent` data. They are never labelled human. The
spec caps synthetic:human at 3:1 (§5); a corpus with human counterfactuals that breaks the cap is
refused, and a corpus with none declares itself `reference_world` and says on every result that
no human share exists.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Literal

import numpy as np
import rfc8785
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from trustbench.errors import CheckFailed, InputError
from trustbench.trb._schema import (
    ACTIONS,
    EDITABLE_SLOTS,
    TRB_VERSION,
    Action,
    DoorState,
    Goal,
    Observation,
    SelfReport,
    StepContext,
)
from trustbench.trb.worlds import CorridorConfig, CorridorWorld, reference_continuation

Split = Literal["train", "dev", "eval", "transfer"]
SPLITS: tuple[Split, ...] = ("train", "dev", "eval", "transfer")
HELD_OUT: tuple[Split, ...] = ("eval", "transfer")
Provenance = Literal["same_session_revision", "paired_session", "synthetic"]
ContinuationSource = Literal["reference_agent", "human"]
SYNTHETIC_TO_HUMAN_CAP = 3.0
"""Spec §5 / whitepaper §4.4: at most 3 synthetic counterfactuals per human one."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)


class Counterfactual(_Strict):
    """One counterfactual value r' for a step and its reference continuation."""

    slot: Literal["goal", "belief", "planned_next", "confidence", "none"]
    """The slot this r' edits; `none` marks the null edit r' = r."""
    r_prime: SelfReport
    """The counterfactual self-representation (a coherent revision: plan and confidence are
    re-derived when goal or belief is edited)."""
    provenance: Provenance
    """Where r' came from: a same-session revision, a paired session, or a synthetic edit."""
    continuation: dict[str, float]
    """Phi(r'): the action distribution of an agent acting on r', keyed by action."""
    continuation_source: ContinuationSource
    """Who produced the continuation: the exact reference agent of the world, or a human."""


class Attribution(_Strict):
    """Grader-only label for Track 3 about the transition that led into this step."""

    caused_by_self: bool
    """But-for label: the next cell would have differed had the agent stayed (same gust)."""
    improved: bool
    """The transition moved the agent closer to its true goal."""
    false_credit: bool
    """The agent acted, its cell changed exactly as its own move would have changed it, the
    outcome improved, and yet its true do-effect was zero (a same-direction gust did it)."""


class Step(_Strict):
    """One step of a trace."""

    t: int = Field(ge=0)
    """Step index."""
    observation: Observation
    """What the agent perceived (the only part an adapter sees)."""
    r: SelfReport
    """Grader-only snapshot of the true r_t (the reference agent's stated reasoning)."""
    action: Action
    """Action taken."""
    action_draw: float = Field(ge=0.0, lt=1.0)
    """Recorded uniform draw that sampled the action from Phi(r_t)."""
    gust_draw: float = Field(ge=0.0, lt=1.0)
    """Recorded uniform draw that decided the gust of this step's transition."""
    reach_probability: float = Field(ge=0.0, le=1.0)
    """Exact DP probability of reaching the goal from here following the plan."""
    attribution: Attribution | None
    """Track 3 label for the transition into this step; null at step 0."""
    counterfactuals: tuple[Counterfactual, ...]
    """The K counterfactual values r' of this step (the null edit is not stored here)."""


class Trace(_Strict):
    """One episode."""

    trace_id: str
    """Unique id within the corpus."""
    split: Split
    """The split this trace belongs to."""
    world: CorridorConfig
    """Parameters of the world that produced it."""
    goal: Goal
    """Grader-only true goal."""
    door: DoorState
    """Grader-only true door state."""
    steps: tuple[Step, ...]
    """Steps in order."""

    def context(self, t: int) -> StepContext:
        """The candidate-visible context at step t (observations 0..t only)."""
        return StepContext(
            trace_id=self.trace_id,
            t=t,
            observations=tuple(s.observation for s in self.steps[: t + 1]),
        )


class SplitInfo(_Strict):
    """Manifest entry for one split file."""

    file: str
    """File name relative to the corpus folder."""
    sha256: str
    """SHA-256 of the file bytes."""
    n_traces: int
    """Number of traces."""
    trace_sha256: tuple[str, ...]
    """Content hash of every trace, in file order."""


class ProvenanceShare(_Strict):
    """Counts of counterfactuals by provenance and the synthetic-to-human cap status."""

    synthetic: int
    """Synthetic counterfactuals."""
    human: int
    """Same-session revisions plus paired-session counterfactuals."""
    synthetic_share: float | None
    """synthetic / (synthetic + human); null when there are no counterfactuals."""
    cap_status: Literal["met", "violated", "no_human_data"]
    """`met`: ratio <= 3:1; `violated`: above the cap; `no_human_data`: reference-world only."""


class CorpusManifest(_Strict):
    """The corpus manifest: what each split holds and the hashes that pin it."""

    trb_version: str
    """Benchmark version the corpus was built for."""
    kind: Literal["reference_world", "human_paired"]
    """`reference_world`: all counterfactuals and continuations come from the exact world."""
    splits: dict[str, SplitInfo]
    """Per-split file, hash and trace hashes."""
    provenance: ProvenanceShare
    """Counterfactual provenance counts over all splits."""
    corpus_sha256: str
    """SHA-256 of the canonical JSON of the split hashes."""


def canonical_sha256(obj: object) -> str:
    """SHA-256 of the RFC 8785 canonical JSON of a JSON-compatible object."""
    return hashlib.sha256(rfc8785.dumps(obj)).hexdigest()


def trace_sha256(trace: Trace) -> str:
    """Content hash of a trace, excluding its id and split label.

    Excluding both means a held-out trace that is renamed or relabelled `train` still has
    the hash the manifest recorded for it, so `assert_trainable` still refuses it.
    """
    return canonical_sha256(trace.model_dump(mode="json", exclude={"trace_id", "split"}))


def corpus_json_schema() -> dict[str, object]:
    """The JSON Schema (Draft 2020-12) of one corpus line."""
    schema = Trace.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema


# --- generation ------------------------------------------------------------------------------
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
    world = CorridorWorld(config)
    rng = np.random.default_rng(seed)
    traces: list[Trace] = []
    for i in range(n_traces):
        episode = world.simulate(rng)
        steps = []
        for t, rec in enumerate(episode.steps):
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
                steps=tuple(steps),
            )
        )
    return traces


TRANSFER_WORLD = CorridorConfig(start_cells=(2, 3, 4), gust_probability=0.45)
"""The transfer split's world: other start cells and stronger wind than training."""


def generate_reference_corpus(
    sizes: dict[str, int] | None = None, seed: int = 0
) -> dict[str, list[Trace]]:
    """A full reference-world corpus: train/dev/eval on the default world, transfer on another.

    Args:
        sizes: Traces per split (defaults: 1500/200/300/200).
        seed: Base seed; each split uses seed + its index so splits never share draws.
    """
    sizes = {"train": 1500, "dev": 200, "eval": 300, "transfer": 200, **(sizes or {})}
    return {
        split: generate_split(
            split,
            sizes[split],
            seed * 1000 + index,
            TRANSFER_WORLD if split == "transfer" else None,
        )
        for index, split in enumerate(SPLITS)
    }


# --- provenance cap --------------------------------------------------------------------------
def provenance_share(traces: list[Trace]) -> ProvenanceShare:
    """Count counterfactual provenance and decide the cap status (refusal is `check_cap`)."""
    synthetic = human = 0
    for trace in traces:
        for step in trace.steps:
            for cf in step.counterfactuals:
                if cf.provenance == "synthetic":
                    synthetic += 1
                else:
                    human += 1
    total = synthetic + human
    if human == 0:
        status = "no_human_data"
    elif synthetic / human <= SYNTHETIC_TO_HUMAN_CAP:
        status = "met"
    else:
        status = "violated"
    return ProvenanceShare(
        synthetic=synthetic,
        human=human,
        synthetic_share=synthetic / total if total else None,
        cap_status=status,  # type: ignore[arg-type]
    )


def check_cap(share: ProvenanceShare, kind: str, where: str) -> None:
    """Refuse a corpus whose synthetic share breaks the spec cap.

    A `reference_world` corpus is allowed with no human data because it claims none: its
    results are labelled reference-agent results, not a TRB score. A corpus claiming human
    paired data must have some, and at most 3 synthetic per human counterfactual.
    """
    if share.human and kind == "reference_world":
        raise CheckFailed(
            f"corpus declares kind 'reference_world' but holds {share.human} human counterfactuals",
            location=where,
        )
    if kind == "human_paired" and share.cap_status == "no_human_data":
        raise CheckFailed(
            "corpus declares kind 'human_paired' but holds 0 human counterfactuals "
            f"({share.synthetic} synthetic)",
            location=where,
        )
    if share.cap_status == "violated":
        ratio = share.synthetic / share.human
        raise CheckFailed(
            f"synthetic:human counterfactual ratio {ratio:.2f}:1 exceeds the spec cap "
            f"{SYNTHETIC_TO_HUMAN_CAP:.0f}:1 ({share.synthetic} synthetic, {share.human} human)",
            location=where,
        )


# --- storage ---------------------------------------------------------------------------------
def split_bytes(traces: list[Trace]) -> bytes:
    """The exact JSONL bytes of a split file (one sorted-key JSON object per line)."""
    return "".join(
        json.dumps(t.model_dump(mode="json"), sort_keys=True) + "\n" for t in traces
    ).encode()


def manifest_for(splits: dict[str, list[Trace]], kind: str = "reference_world") -> CorpusManifest:
    """The manifest of a corpus (the same hashes `write_corpus` writes); checks the cap.

    Raises:
        InputError: A trace is stored under a split other than its own.
        CheckFailed: The synthetic-to-human cap is broken or the declared kind is false.
    """
    infos: dict[str, SplitInfo] = {}
    for split, traces in splits.items():
        for trace in traces:
            if trace.split != split:
                raise InputError(
                    f"trace {trace.trace_id} has split {trace.split!r}", location=split
                )
        infos[split] = SplitInfo(
            file=f"{split}.jsonl",
            sha256=hashlib.sha256(split_bytes(traces)).hexdigest(),
            n_traces=len(traces),
            trace_sha256=tuple(trace_sha256(t) for t in traces),
        )
    share = provenance_share([t for traces in splits.values() for t in traces])
    check_cap(share, kind, "corpus")
    return CorpusManifest(
        trb_version=TRB_VERSION,
        kind=kind,  # type: ignore[arg-type]
        splits=infos,
        provenance=share,
        corpus_sha256=canonical_sha256({k: v.sha256 for k, v in sorted(infos.items())}),
    )


def write_corpus(
    folder: Path, splits: dict[str, list[Trace]], kind: str = "reference_world"
) -> CorpusManifest:
    """Write one JSONL file per split and `manifest.json`; return the manifest."""
    manifest = manifest_for(splits, kind)
    folder.mkdir(parents=True, exist_ok=True)
    for split, traces in splits.items():
        (folder / f"{split}.jsonl").write_bytes(split_bytes(traces))
    (folder / "manifest.json").write_text(manifest.model_dump_json(indent=2), encoding="utf-8")
    return manifest


def read_corpus(folder: Path) -> tuple[CorpusManifest, dict[str, list[Trace]]]:
    """Read and verify a corpus folder: every split file must match its manifest hash."""
    path = folder / "manifest.json"
    try:
        manifest = CorpusManifest.model_validate_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError as error:
        raise InputError("corpus manifest not found", location=str(path)) from error
    except ValidationError as error:
        raise InputError(
            f"invalid manifest: {error.errors()[0]['msg']}", location=str(path)
        ) from None
    splits: dict[str, list[Trace]] = {}
    for split, info in manifest.splits.items():
        file = folder / info.file
        raw = file.read_bytes()
        if hashlib.sha256(raw).hexdigest() != info.sha256:
            raise CheckFailed("split file hash differs from the manifest", location=str(file))
        traces = []
        for lineno, line in enumerate(raw.decode().splitlines(), start=1):
            try:
                traces.append(Trace.model_validate_json(line))
            except ValidationError as error:
                first = error.errors()[0]
                pointer = "/" + "/".join(str(p) for p in first["loc"])
                raise InputError(first["msg"], location=f"{file}:{lineno}#{pointer}") from None
        splits[split] = traces
    check_cap(
        provenance_share([t for ts in splits.values() for t in ts]), manifest.kind, str(folder)
    )
    return manifest, splits


def assert_trainable(traces: list[Trace], manifest: CorpusManifest) -> None:
    """Refuse to train on any trace whose content hash belongs to a held-out split.

    Checked by hash, so a renamed or re-labelled eval trace is still caught.
    """
    held_out = {
        h
        for split in HELD_OUT
        if split in manifest.splits
        for h in manifest.splits[split].trace_sha256
    }
    for trace in traces:
        if trace.split in HELD_OUT or trace_sha256(trace) in held_out:
            raise CheckFailed(
                f"training refused: trace {trace.trace_id} belongs to a held-out split "
                f"({'/'.join(HELD_OUT)}) by its content hash",
                location=f"corpus {manifest.corpus_sha256[:12]}",
            )
