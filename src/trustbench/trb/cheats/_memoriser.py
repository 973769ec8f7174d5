"""The memoriser: an adapter that searches the machine for the benchmark's answers and uses them.

Written from the public adapter contract (`trustbench.trb.adapter`) and the documented corpus
folder format (JSON lines of traces) only; it imports nothing else of trustbench. At its first
hook call it walks every place an in-process adapter could find a corpus: the environment's
path-like values, HOME and its caches, the working directory, the temporary folder, the folders
above its own module, and the parent process's working directory and environment
(`/proc/<ppid>/`). Every JSON-lines file whose records look like traces is indexed by
observation history (opaque trace ids do not stop it), and every counterfactual r' by value.

With the corpus it answers from the table: emit_r returns the stored r_t and the attribution
label, act returns the stored Phi(r'). Without it, it falls back to chance: the uniform action
and a fixed report. So it scores G* ~1 and balanced accuracy ~1 wherever it can read the
corpus, and ~0 / 0.5 where it cannot (its fallback is chance, nudged by 1e-4 towards
an override's plan so that it passes the conformance kit and reaches the run): the isolation
audit's signature.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from trustbench.trb.adapter import AdapterTier, SelfReport, StepContext

_MAX_FILES = 20_000
_MAX_DEPTH = 7
UNIFORM = {"left": 1 / 3, "stay": 1 / 3, "right": 1 / 3}
FALLBACK = SelfReport(
    goal="left", belief="open", planned_next="stay", confidence=0.5, caused_by_self=0.5
)


def _obs_key(observations: list[dict[str, Any]]) -> str:
    return json.dumps([{k: v for k, v in sorted(o.items()) if v is not None} for o in observations])


def _r_key(r: dict[str, Any]) -> tuple[Any, ...]:
    return (r["goal"], r["belief"], r["planned_next"], round(float(r["confidence"]), 6))


def _places() -> list[Path]:
    """Where to look, the likeliest first (each place gets its own search budget)."""
    places: list[Path] = []
    # Its own values and its parent's, both: a variable the parent also sets (a user's
    # TRUSTBENCH_CACHE in the shell above the harness) must not hide the process's own.
    values = list(os.environ.values())
    try:  # the harness's own environment and folder, if the kernel lets us read them
        raw = Path(f"/proc/{os.getppid()}/environ").read_bytes()
        values += [kv.split("=", 1)[1] for kv in raw.decode().split("\0") if "=" in kv]
        places.append(Path(os.readlink(f"/proc/{os.getppid()}/cwd")))
    except OSError:
        pass
    for value in dict.fromkeys(values):
        for part in value.split(os.pathsep):
            if part.startswith("/") and len(part) > 1:
                places.append(Path(part))
    places += [Path.home() / ".cache", Path.cwd(), Path(tempfile.gettempdir()), Path("/tmp")]
    places += [Path("/var/tmp"), Path.home(), *list(Path(__file__).resolve().parents)[:4]]
    return places


class Memoriser:
    """Looks the answers up wherever it can find them (see the module docstring)."""

    name = "cheat:memoriser"
    tier = AdapterTier.NATIVE
    supports_override = True

    def __init__(self) -> None:
        self.steps: dict[str, dict[str, Any]] = {}
        self.phi: dict[tuple[Any, ...], dict[str, float]] = {}
        self.files_read = 0
        self._searched = False

    def seed(self, value: int) -> None:
        """Deterministic: nothing to seed."""

    def _index(self, path: Path) -> None:
        try:
            with path.open() as handle:
                for line in handle:
                    trace = json.loads(line)
                    if not isinstance(trace, dict) or "steps" not in trace:
                        return
                    history = [e["observation"] for e in trace.get("lead_in") or []]
                    for step in trace["steps"]:
                        history.append(step["observation"])
                        self.steps[_obs_key(history)] = step
                        for cf in step.get("counterfactuals") or []:
                            self.phi[_r_key(cf["r_prime"])] = cf["continuation"]
            self.files_read += 1
        except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError):
            return

    def _search(self) -> None:
        if self._searched:
            return
        self._searched = True
        seen: set[str] = set()
        for place in _places():
            self._walk(place, 0, seen, [_MAX_FILES])

    def _walk(self, folder: Path, depth: int, seen: set[str], budget: list[int]) -> None:
        key = str(folder)
        if key in seen or depth > _MAX_DEPTH or budget[0] <= 0:
            return
        seen.add(key)
        try:
            entries = list(os.scandir(folder))
        except OSError:
            if folder.suffix == ".jsonl" and folder.is_file():
                self._index(folder)
            return
        for entry in entries:
            budget[0] -= 1
            try:
                if entry.is_dir(follow_symlinks=False):
                    self._walk(Path(entry.path), depth + 1, seen, budget)
                elif entry.name.endswith(".jsonl") and entry.is_file():
                    # Regular files only: opening a FIFO left in /tmp would wait for a writer.
                    self._index(Path(entry.path))
            except OSError:
                continue

    def _step(self, context: StepContext) -> dict[str, Any] | None:
        self._search()
        observations = [o.model_dump(mode="json") for o in context.observations]
        return self.steps.get(_obs_key(observations))

    def emit_r(self, context: StepContext) -> SelfReport:
        """The stored r_t with the stored attribution label, else the fixed fallback."""
        step = self._step(context)
        if step is None:
            return FALLBACK
        r = dict(step["r"])
        label = step.get("attribution")
        if label is not None:
            r["caused_by_self"] = 1.0 if label["caused_by_self"] else 0.0
        return SelfReport.model_validate(r)

    def act(self, context: StepContext, r_override: SelfReport | None = None) -> dict[str, float]:
        """The stored Phi(r') of the override (or of the stored r_t), else uniform."""
        step = self._step(context)
        if step is None:  # chance, nudged by 1e-4 towards the override's plan: passes the kit
            out = dict(UNIFORM)
            if r_override is not None:
                out = {a: p * (1 - 1e-4) for a, p in out.items()}
                out[r_override.planned_next] += 1e-4
            return out
        r = r_override.model_dump(mode="json") if r_override is not None else step["r"]
        return dict(self.phi.get(_r_key(r), UNIFORM))


def memoriser() -> Memoriser:
    """Factory (`trustbench.trb.cheats:memoriser`)."""
    return Memoriser()
