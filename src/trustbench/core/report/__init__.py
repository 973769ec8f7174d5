"""Report output: `record.json` (machine) and one self-contained HTML page (people).

Tracks compose a `ReportPage` from blocks (`FiguresBlock`, `ConfusionBlock`, `ForestBlock`,
`ProfileBlock`, `TextBlock`) plus the gate results, manifest summary and qualifications;
`write_report_html` renders it with gates first. `write_record_json` writes the record with
sorted keys and no NaN; `write_trial_rows` the per-trial rows beside it (`record.trials.jsonl`).
"""

from __future__ import annotations

from trustbench.core.report._html import (
    breakdown_table,
    format_counts,
    format_estimate,
    format_interval,
    format_value,
    render_report_html,
    sorted_gates,
    write_report_html,
)
from trustbench.core.report._record import (
    TRIAL_ROWS_FILE,
    TrialRowSpool,
    gates_record,
    iter_trial_rows,
    read_trial_rows,
    record_json_text,
    to_jsonable,
    trial_rows_problems,
    write_record_json,
    write_trial_rows,
)
from trustbench.core.report._verdict import (
    INCOMPLETE_EXIT,
    Block,
    ConfusionBlock,
    FiguresBlock,
    ForestBlock,
    ProfileBlock,
    ReportPage,
    TableBlock,
    TextBlock,
    Verdict,
    release_blocked,
    report_summary,
    subject_verdicts,
)

__all__ = [
    "INCOMPLETE_EXIT",
    "TRIAL_ROWS_FILE",
    "Block",
    "ConfusionBlock",
    "FiguresBlock",
    "ForestBlock",
    "ProfileBlock",
    "ReportPage",
    "TableBlock",
    "TextBlock",
    "TrialRowSpool",
    "Verdict",
    "breakdown_table",
    "format_counts",
    "format_estimate",
    "format_interval",
    "format_value",
    "gates_record",
    "iter_trial_rows",
    "read_trial_rows",
    "record_json_text",
    "release_blocked",
    "render_report_html",
    "report_summary",
    "sorted_gates",
    "subject_verdicts",
    "to_jsonable",
    "trial_rows_problems",
    "write_record_json",
    "write_report_html",
    "write_trial_rows",
]
