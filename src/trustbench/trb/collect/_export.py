"""Export a collection: the human corpus, its synthetic-only twin, and the collection report.

`export_collection(folder, out)` reads the frozen protocol and the ledger (under the folder's
lock, its chain verified), drops every answer of a withdrawn session, and writes

- `out/human/`: the served traces with human Phi(r') where collected (`_store`) plus one
  Track 3 outcome trace per answered outcome item, kind `human_paired`;
- `out/synthetic/`: the same served traces with synthetic continuations only (kind
  `reference_world`), so Tracks 1 and 3 can be read with the synthetic-only figure beside;
- `out/collection.json`: sessions, timings, the synthetic:human share per split with its 3:1
  cap status (a split over the cap is labelled so), inter-participant agreement (pairwise
  agreement, Fleiss' kappa, and the leave-one-out human ceiling of G), the reference agent's G
  against human Phi beside its G against the synthetic Phi, and the participants' own Track 3
  attribution scored against the hidden labels.

A collection in a world with its own slots (`SlotWorld`) writes instead `out/sessions.jsonl`,
the session lines `trustbench trb import --world ID` reads (`_store.slot_session_line`; checked
by the import's own reader before it is kept), and `out/collection.json` with the same
sessions, items, agreement and attribution blocks (no synthetic twin: such a world's Phi(r')
are recorded, not the reference agent's).

Every split of a session is the split its participant was assigned in the protocol, so an
item's answers never straddle two splits. Core's corpus check still refuses a corpus whose
overall ratio breaks the cap.
"""

from __future__ import annotations

import json
from itertools import combinations
from pathlib import Path
from typing import Any

from trustbench.core import Ledger, RunLock, read_ledger
from trustbench.errors import InputError
from trustbench.trb.adapter._protocol import ACTIONS
from trustbench.trb.collect._store import (
    Answer,
    FrozenProtocol,
    Session,
    empirical,
    outcome_trace,
    read_frozen,
    rebuild_sessions,
    session_id,
    slot_session_line,
    with_human_phi,
)
from trustbench.trb.corpus._format import SYNTHETIC_TO_HUMAN_CAP, SlotTrace, Trace
from trustbench.trb.corpus._store import provenance_share, write_corpus


def _answers(frozen: FrozenProtocol, sessions: dict[str, Session]) -> dict[str, list[Answer]]:
    out: dict[str, list[Answer]] = {}
    for who, session in sorted(sessions.items()):
        if session.withdrawn:
            continue
        for item_id, data in session.answers.items():
            out.setdefault(item_id, []).append((who, session_id(frozen, who), data["action"]))
    return out


def agreement(
    answers: dict[str, list[Answer]], world_actions: tuple[str, ...] = ACTIONS
) -> dict[str, Any]:
    """Inter-participant agreement over items with two or more answers.

    `pairwise_agreement`: the share of participant pairs on an item choosing the same action,
    averaged over items. `fleiss_kappa` (statsmodels) when every such item has the same number
    of answers. `human_ceiling_G`: 1 - mean TV between each answer and the other answers'
    empirical distribution on its item (leave-one-out): the G a model would score against
    human Phi by answering like one more participant, the ceiling a model's G can reach.
    `world_actions` are the served world's actions (the corridor's by default).
    """
    from trustbench.trb.measures._governance import total_variation  # trb.measures imports torch

    multi = {k: [a for _, _, a in v] for k, v in answers.items() if len(v) >= 2}
    if not multi:
        return {"items": 0, "pairwise_agreement": None, "fleiss_kappa": None,
                "human_ceiling_G": None, "why": "no item has two or more answers"}  # fmt: skip
    pairs = [sum(a == b for a, b in combinations(v, 2)) / (len(v) * (len(v) - 1) / 2)
             for v in multi.values()]  # fmt: skip
    tvs = []
    for actions in multi.values():
        for i, own in enumerate(actions):
            rest = actions[:i] + actions[i + 1 :]
            tvs.append(
                total_variation(empirical([own], world_actions), empirical(rest, world_actions))
            )
    kappa = None
    if len({len(v) for v in multi.values()}) == 1:
        from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

        codes = [[world_actions.index(a) for a in v] for v in multi.values()]
        table, _ = aggregate_raters(codes, n_cat=len(world_actions))
        value = float(fleiss_kappa(table))
        kappa = value if value == value else None  # NaN when every answer is one action
    return {
        "items": len(multi),
        "pairwise_agreement": sum(pairs) / len(pairs),
        "fleiss_kappa": kappa,
        "human_ceiling_G": 1.0 - sum(tvs) / len(tvs),
    }


def reference_vs_human(human: list[Trace], synthetic: list[Trace]) -> dict[str, Any]:
    """The reference agent's G against human Phi, beside its G against the synthetic Phi."""
    from trustbench.trb.measures._governance import total_variation  # trb.measures imports torch

    tv_human, n = 0.0, 0
    twins = {t.trace_id: t for t in synthetic}
    for h_trace in human:
        s_trace = twins.get(h_trace.trace_id)  # Track 3 outcome traces have no twin
        if s_trace is None:
            continue
        for h_step, s_step in zip(h_trace.steps, s_trace.steps, strict=True):
            for h, s in zip(h_step.counterfactuals, s_step.counterfactuals, strict=True):
                if h.continuation_source == "human":  # s is the reference agent's Phi(r')
                    tv_human += total_variation(s.continuation, h.continuation)
                    n += 1
    if not n:
        return {"items": 0, "G_against_human": None, "G_against_synthetic": None}
    return {"items": n, "G_against_human": 1 - tv_human / n, "G_against_synthetic": 1.0}


def _attribution(frozen: FrozenProtocol, sessions: dict[str, Session]) -> dict[str, Any]:
    """The participants' own attribution of Track 3 outcomes against the hidden labels."""
    hits = {True: [0, 0], False: [0, 0]}  # label -> [correct, total]
    false_credit = 0
    for session in sessions.values():
        if session.withdrawn:
            continue
        for item_id, answer in session.attributions.items():
            outcome = session.answers[item_id]["outcome"]
            if outcome["caused_by_self"] is None:  # a slot world's step with no recorded label
                continue
            label = bool(outcome["caused_by_self"])
            hits[label][1] += 1
            # a slot world's answer is its attribution slot: a stated P(self) above 1/2 is self
            said_self = answer == "self" if isinstance(answer, str) else answer > 0.5
            hits[label][0] += said_self == label
            false_credit += bool(outcome["false_credit"])
    sens = hits[True][0] / hits[True][1] if hits[True][1] else None
    spec = hits[False][0] / hits[False][1] if hits[False][1] else None
    return {
        "answers": hits[True][1] + hits[False][1],
        "self_caused": hits[True][1],
        "exogenous": hits[False][1],
        "sensitivity": sens,
        "specificity": spec,
        "balanced_accuracy": None if sens is None or spec is None else (sens + spec) / 2,
        "false_credit_cells": false_credit,
    }


def split_shares(splits: dict[str, list[Trace]]) -> dict[str, Any]:
    """The synthetic:human share of each split, labelled when over the 3:1 cap."""
    out = {}
    for split, traces in splits.items():
        share = provenance_share(traces)
        over = share.cap_status == "violated"
        label = (
            f"OVER the {SYNTHETIC_TO_HUMAN_CAP:.0f}:1 synthetic:human cap" if over
            else f"cap {SYNTHETIC_TO_HUMAN_CAP:.0f}:1 {share.cap_status}"
        )  # fmt: skip
        out[split] = {**share.model_dump(mode="json"), "over_cap": over, "label": label}
    return out


def _sessions_record(frozen: FrozenProtocol, sessions: dict[str, Session]) -> dict[str, Any]:
    return {
        who: {
            "session": session_id(frozen, who),
            "split": s.participant.split,
            "items": len(s.order),
            "complete": s.position,
            "withdrawn": s.withdrawn,
            "rejected_forms": s.rejected,
            "time_on_task_s": [a["time_on_task_s"] for a in s.answers.values()],
            "overran_time_limit": sum(a["overran_time_limit"] for a in s.answers.values()),
        }
        for who, s in sorted(sessions.items())
    }


def _read(folder: Path) -> tuple[FrozenProtocol, dict[str, Session]]:
    frozen = read_frozen(folder)
    with RunLock(folder):
        Ledger.open(folder, frozen.protocol_sha256).close()  # refuses a broken chain
        contents = read_ledger(folder)
    return frozen, rebuild_sessions(frozen, contents)


def export_collection(folder: Path, out: Path) -> dict[str, Any]:
    """Write `out/human`, `out/synthetic` and `out/collection.json`; return the report.

    Raises:
        InputError: `out` already holds an export.
        CheckFailed: no answer was collected, or the human corpus breaks the 3:1 cap overall.
    """
    if (out / "collection.json").exists():
        raise InputError("already exported here; export into a new folder", location=str(out))
    frozen, sessions = _read(folder)
    answers = _answers(frozen, sessions)
    if frozen.slot_world is not None:
        return _export_slot_sessions(frozen, sessions, answers, out)
    human: dict[str, list[Trace]] = {}
    synthetic: dict[str, list[Trace]] = {}
    for trace in (t for t in frozen.traces if isinstance(t, Trace)):
        human.setdefault(trace.split, []).append(with_human_phi(trace, frozen, answers, human=True))
        synthetic.setdefault(trace.split, []).append(
            with_human_phi(trace, frozen, answers, human=False)
        )
    outcomes = 0
    for who, session in sorted(sessions.items()):
        if session.withdrawn:
            continue
        for item in session.order:
            if item.track3 and item.item_id in session.attributions:
                derived = outcome_trace(frozen, item, who, session.answers[item.item_id])
                human[item.split].append(Trace.model_validate(derived.model_dump(mode="json")))
                outcomes += 1
    human_manifest = write_corpus(out / "human", human, kind="human_paired")
    synthetic_manifest = write_corpus(out / "synthetic", synthetic)
    rules = frozen.protocol.session
    report = {
        "protocol_sha256": frozen.protocol_sha256,
        "description": frozen.protocol.description,
        "source_corpus_sha256": frozen.source_corpus_sha256,
        "model_continuation_shown": rules.show_model_continuation,
        "sessions": _sessions_record(frozen, sessions),
        "items": _items_record(frozen, answers),
        "corpus": {
            "human": {
                "sha256": human_manifest.corpus_sha256,
                "kind": human_manifest.kind,
                "provenance": human_manifest.provenance.model_dump(mode="json"),
                "track3_outcome_traces": outcomes,
            },
            "synthetic": {
                "sha256": synthetic_manifest.corpus_sha256,
                "kind": synthetic_manifest.kind,
            },
        },
        "splits": split_shares(human),
        "agreement": agreement(answers),
        "reference_agent": reference_vs_human(
            [t for ts in human.values() for t in ts], [t for ts in synthetic.values() for t in ts]
        ),
        "attribution": _attribution(frozen, sessions),
    }
    (out / "collection.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    return report


def _items_record(frozen: FrozenProtocol, answers: dict[str, list[Answer]]) -> dict[str, Any]:
    wanted = frozen.protocol.session.participants_per_item
    return {
        "total": len(frozen.items),
        "answered": len(answers),
        "participants_per_item": wanted,
        "below_target": sum(len(answers.get(i.item_id, [])) < wanted for i in frozen.items),
    }


def _export_slot_sessions(
    frozen: FrozenProtocol,
    sessions: dict[str, Session],
    answers: dict[str, list[Answer]],
    out: Path,
) -> dict[str, Any]:
    """A slot-world collection: `out/sessions.jsonl` for `trb import` and the report.

    The lines are read back with the import's own reader before they are kept, so an export
    never hands over a file the import refuses.

    Raises:
        CheckFailed: no answer was collected.
    """
    from trustbench.errors import CheckFailed
    from trustbench.trb.corpus._import import read_sessions

    world = frozen.slot_world
    assert world is not None
    world_id = world.declaration.world_id
    if not answers:
        raise CheckFailed("no answer was collected: nothing to export", location="ledger.sqlite")
    lines = [
        slot_session_line(trace, frozen, answers)
        for trace in frozen.traces
        if isinstance(trace, SlotTrace)
    ]
    out.mkdir(parents=True, exist_ok=True)
    staged = out / ".sessions.jsonl.partial"
    staged.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    read_sessions(staged, world_id)  # the import's checks, or InputError
    staged.rename(out / "sessions.jsonl")
    report = {
        "protocol_sha256": frozen.protocol_sha256,
        "description": frozen.protocol.description,
        "source_corpus_sha256": frozen.source_corpus_sha256,
        "world_id": world_id,
        "model_continuation_shown": frozen.protocol.session.show_model_continuation,
        "sessions": _sessions_record(frozen, sessions),
        "items": _items_record(frozen, answers),
        "session_file": {
            "path": "sessions.jsonl",
            "sessions": len(lines),
            "import": f"trustbench trb import sessions.jsonl --world {world_id} --out CORPUS",
        },
        "agreement": agreement(answers, world.declaration.action_space.actions),
        "attribution": _attribution(frozen, sessions),
    }
    (out / "collection.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    return report


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def summary_lines(report: dict[str, Any]) -> list[str]:
    """The export report in a few lines (every figure with its denominator)."""
    items, agree, attr = (report[k] for k in ("items", "agreement", "attribution"))
    ref = report.get("reference_agent")  # none in a slot world's export
    lines = [
        f"protocol {report['protocol_sha256'][:16]}: {items['answered']}/{items['total']} items "
        f"answered; {items['below_target']} below {items['participants_per_item']} answers",
    ]
    if "session_file" in report:  # a slot world's export: the sessions for `trb import`
        lines.append(
            f"  {report['session_file']['sessions']} sessions for "
            f"`{report['session_file']['import']}`"
        )
    for split, share in report.get("splits", {}).items():
        lines.append(
            f"  {split}: {share['synthetic']} synthetic, {share['human']} human "
            f"counterfactuals; {share['label']}"
        )
    lines.append(
        f"agreement over {agree['items']} items with 2+ answers: pairwise "
        f"{_fmt(agree['pairwise_agreement'])}, Fleiss kappa {_fmt(agree['fleiss_kappa'])}, "
        f"human ceiling of G {_fmt(agree['human_ceiling_G'])}"
    )
    if ref is not None:
        lines.append(
            f"reference agent over {ref['items']} human items: G against human Phi "
            f"{_fmt(ref['G_against_human'])} (against its synthetic Phi "
            f"{_fmt(ref['G_against_synthetic'])})"
        )
    lines.append(
        f"participants' own attribution over {attr['answers']} outcomes "
        f"({attr['self_caused']} self-caused, {attr['exogenous']} exogenous): balanced accuracy "
        f"{_fmt(attr['balanced_accuracy'])}"
    )
    return lines
