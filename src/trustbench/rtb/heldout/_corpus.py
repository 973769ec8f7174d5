"""A sealed held-out set as the corpus of an ordinary RTB experiment, without the owner's key.

`[corpus] path` naming a folder that holds `HELDOUT.json` makes the experiment run against the
sealed set. Everything `freeze` and `run` need is in the clear: the candidate inputs, the shared
prompt, the set manifest's policy id. The trials are planned over the exported evaluation ids
(`inputs/<evaluation_id>.json`), never over case ids, which are part of the sealed answer key;
each trial still sends its input under a fresh evaluation id, as for any corpus. Only grading
(`report`) opens the answer key, with the owner's private key (`_pipeline.graded_corpus`).
"""

from __future__ import annotations

import json
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from trustbench.core import ResolvedItem
from trustbench.errors import CheckFailed, InputError
from trustbench.rtb.heldout._seal import HELDOUT_NAME, pin_problems, read_set_manifest


def is_sealed_set(folder: Path) -> bool:
    """Whether a corpus folder is a sealed held-out set (it holds `HELDOUT.json`)."""
    return (folder / HELDOUT_NAME).is_file()


class SealedSet:
    """The clear side of one sealed set: what a candidate may see, and the set's manifest."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.manifest = read_set_manifest(folder)
        self._inputs: dict[str, BaseModel] = {}

    @property
    def set_id(self) -> str:
        """The set's id (`HELDOUT.json`)."""
        return str(self.manifest["set_id"])

    @property
    def policy_id(self) -> str:
        """The sealed corpus's policy id, kept in the clear so reviewers can be checked."""
        return str(self.manifest["policy_id"])

    def check_pins(self) -> None:
        """Refuse a set whose clear or sealed bytes differ from the pins made when sealing.

        Raises:
            CheckFailed: Naming the first altered, missing or added file.
        """
        problems = pin_problems(self.folder, self.manifest)
        if problems:
            raise CheckFailed(
                f"held-out set altered since sealing: {problems[0]}", location=str(self.folder)
            )

    def items(self) -> list[ResolvedItem]:
        """`HELDOUT.json` and every pinned file, for the experiment's manifest to hash.

        The exposure log is not an input: it grows with every freeze and run.
        """
        names = [
            HELDOUT_NAME,
            *self.manifest["clear_files"],
            *self.manifest["sealed_files"],
        ]
        return [ResolvedItem("corpus", name, path=self.folder / name) for name in sorted(names)]

    def evaluation_ids(self) -> list[str]:
        """The exported evaluation ids, one per sealed case (what the trials are planned on)."""
        return sorted(
            rel.removeprefix("inputs/").removesuffix(".json")
            for rel in self.manifest["clear_files"]
            if rel.startswith("inputs/")
        )

    @cached_property
    def prompt(self) -> str:
        """The shared review prompt, as exported."""
        return (self.folder / "review_prompt.md").read_text(encoding="utf-8")

    def candidate_input(self, exported_id: str, evaluation_id: str) -> BaseModel:
        """The exported input of one case under a fresh `evaluation_id` (policy model)."""
        from trustbench.rtb.policy._registry import policy_for

        if exported_id not in self._inputs:
            path = self.folder / "inputs" / f"{exported_id}.json"
            model = policy_for(self.policy_id).candidate_model
            try:
                self._inputs[exported_id] = model.model_validate(
                    json.loads(path.read_text(encoding="utf-8"))
                )
            except FileNotFoundError:
                raise InputError(f"no input {exported_id!r} in the held-out set") from None
            except (ValueError, ValidationError) as error:
                raise InputError(f"not a candidate input: {error}", location=str(path)) from None
        return self._inputs[exported_id].model_copy(update={"evaluation_id": evaluation_id})

    def messages(self, exported_id: str, evaluation_id: str, note: str = "") -> Any:
        """The review messages of one trial: the same shape as for an open corpus."""
        from trustbench.rtb.review.reviewers._llm import build_review_messages

        candidate = self.candidate_input(exported_id, evaluation_id)
        return build_review_messages(self.prompt + note, candidate)  # type: ignore[arg-type]
