"""A boundary defined outside the package plugs in by `entry` in both tracks, classified by what
it declares (`Boundary.enforcement`), never by its name."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from trustbench.core import (
    build_manifest,
    check_inputs,
    read_ledger,
    run_experiment,
    write_manifest,
)
from trustbench.errors import CheckFailed, InputError
from trustbench.rtb.boundaries import (
    Authorization,
    BoundaryFactory,
    DispatchReceipt,
    PythonPolicyBoundary,
    enforcement_of,
    is_instrument,
)
from trustbench.rtb.boundaries._python import execute_with_retries
from trustbench.rtb.control.track import ControlTrack
from trustbench.rtb.corpus._models import Decision, ReasonCode
from trustbench.rtb.platform import ControlRequest, PlatformView
from trustbench.rtb.workflow._analysis import built_to_fail
from trustbench.rtb.workflow.track import WorkflowTrack


class HouseBoundary:
    """A user's own enforcing boundary: the reference rules behind its own name."""

    enforcement = "enforcing"

    def __init__(self) -> None:
        self.name = "house"
        self._inner = PythonPolicyBoundary("house")

    async def authorize(self, request: ControlRequest, platform: PlatformView) -> Authorization:
        """Decide with the reference rules."""
        return await self._inner.authorize(request, platform)

    async def dispatch(
        self, request: ControlRequest, authorization: Authorization | None, platform: PlatformView
    ) -> DispatchReceipt:
        """Enforce at dispatch with the reference rules."""
        return await self._inner.dispatch(request, authorization, platform)


class OpenDoor:
    """Executes everything and says so; it borrows the name `reference` to show names are
    ignored: only its declaration classifies it."""

    enforcement = "built-to-fail"
    name = "reference"

    async def authorize(self, request: ControlRequest, platform: PlatformView) -> Authorization:
        """Permit without looking."""
        return Authorization(
            decision=Decision.PERMIT,
            reason_code=ReasonCode.PROPOSAL_MATCHES_ACTIVE_APPROVAL,
            issued_by="open-door",
        )

    async def dispatch(
        self, request: ControlRequest, authorization: Authorization | None, platform: PlatformView
    ) -> DispatchReceipt:
        """Execute whatever arrives."""
        return execute_with_retries(request, platform, max_attempts=1, idempotent=True)


class Undeclared:
    """Declares nothing (a boundary written before the attribute existed)."""

    name = "undeclared"
    authorize = OpenDoor.authorize
    dispatch = OpenDoor.dispatch


def house(settings: dict[str, Any]) -> BoundaryFactory:
    """Entry (the same callable contract in both tracks): settings -> boundary factory."""
    return HouseBoundary


def house_named_unchecked(settings: dict[str, Any]) -> BoundaryFactory:
    """Entry of an enforcing boundary that borrows the name of the built-in `unchecked`."""

    class Named(HouseBoundary):
        def __init__(self) -> None:
            super().__init__()
            self.name = "unchecked"

    return Named


def open_door(settings: dict[str, Any]) -> BoundaryFactory:
    """Entry of `OpenDoor`."""
    return OpenDoor


def misdeclared(settings: dict[str, Any]) -> BoundaryFactory:
    """Entry of a boundary declaring a class that does not exist."""

    class Misdeclared(HouseBoundary):
        enforcement = "mostly-fine"

    return Misdeclared


def _run(tmp_path: Path, text: str) -> tuple[Any, Any]:
    spec = tmp_path / "exp.toml"
    spec.write_text(text, encoding="utf-8")
    manifest = build_manifest(spec)
    write_manifest(manifest, tmp_path / "run")
    run_experiment(tmp_path / "run")
    return manifest, read_ledger(tmp_path / "run")


def test_a_boundary_without_a_declaration_is_judged_as_an_enforcing_candidate() -> None:
    assert enforcement_of(Undeclared()) == "enforcing"
    assert enforcement_of(OpenDoor()) == "built-to-fail"
    with pytest.raises(ValueError, match="mostly-fine"):
        enforcement_of(misdeclared({})())


def test_entry_boundaries_run_in_the_control_path_track_with_their_declared_class(
    tmp_path: Path,
) -> None:
    text = f"""
suite = "rtb"
track = "control"
trials_per_case = 1
concurrency = 4
timeout_s = 10.0

[corpus]
builtin = "v0.1"

[track_options]
paths = ["direct"]

[[candidates]]
name = "house"
kind = "inprocess"
entry = "{__name__}:house"

[[candidates]]
name = "open-door"
kind = "inprocess"
entry = "{__name__}:open_door"
"""
    _, ledger = _run(tmp_path, text)
    runs: dict[str, list[dict[str, Any]]] = {"house": [], "open-door": []}
    for trial in ledger.trials:
        assert trial["status"] == "completed"
        runs[trial["candidate"]].append(trial["outcome"]["run"])
    assert len(runs["house"]) == len(runs["open-door"]) == 60
    assert {r["enforcement"] for r in runs["house"]} == {"enforcing"}
    assert {r["enforcement"] for r in runs["open-door"]} == {"built-to-fail"}
    # The house boundary enforces: only the 20 permitted requests change anything; the open door
    # lets the prohibited ones through as well.
    changed = {
        name: sum(any(e["kind"] == "mutation" for e in r["effect_log"]) for r in rows)
        for name, rows in runs.items()
    }
    assert changed["house"] == 20 < changed["open-door"]


def test_the_control_path_track_classifies_entry_boundaries_by_declaration_not_name(
    tmp_path: Path,
) -> None:
    """A boundary of one's own that declares `enforcing` is a candidate, judged like `reference`;
    one that declares `built-to-fail` is an instrument even under the name `reference`."""
    text = f"""
suite = "rtb"
track = "control"
trials_per_case = 1
concurrency = 4
timeout_s = 10.0

[corpus]
builtin = "v0.1"

[track_options]
paths = ["direct"]

[[candidates]]
name = "house"
kind = "inprocess"
entry = "{__name__}:house"

[[candidates]]
name = "open-door"
kind = "inprocess"
entry = "{__name__}:open_door"

[[candidates]]
name = "unchecked-by-name"
kind = "inprocess"
entry = "{__name__}:house_named_unchecked"
"""
    manifest, ledger = _run(tmp_path, text)
    analysis = ControlTrack().analyze(manifest, ledger)
    assert analysis.instruments == frozenset({"open-door"})
    assert analysis.expected_to_fail == frozenset({"open-door"})
    # The enforcing boundary calling itself `unchecked` is not held to the built-in unchecked
    # boundary's signature (every prohibited effect shown), so it is no "harness defect".
    assert analysis.record["control"]["harness_checks"] == []
    assert analysis.record["control"]["harness_defects"] == []
    assert not is_instrument("enforcing")
    assert is_instrument("built-to-fail") and is_instrument("known-bad")


def test_entry_boundaries_run_in_the_workflow_track_classified_by_declaration_not_name(
    tmp_path: Path,
) -> None:
    text = f"""
suite = "rtb"
track = "workflow"
trials_per_case = 1
concurrency = 4

[corpus]
builtin = "v0.1"

[track_options]
kinds = ["direct"]

[[candidates]]
name = "reckless-house"
kind = "inprocess"
settings = {{ agent = "reckless", boundary_entry = "{__name__}:house" }}

[[candidates]]
name = "reckless-open-door"
kind = "inprocess"
settings = {{ agent = "reckless", boundary_entry = "{__name__}:open_door" }}
"""
    manifest, ledger = _run(tmp_path, text)
    analysis = WorkflowTrack().analyze(manifest, ledger)
    configurations = {t["candidate"]: t["outcome"]["configuration"] for t in ledger.trials}
    assert configurations["reckless-house"]["enforcement"] == "enforcing"
    assert configurations["reckless-open-door"]["boundary"] == "reference"  # its borrowed name
    assert configurations["reckless-open-door"]["enforcement"] == "built-to-fail"
    # The open door is a measurement instrument whose violation is the expected signature; the
    # house boundary is judged as a candidate: its failing a gate would block release.
    assert analysis.expected_to_fail == frozenset({"reckless-open-door"})
    assert built_to_fail("reckless", "enforcing") is False
    assert built_to_fail("reckless", "known-bad") and built_to_fail("reckless", "built-to-fail")
    record = json.dumps(analysis.record)
    assert "reckless-house" in record


def test_workflow_freeze_names_a_boundary_entry_that_declares_an_unknown_class(
    tmp_path: Path,
) -> None:
    spec = tmp_path / "exp.toml"
    spec.write_text(
        f"""
suite = "rtb"
track = "workflow"
trials_per_case = 1

[corpus]
builtin = "v0.1"

[[candidates]]
name = "odd"
kind = "inprocess"
settings = {{ agent = "honest", boundary_entry = "{__name__}:misdeclared" }}
""",
        encoding="utf-8",
    )
    with pytest.raises(InputError, match="mostly-fine") as info:
        build_manifest(spec)
    assert "boundary_entry" in (info.value.location or "")


@pytest.mark.parametrize(
    ("track", "candidate"),
    [
        ("control", 'entry = "{module}:house"'),
        ("workflow", 'settings = {{ agent = "reckless", boundary_entry = "{module}:house" }}'),
    ],
)
def test_rechecking_a_frozen_run_never_imports_the_candidates_boundary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, track: str, candidate: str
) -> None:
    module = f"markedboundary_{tmp_path.name.replace('-', '_')}"
    marker = tmp_path / "boundary-ran"
    (tmp_path / f"{module}.py").write_text(
        f"import pathlib\n\npathlib.Path({str(marker)!r}).write_text('ran')\n"
        f"from {__name__} import house as house\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = tmp_path / "exp.toml"
    # `isolation = "none"`: the freeze builds the boundary in this process (in its sandbox the
    # module could not write the marker), so the recheck below is the only import left to see.
    spec.write_text(
        f'suite = "rtb"\ntrack = "{track}"\ntrials_per_case = 1\nisolation = "none"\n'
        f'[corpus]\nbuiltin = "v0.1"\n'
        f'[[candidates]]\nname = "house"\nkind = "inprocess"\n{candidate.format(module=module)}\n'
    )
    manifest = build_manifest(spec)  # the freeze builds the boundary: it imports the module
    del sys.modules[module]
    marker.unlink()
    check_inputs(manifest, ControlTrack() if track == "control" else WorkflowTrack())
    assert not marker.exists()


def test_a_workflow_boundary_entry_edited_after_the_freeze_fails_the_recheck(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = f"editedboundary_{tmp_path.name.replace('-', '_')}"
    source = tmp_path / f"{module}.py"
    source.write_text(f"from {__name__} import house as house\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = tmp_path / "exp.toml"
    # `isolation = "none"`: the module imports this test module, found on pytest's path only.
    spec.write_text(
        'suite = "rtb"\ntrack = "workflow"\ntrials_per_case = 1\nisolation = "none"\n'
        '[corpus]\nbuiltin = "v0.1"\n'
        '[[candidates]]\nname = "house"\nkind = "inprocess"\n'
        f'settings = {{ agent = "reckless", boundary_entry = "{module}:house" }}\n'
    )
    manifest = build_manifest(spec)
    pinned = {(item.role, item.name) for item in manifest.files}
    assert ("candidate_code", f"{module}:house") in pinned
    check_inputs(manifest, WorkflowTrack())  # unchanged: passes
    source.write_text(f"from {__name__} import open_door as house\n")
    with pytest.raises(CheckFailed, match=module):
        check_inputs(manifest, WorkflowTrack())
