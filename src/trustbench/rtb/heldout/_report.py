"""What a report says about a held-out set: what was withheld, why, how often it was exposed."""

from __future__ import annotations

import html
from typing import Any


def verdict_line(summary: dict[str, Any]) -> str:
    """The verdict line; a retired or tampered set says so first, so it never reads as held out."""
    if summary["log_problems"]:
        return f"VERDICT: held-out set {summary['set_id']}: exposure log TAMPERED; not trustworthy"
    head = f"held-out set {summary['set_id']}: evaluated {summary['evaluations']} times "
    head += f"(budget {summary['budget']})"
    if summary["retired"]:
        return f"VERDICT: RETIRED (exposed: {summary['retired_reason']}); {head}; not held out"
    if summary["evaluations"] > summary["budget"]:
        return f"VERDICT: OVER BUDGET; {head}"
    return f"VERDICT: {head}"


def summary_lines(summary: dict[str, Any]) -> list[str]:
    """Plain-text lines for the terminal report."""
    lines = [
        verdict_line(summary),
        f"held-out set {summary['set_id']}: evaluated {summary['evaluations']} times "
        f"(budget {summary['budget']})",
        f"cases: {summary['case_count']}",
        f"withheld: {summary['withheld']}",
        "answer key available to the candidate's side: "
        + (
            "YES: the owner's key was in the environment of a run of this experiment"
            if summary["answer_key_available_to_candidate"]
            else "no (sealed to the owner's key)"
        ),
        f"retired: {'yes: ' + str(summary['retired_reason']) if summary['retired'] else 'no'}",
    ]
    lines += [
        f"over budget, reason recorded: {reason}" for reason in summary["over_budget_reasons"]
    ]
    lines += [f"exposure log problem: {p}" for p in summary["log_problems"]]
    return lines


def summary_html(summary: dict[str, Any]) -> str:
    """The same lines as an HTML section (escaped)."""
    items = "".join(f"<li>{html.escape(line)}</li>" for line in summary_lines(summary)[1:])
    return (
        f'<section id="held-out-set"><h2>Held-out set</h2>'
        f"<p><strong>{html.escape(verdict_line(summary))}</strong></p><ul>{items}</ul></section>\n"
    )
