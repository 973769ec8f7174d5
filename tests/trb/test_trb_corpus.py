from __future__ import annotations

import json
import os
from pathlib import Path

import jsonschema
import pytest

from trustbench.errors import CheckFailed, InputError
from trustbench.trb.corpus import (
    Trace,
    assert_trainable,
    corpus_json_schema,
    generate_reference_corpus,
    generate_split,
    manifest_for,
    read_corpus,
    write_corpus,
)

SIZES = {"train": 12, "dev": 4, "eval": 6, "transfer": 4}


def test_generation_is_deterministic_under_a_seed() -> None:
    assert generate_split("eval", 5, seed=1) == generate_split("eval", 5, seed=1)
    assert generate_split("eval", 5, seed=1) != generate_split("eval", 5, seed=2)


def test_corpus_lines_validate_against_the_json_schema(tmp_path: Path) -> None:
    write_corpus(tmp_path, generate_reference_corpus(SIZES, seed=0))
    validator = jsonschema.Draft202012Validator(corpus_json_schema())
    for line in (tmp_path / "eval.jsonl").read_text().splitlines():
        validator.validate(json.loads(line))


def test_written_corpus_round_trips_with_the_same_hash(tmp_path: Path) -> None:
    splits = generate_reference_corpus(SIZES, seed=0)
    written = write_corpus(tmp_path, splits)
    manifest, loaded = read_corpus(tmp_path)
    assert manifest.corpus_sha256 == written.corpus_sha256 == manifest_for(splits).corpus_sha256
    assert loaded == splits


def test_splits_are_stored_in_separate_files(tmp_path: Path) -> None:
    manifest = write_corpus(tmp_path, generate_reference_corpus(SIZES, seed=0))
    assert {info.file for info in manifest.splits.values()} == {
        "train.jsonl", "dev.jsonl", "eval.jsonl", "transfer.jsonl"
    }  # fmt: skip


def test_tampered_split_file_is_refused(tmp_path: Path) -> None:
    write_corpus(tmp_path, generate_reference_corpus(SIZES, seed=0))
    path = tmp_path / "eval.jsonl"
    path.write_text(path.read_text().replace('"right"', '"left"', 1))
    with pytest.raises(CheckFailed, match="hash differs"):
        read_corpus(tmp_path)


def test_a_split_file_replaced_by_a_fifo_is_refused_naming_it_without_blocking(
    tmp_path: Path,
) -> None:
    write_corpus(tmp_path, generate_reference_corpus(SIZES, seed=0))
    path = tmp_path / "eval.jsonl"
    path.unlink()
    os.mkfifo(path)  # no writer: reading it would wait for ever
    with pytest.raises(InputError, match="not a regular file") as refused:
        read_corpus(tmp_path)
    assert refused.value.location == str(path)


def test_training_refuses_eval_traces_even_when_relabelled_train() -> None:
    splits = generate_reference_corpus(SIZES, seed=0)
    manifest = manifest_for(splits)
    assert_trainable(splits["train"], manifest)
    smuggled = splits["eval"][0].model_copy(update={"split": "train", "trace_id": "train-99999"})
    with pytest.raises(CheckFailed, match="held-out"):
        assert_trainable([*splits["train"], smuggled], manifest)
    with pytest.raises(CheckFailed, match="held-out"):
        assert_trainable(splits["transfer"], manifest)


def test_reference_corpus_declares_no_human_data_and_reference_agent_continuations() -> None:
    splits = generate_reference_corpus(SIZES, seed=0)
    manifest = manifest_for(splits)
    assert manifest.kind == "reference_world"
    assert manifest.provenance.human == 0
    assert manifest.provenance.cap_status == "no_human_data"
    assert manifest.provenance.synthetic_share == 1.0
    sources = {
        (cf.provenance, cf.continuation_source)
        for t in splits["eval"] for s in t.steps for cf in s.counterfactuals
    }  # fmt: skip
    assert sources == {("synthetic", "reference_agent")}


def _with_human(traces: list[Trace], per_step: int, n_traces: int) -> list[Trace]:
    out = []
    for i, trace in enumerate(traces):
        steps = []
        for step in trace.steps:
            cfs = list(step.counterfactuals)
            if i < n_traces:
                for k in range(per_step):
                    cfs[k] = cfs[k].model_copy(update={"provenance": "paired_session"})
            steps.append(step.model_copy(update={"counterfactuals": tuple(cfs)}))
        out.append(trace.model_copy(update={"steps": tuple(steps)}))
    return out


def test_corpus_over_the_synthetic_cap_loads_labelled_over_the_cap_and_not_a_score(
    tmp_path: Path,
) -> None:
    from trustbench.trb.corpus._store import over_cap_label
    from trustbench.trb.track._adapters import LoadedCorpus
    from trustbench.trb.track._pipeline import TrbTrackOptions
    from trustbench.trb.track._profile import qualifications

    splits = generate_reference_corpus(SIZES, seed=0)
    splits["eval"] = _with_human(splits["eval"], per_step=1, n_traces=1)
    manifest = manifest_for(splits, kind="human_paired")
    assert manifest.provenance.cap_status == "violated"
    label = over_cap_label(manifest.provenance)
    assert label is not None and "OVER the spec cap" in label and "not a TRB score" in label
    corpus = LoadedCorpus(folder=tmp_path, manifest=manifest, splits=splits)
    said = qualifications(corpus, [], TrbTrackOptions(), k=1)
    assert any(label in line for line in said)


def test_corpus_at_three_to_one_meets_the_cap() -> None:
    splits = {k: _with_human(v, per_step=1, n_traces=len(v)) for k, v in
              generate_reference_corpus(SIZES, seed=0).items()}  # fmt: skip
    manifest = manifest_for(splits, kind="human_paired")
    assert manifest.provenance.cap_status == "met"
    assert manifest.provenance.synthetic_share == pytest.approx(0.75)


def test_corpus_claiming_human_data_without_any_is_refused() -> None:
    with pytest.raises(CheckFailed, match="0 human counterfactuals"):
        manifest_for(generate_reference_corpus(SIZES, seed=0), kind="human_paired")


def test_reference_world_corpus_containing_human_data_is_refused() -> None:
    splits = generate_reference_corpus(SIZES, seed=0)
    splits["eval"] = _with_human(splits["eval"], per_step=1, n_traces=len(splits["eval"]))
    with pytest.raises(CheckFailed, match="declares kind 'reference_world'"):
        manifest_for(splits)
