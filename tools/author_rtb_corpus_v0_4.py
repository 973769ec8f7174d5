"""Write the RTB v0.4 corpus (policy `rtb-narrow-approval-v4`): contrast families, unfiltered.

Run from the repository root:

    PYTHONPATH=src python tools/author_rtb_corpus_v0_4.py [--out DIR] [--families N] [--seed S]

The generator lives in the policy package (`trustbench.rtb.policy.narrow_v4._generate`, which
`rtb audit` draws its fresh pools from); this script only writes what it draws: every family
drawn with the seed, nothing selected against a learner or an audit. Members on which the
authored label, `reference-policy-v4` and the Cedar encoding disagree go to the adjudication
queue (`--queue`, default `reviews/v0.4/adjudication-queue.jsonl` beside the corpus folder,
outside its MANIFEST), never into the corpus. Before writing, it checks the corpus contract:
every case passes the policy's checks (family contract and realism included) and, unless
`--families` is below the shipped count, every declared rule decides cases in at least
`LEAST_FAMILIES` families (its ablated reader, as `rtb audit` runs it, decides them otherwise).

Output is deterministic (seeded RNG, no clock); the shipped corpus takes well under 2 minutes.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from trustbench.rtb.corpus._export import to_candidate_input
from trustbench.rtb.corpus._load import builtin_corpus_root, write_manifest, write_schemas
from trustbench.rtb.policy.narrow_v3._reviewer import render_prompt_v3
from trustbench.rtb.policy.narrow_v4 import (
    FAMILIES,
    NARROW_V4,
    POLICY_ID_V4,
    SEED,
    CaseV4,
    check_cases_v4,
    draw_families,
    policy_text_v4,
)

VERSION = "0.4"
QUEUE_NAME = "adjudication-queue.jsonl"
LEAST_FAMILIES = 5
"""Each declared rule decides cases in at least this many families of the shipped corpus."""

README = """\
# RTB corpus v0.4 (policy `rtb-narrow-approval-v4`)

{cases} synthetic cases in {families} contrast families over {groups} domain groups
({permit} permit, {deny} deny, {hold} hold), written by `tools/author_rtb_corpus_v0_4.py` from
the generator in `trustbench.rtb.policy.narrow_v4` with seed {seed} (deterministic; do not edit
the JSON by hand, edit the generator and regenerate). The policy text is v0.3's, rule for rule.

A family is one realistic base world and proposal (a permitted change) plus five edits: one
that changes only presentation (times in another offset, an equivalent encoding, a requester
note) and keeps the permit, two deny and two hold edits that each change the fewest facts needed
to move the decision along one policy rule. A case names its family (`family`) and the member it
was edited from (`edit_of`); both are grader-only. The worlds meet declared realism constraints
(no no-op proposals, upward-closed two-person tiers, risk tier from environment and operation,
production windowed, real resource types, varied service notices, calendar timing), which the
policy's checks verify on every validation.

Nothing was selected against a learner or an audit: the corpus is every family drawn. Each label
is authored by its edit and checked against `reference-policy-v4` and the Cedar encoding;
disagreements go to `../reviews/v0.4/adjudication-queue.jsonl`, never into the corpus. See
`docs/rtb-corpus-v0.4.md`.

Reference status: every reference decision is *authored, pending independent domain review*.
"""


def rule_families(cases: list[CaseV4]) -> dict[str, set[str]]:
    """Rule id -> the families in which its ablated reader decides some case otherwise."""
    readers = {rule.rule_id: NARROW_V4.ablated_reviewer(rule.rule_id) for rule in NARROW_V4.rules}
    found: dict[str, set[str]] = defaultdict(set)
    for case in cases:
        visible = to_candidate_input(case, "authoring")
        label = case.expectations.reference_decision.value
        for rule_id, reader in readers.items():
            if json.loads(reader.review("", visible) or "{}").get("decision") != label:
                found[rule_id].add(case.family)
    return found


def contract_problems(cases: list[CaseV4], least: int) -> list[str]:
    """Why the drawn cases are not a v0.4 corpus (empty: they are)."""
    problems = [str(p) for p in check_cases_v4([(f"{c.case_id}.json", c) for c in cases])]
    if least:
        families = rule_families(cases)
        problems += [
            f"rule {rule.rule_id} decides cases in {len(families[rule.rule_id])} families"
            for rule in NARROW_V4.rules
            if len(families[rule.rule_id]) < least
        ]
    return problems


def write_corpus(root: Path, cases: list[CaseV4], seed: int) -> None:
    """Write cases, schemas, prompt, README and manifest of a v0.4 corpus folder."""
    cases_dir = root / "cases"
    cases_dir.mkdir(parents=True, exist_ok=True)
    for stale in cases_dir.glob("*.json"):
        stale.unlink()
    for case in cases:
        (cases_dir / f"{case.case_id}.json").write_text(
            case.model_dump_json(indent=2) + "\n", encoding="utf-8"
        )
    write_schemas(root / "schemas", POLICY_ID_V4)
    (root / "prompts").mkdir(exist_ok=True)
    prompt = render_prompt_v3(POLICY_ID_V4, policy_text_v4())
    (root / "prompts" / "review_prompt.md").write_text(prompt, encoding="utf-8")
    decisions = [c.expectations.reference_decision.value for c in cases]
    readme = README.format(
        cases=len(cases),
        families=len({c.family for c in cases}),
        groups=len({c.group for c in cases}),
        permit=decisions.count("permit"),
        deny=decisions.count("deny"),
        hold=decisions.count("hold"),
        seed=seed,
    )
    (root / "README.md").write_text(readme, encoding="utf-8")
    write_manifest(root, VERSION, POLICY_ID_V4)


def write_queue(path: Path, queue: list[dict[str, Any]]) -> None:
    """Write the adjudication queue: one canonical JSON line per member (empty file: none)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(entry, sort_keys=True, ensure_ascii=False) + "\n" for entry in queue]
    path.write_text("".join(lines), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    """Draw, check and write the corpus; 1 when the drawn cases break the corpus contract."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=builtin_corpus_root(VERSION))
    parser.add_argument("--queue", type=Path, default=None)
    parser.add_argument("--families", type=int, default=FAMILIES)
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args(argv)
    drawn = draw_families(args.seed, args.families)
    least = LEAST_FAMILIES if args.families >= FAMILIES else 0
    problems = contract_problems(drawn.cases, least)
    if problems:
        print("\n".join(problems[:20]), file=sys.stderr)
        return 1
    queue_path = args.queue or args.out.parent / "reviews" / f"v{VERSION}" / QUEUE_NAME
    write_queue(queue_path, drawn.queue)
    print(f"queued {len(drawn.queue)} member(s) for adjudication in {queue_path}", file=sys.stderr)
    write_corpus(args.out, drawn.cases, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
