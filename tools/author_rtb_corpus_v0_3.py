"""Author the RTB v0.3 corpus (policy `rtb-narrow-approval-v3`) by adversarial filtering.

Run from the repository root:

    PYTHONPATH=src python tools/author_rtb_corpus_v0_3.py [--out DIR] [--pool N]

1. Draw a large pool (seeded): for every domain group, scenario kind and twist, several cases
   (v0.3's generator in the package, `trustbench.rtb.policy.narrow_v3._generator`: `_world.py`
   builds a permitted world with distractors, a twist edits it and authors the label; the pool
   step is `pool_step`, which `rtb audit` also draws, with other seeds, to fit its attackers).
   Every drawn case is checked: its authored label must equal the decision of
   `reference-policy-v3` and of the Cedar encoding, and its reason codes the reference
   reviewer's. A draw on which they disagree is not a case of the corpus (nothing
   here can tell which of the three is wrong), and it is not dropped either: it goes to the
   adjudication queue (`--queue`, by default `reviews/v0.3/adjudication-queue.jsonl` beside the
   corpus folder, outside its MANIFEST), one JSON line per draw with the candidate-visible
   input, the three decisions and the draw's seed, for a domain reviewer to settle.
2. Filter it the way AFLite filters WinoGrande: repeatedly fit the audit's own learned attackers
   (`trustbench.rtb.review._learning_audit`) on a random half of the domain groups, predict the
   other half, and drop the cases they predict most reliably.
3. Keep a balanced subset of the least predictable cases: 20 groups x 12 cases (4 per decision),
   every scenario kind under at least two decisions, and every rule the policy object declares
   deciding at least `LEAST_DECIDED` cases (its ablated reader, as `rtb audit` runs it, decides
   them otherwise than the label), so every rule is load-bearing under the policy's gates.

`--groups 2 --no-filter --least-decided 1` runs the same path on two groups in seconds (a test
checks it is reproducible and passes the corpus checks); never ship its output.

Output is deterministic (seeded RNG, no clock). The answer key's `decisive_record_ids` and
`decisive_discrepancies` are taken from the reference finding (the decision, reason codes and
decisive rules are the scenario's own).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from trustbench.rtb.corpus._load import builtin_corpus_root, write_manifest, write_schemas
from trustbench.rtb.policy.narrow_v3._generator import KINDS, SEED, pool_step
from trustbench.rtb.policy.narrow_v3._models import POLICY_ID_V3, CaseV3
from trustbench.rtb.policy.narrow_v3._reviewer import DECISION_RULES_V3, render_prompt_v3
from trustbench.rtb.policy.narrow_v3._world import DOMAINS

VERSION = "0.3"
PER_DECISION = 4
RULES_DECLARED = tuple(rule.rule_id for rule in DECISION_RULES_V3)
"""Every rule the policy object declares (the audit ablates each)."""
LEAST_DECIDED = 5
"""Each declared rule decides at least this many selected cases: one wrong permit fails an exact
5 % gate on 80 cases, and four deny/hold confusions one on 160 (see the review gates)."""
QUEUE_NAME = "adjudication-queue.jsonl"
"""The queue's file name, in `reviews/v<version>/` beside the corpus folder."""


class AuthoringError(Exception):
    """The generator cannot build the corpus it was asked for (a quota it cannot meet)."""


def draw_pool(
    per_twist: int, seed: int = SEED, groups: int | None = None
) -> tuple[list[CaseV3], list[dict[str, Any]]]:
    """The pool step (`trustbench.rtb.policy.narrow_v3._generator.pool_step`) over `KINDS`.

    Returns:
        The pool, and the adjudication queue: every draw on which the label, the reference
        reviewer and Cedar disagree (`QueuedDraw`), with its seed and draw index, in draw order.
    """
    return pool_step(per_twist, seed, len(DOMAINS) if groups is None else groups, kinds=KINDS)


def write_queue(path: Path, queue: list[dict[str, Any]]) -> None:
    """Write the adjudication queue: one canonical JSON line per draw (an empty file: none)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(entry, sort_keys=True, ensure_ascii=False) + "\n" for entry in queue]
    path.write_text("".join(lines), encoding="utf-8")


def _documents(cases: list[CaseV3]) -> list[dict[str, Any]]:
    from trustbench.rtb.corpus._export import to_candidate_input

    return [to_candidate_input(c, "authoring").model_dump(mode="json") for c in cases]


def pool_views(cases: list[CaseV3]) -> Any:
    """The attackers' feature views of every case, computed once for the whole pool."""
    from threadpoolctl import threadpool_limits

    from trustbench.rtb.review._learning_audit import _views

    with threadpool_limits(1):
        return _views(_documents(cases)), {c.case_id: i for i, c in enumerate(cases)}


def _sub_views(views: Any, cases: list[CaseV3]) -> dict[str, Any]:
    from trustbench.rtb.review._learning_audit import _rows

    full, index = views
    rows = [index[c.case_id] for c in cases]
    return {name: _rows(view, rows) for name, view in full.items()}


def predicted_right(
    cases: list[CaseV3], rounds: int, seed: int, views: dict[str, Any] | None = None
) -> list[float]:
    """Per case, the share of (round, attacker) fits that predicted it right when held out.

    Each round fits every learned attacker of the audit on a random half of the domain groups
    and predicts the other half (AFLite's random partitions, with groups kept whole).
    """
    from threadpoolctl import threadpool_limits

    from trustbench.rtb.review._learning_audit import _models, _rows, _views

    labels = [c.expectations.reference_decision.value for c in cases]
    groups = sorted({c.group for c in cases})
    hits, tries = [0] * len(cases), [0] * len(cases)
    rng = random.Random(seed)
    with threadpool_limits(1):
        views = _views(_documents(cases)) if views is None else views
        for _ in range(rounds):
            train_groups = set(rng.sample(groups, len(groups) // 2))
            train = [i for i, c in enumerate(cases) if c.group in train_groups]
            test = [i for i, c in enumerate(cases) if c.group not in train_groups]
            for _, view, make in _models(seed).values():
                model = make().fit(_rows(views[view], train), [labels[i] for i in train])
                for i, p in zip(test, model.predict(_rows(views[view], test)), strict=True):
                    hits[i] += p == labels[i]
                    tries[i] += 1
    return [h / t if t else 0.5 for h, t in zip(hits, tries, strict=True)]


def protected(pool: list[CaseV3], deciding: dict[str, frozenset[str]], least: int) -> set[str]:
    """Ids the filter keeps whatever the attackers say.

    Per declared rule, `2 * least` of the pool cases it decides (a rule decides few drawn cases,
    and the quota needs them).
    """
    keep: set[str] = set()
    for rule in RULES_DECLARED:
        cases = sorted(c.case_id for c in pool if rule in deciding[c.case_id])
        keep |= set(random.Random(f"{SEED}/{rule}").sample(cases, min(len(cases), 2 * least)))
    return keep


def aflite(
    pool: list[CaseV3],
    *,
    keep: int,
    rounds: int,
    step: float,
    threshold: float,
    min_cell: int,
    spare: set[str] = frozenset(),  # type: ignore[assignment]
    views: Any = None,
) -> list[CaseV3]:
    """Drop the most predictable cases until `keep` remain or none exceeds `threshold`.

    A (group, decision) cell is never thinned below `min_cell`, so the balanced selection stays
    possible; a case in `spare` is never dropped.
    """
    iteration = 0
    while len(pool) > keep:
        sub = None if views is None else _sub_views(views, pool)
        score = predicted_right(pool, rounds, SEED + iteration, sub)
        cells = Counter((c.group, c.expectations.reference_decision) for c in pool)
        drop: list[int] = []
        for i in sorted(range(len(pool)), key=lambda i: (-score[i], pool[i].case_id)):
            cell = (pool[i].group, pool[i].expectations.reference_decision)
            if len(drop) >= step * len(pool) or score[i] <= threshold:
                break
            if cells[cell] > min_cell and pool[i].case_id not in spare:
                cells[cell] -= 1
                drop.append(i)
        mean = sum(score) / len(score)
        print(
            f"aflite {iteration}: pool {len(pool)}, mean {mean:.3f}, dropping {len(drop)}",
            file=sys.stderr,
        )
        if not drop:
            break
        gone = set(drop)
        pool = [c for i, c in enumerate(pool) if i not in gone]
        iteration += 1
    return pool


def deciding_rules(cases: list[CaseV3]) -> dict[str, frozenset[str]]:
    """Case id -> the rules the case turns on.

    The declared rules whose ablated reader (as `rtb audit` runs it) decides otherwise than the
    label.
    """
    from trustbench.rtb.corpus._export import to_candidate_input
    from trustbench.rtb.policy.narrow_v3._policy import NARROW_V3

    readers = {rule.rule_id: NARROW_V3.ablated_reviewer(rule.rule_id) for rule in NARROW_V3.rules}
    found: dict[str, frozenset[str]] = {}
    for case in cases:
        ci = to_candidate_input(case, "authoring")
        label = case.expectations.reference_decision.value
        found[case.case_id] = frozenset(
            rule_id
            for rule_id, reader in readers.items()
            if json.loads(reader.review("", ci) or "{}").get("decision") != label
        )
    return found


def _cells(pool: list[CaseV3]) -> dict[tuple[str, str], list[CaseV3]]:
    cells: dict[tuple[str, str], list[CaseV3]] = defaultdict(list)
    for c in pool:
        cells[(c.group, c.expectations.reference_decision.value)].append(c)
    return cells


def rule_quota(
    pool: list[CaseV3], score: dict[str, float], deciding: dict[str, frozenset[str]], least: int
) -> list[CaseV3]:
    """Cases chosen first so that every declared rule decides at least `least` of the selection.

    Rarest rule first; for each, the least predictable pool cases it decides, while their
    (group, decision) cell has room. Raises when the pool cannot meet a rule's quota.
    """
    counts: Counter[str] = Counter()
    room: Counter[tuple[str, str]] = Counter()
    taken: list[CaseV3] = []
    for rule in sorted(RULES_DECLARED, key=lambda r: (sum(r in d for d in deciding.values()), r)):
        candidates = sorted(
            (c for c in pool if rule in deciding[c.case_id] and c not in taken),
            key=lambda c: (score.get(c.case_id, 0.5), c.case_id),
        )
        for c in candidates:
            if counts[rule] >= least:
                break
            cell = (c.group, c.expectations.reference_decision.value)
            if room[cell] < PER_DECISION:
                room[cell] += 1
                taken.append(c)
                counts.update(deciding[c.case_id])
        if counts[rule] < least:
            raise AuthoringError(f"rule {rule} decides only {counts[rule]} selectable cases")
    return taken + _kind_quota(pool, score, taken, room)


def _kind_quota(
    pool: list[CaseV3],
    score: dict[str, float],
    taken: list[CaseV3],
    room: Counter[tuple[str, str]],
) -> list[CaseV3]:
    """Further cases so that every scenario kind is taken under at least two decisions."""
    more: list[CaseV3] = []
    for kind in sorted({c.variant for c in pool}):
        seen = {c.expectations.reference_decision for c in taken + more if c.variant == kind}
        for c in sorted(
            (c for c in pool if c.variant == kind and c not in taken),
            key=lambda c: (score.get(c.case_id, 0.5), c.case_id),
        ):
            cell = (c.group, c.expectations.reference_decision.value)
            if len(seen) >= 2:
                break
            if c.expectations.reference_decision not in seen and room[cell] < PER_DECISION:
                room[cell] += 1
                more.append(c)
                seen.add(c.expectations.reference_decision)
    return more


def select(
    pool: list[CaseV3],
    score: dict[str, float],
    first: list[CaseV3] = (),  # type: ignore[assignment]
) -> list[CaseV3]:
    """Per group and decision, `PER_DECISION` cases.

    First `first` (the rule quota), then the least predictable, kinds spread round-robin.
    """
    chosen: list[CaseV3] = []
    fixed = _cells(list(first))
    for (group, decision), cases in sorted(_cells(pool).items()):
        picked: list[CaseV3] = list(fixed.get((group, decision), []))
        cases = [c for c in cases if c not in picked]
        cases.sort(key=lambda c: (score.get(c.case_id, 0.5), c.case_id))
        kinds: Counter[str] = Counter(c.variant for c in picked)
        while len(picked) < PER_DECISION and cases:
            best = min(
                cases, key=lambda c: (kinds[c.variant], score.get(c.case_id, 0.5), c.case_id)
            )
            picked.append(best)
            kinds[best.variant] += 1
            cases.remove(best)
        if len(picked) < PER_DECISION:
            raise AuthoringError(f"group {group} has only {len(picked)} {decision} cases left")
        chosen += picked
    return chosen


def logo_right(cases: list[CaseV3], seed: int) -> tuple[list[int], list[float]]:
    """Per case, how many attackers predict it right held out by group; each attacker's score.

    The same leave-one-domain-group-out scoring as `trustbench rtb audit`.
    """
    from threadpoolctl import threadpool_limits

    from trustbench.rtb.review._learning_audit import _models, _rows, _views

    labels = [c.expectations.reference_decision.value for c in cases]
    right = [0] * len(cases)
    accuracy = []
    with threadpool_limits(1):
        views = _views(_documents(cases))
        for _, view, make in _models(seed).values():
            correct = 0
            for group in sorted({c.group for c in cases}):
                test = [i for i, c in enumerate(cases) if c.group == group]
                train = [i for i, c in enumerate(cases) if c.group != group]
                model = make().fit(_rows(views[view], train), [labels[i] for i in train])
                for i, p in zip(test, model.predict(_rows(views[view], test)), strict=True):
                    right[i] += p == labels[i]
                    correct += p == labels[i]
            accuracy.append(correct / len(cases))
    return right, accuracy


def artifact_carriers(cases: list[CaseV3]) -> set[str]:
    """Cases holding the top token of a class the audit's artifact scan finds label-carrying."""
    import re

    from trustbench.rtb.review._learning_audit import FeatureSpace, artifact_scan, token_features

    documents = _documents(cases)
    labels = [c.expectations.reference_decision.value for c in cases]
    report = artifact_scan(documents, labels, [c.group for c in cases], seed=0)
    tokens = {s.top_token for s in report.classes if s.token_class in set(report.carrying)}
    space = FeatureSpace.infer(documents)
    carriers = set()
    for case, document in zip(cases, documents, strict=True):
        held = set(token_features(space, document))
        held |= {re.sub(r"\[[^\]]*\]", "", token) for token in held}
        if held & tokens:
            carriers.add(case.case_id)
    return carriers


def build_cases(
    pool: list[CaseV3], keep: int, ceiling: float, least: int, *, filtered: bool = True
) -> list[CaseV3]:
    """Filter the pool, select, and re-select until every attacker is at or below `ceiling`.

    Every declared rule decides at least `least` selected cases (`rule_quota`). Unfiltered (a
    quick check of the generator, not a corpus to ship), the selection skips the attackers.
    """
    deciding = deciding_rules(pool)
    if not filtered:
        chosen = select(pool, {}, rule_quota(pool, {}, deciding, least))
        random.Random(SEED).shuffle(chosen)
        return chosen
    spare = protected(pool, deciding, least)
    # The features of the whole pool, computed once (the filter's rounds take rows of them).
    views = pool_views(pool)
    pool = aflite(
        pool, keep=keep, rounds=1, step=0.2, threshold=0.4, min_cell=8, spare=spare, views=views
    )
    right = predicted_right(pool, 2, SEED + 99, _sub_views(views, pool))
    score = dict(zip((c.case_id for c in pool), right, strict=True))
    for attempt in range(8):
        chosen = select(pool, score, rule_quota(pool, score, deciding, least))
        right, accuracy = logo_right(chosen, 0)
        carriers = artifact_carriers(chosen)
        print(
            f"selection {attempt}: attackers {[round(a, 3) for a in accuracy]}, "
            f"artifact carriers {len(carriers)}",
            file=sys.stderr,
        )
        if max(accuracy) <= ceiling and not carriers:
            break
        worst = {c.case_id for c, r in zip(chosen, right, strict=True) if r >= 3}
        if max(accuracy) <= ceiling:
            worst = carriers
        pool = [c for c in pool if c.case_id not in worst - spare]
    else:
        raise AuthoringError(f"no selection at or below the ceiling {ceiling:.3f}")
    random.Random(SEED).shuffle(chosen)
    return chosen


README = """\
# RTB corpus v0.3 (policy `rtb-narrow-approval-v3`)

240 synthetic cases in 20 domain groups (4 permit, 4 deny, 4 hold each), authored by
`tools/author_rtb_corpus_v0_3.py` (deterministic; do not edit the JSON by hand, edit the script
and regenerate). The policy adds to v0.2: separation of duties, two-person approval by risk
tier, change-freeze and maintenance windows, break-glass with after-the-fact review, delegated
authority and its scope, and approver scope by environment. See `docs/rtb-corpus-v0.3.md`.

The cases were kept from a larger drawn pool by adversarial filtering: the learned attackers of
`trustbench rtb audit` were fitted on random halves of the domain groups and the cases they
predicted most reliably were dropped. Case ids and record ids are opaque random strings; every
case gets the same presentation variation (UTC offsets, record order, distractor records of
every kind).

Reference status: every reference decision is *authored, pending independent domain review*.
Each case names the policy rules that decide it (`expectations.decisive_rules`).
"""


def write_corpus(
    root: Path, cases: list[CaseV3], version: str = VERSION, readme: str = README
) -> None:
    """Write cases, schemas, prompt, README and manifest of a v0.3 corpus folder."""
    cases_dir = root / "cases"
    cases_dir.mkdir(parents=True, exist_ok=True)
    for stale in cases_dir.glob("*.json"):
        stale.unlink()
    for case in cases:
        text = case.model_dump_json(indent=2, exclude_defaults=False) + "\n"
        (cases_dir / f"{case.case_id}.json").write_text(text, encoding="utf-8")
    write_schemas(root / "schemas", POLICY_ID_V3)
    (root / "prompts").mkdir(exist_ok=True)
    (root / "prompts" / "review_prompt.md").write_text(render_prompt_v3(), encoding="utf-8")
    (root / "README.md").write_text(readme, encoding="utf-8")
    write_manifest(root, version, POLICY_ID_V3)


QUEUE_README = """\
# RTB v0.3 adjudication queue, as a corpus

Draws of `tools/author_rtb_corpus_v0_3.py` on which the authored label, `reference-policy-v3`
and the Cedar encoding disagree: NOT cases of the v0.3 corpus. Each case's reference decision is
the authored label, which at least one implementation contradicts. Freeze a review of them with
`trustbench rtb adjudicate protocol RECORD --corpus THIS_FOLDER`; `adjudication-queue.jsonl`
holds the three decisions of each draw.
"""


def write_queue_corpus(root: Path, queue: list[dict[str, Any]]) -> None:
    """Write the queued draws as a corpus folder an adjudication protocol can freeze.

    The cases keep their authored labels (the checks of a v0.3 corpus are internal: they do
    not ask either implementation), so reviewers' decisions are compared with the label.
    """
    cases = [CaseV3.model_validate(entry["case"]) for entry in queue]
    write_corpus(root, cases, version=f"{VERSION}-queue", readme=QUEUE_README)


def main(argv: list[str] | None = None) -> int:
    """Write the corpus into `--out` (default: the built-in v0.3 folder)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=builtin_corpus_root(VERSION))
    parser.add_argument(
        "--queue",
        type=Path,
        default=None,
        help=f"the adjudication queue (default: OUT/../reviews/v{VERSION}/{QUEUE_NAME})",
    )
    parser.add_argument("--per-twist", type=int, default=1)
    parser.add_argument("--keep", type=int, default=600)
    parser.add_argument(
        "--groups", type=int, default=len(DOMAINS), help="the first N domain groups only"
    )
    # Chance is 1/3 (balanced); the audit's ceiling is chance + 15 points. Select with 2 points
    # of headroom so the audit's own run (same seeds) is not on the edge.
    parser.add_argument("--ceiling", type=float, default=1 / 3 + 0.13)
    parser.add_argument("--least-decided", type=int, default=LEAST_DECIDED)
    parser.add_argument(
        "--queue-corpus",
        type=Path,
        default=None,
        help="also write the queued draws (if any) as a corpus folder for `rtb adjudicate`",
    )
    parser.add_argument(
        "--no-filter",
        action="store_true",
        help="skip the adversarial filter (a quick check of the generator; never ship its output)",
    )
    args = parser.parse_args(argv)
    pool, queue = draw_pool(args.per_twist, groups=args.groups)
    queue_path = args.queue or args.out.parent / "reviews" / f"v{VERSION}" / QUEUE_NAME
    write_queue(queue_path, queue)
    print(f"queued {len(queue)} draw(s) for adjudication in {queue_path}", file=sys.stderr)
    if args.queue_corpus is not None and queue:
        write_queue_corpus(args.queue_corpus, queue)
    cases = build_cases(
        pool, args.keep, args.ceiling, args.least_decided, filtered=not args.no_filter
    )
    write_corpus(args.out, cases)
    return 0


if __name__ == "__main__":
    sys.exit(main())
