"""A report's record as tests read it: `record.json` with each part's per-trial rows put back.

`trustbench report` writes the per-trial rows to `record.trials.jsonl` beside `record.json`
(see `trustbench.core.report._record`). Tests that assert on rows read them through this,
under the key they had when they lived in the record (`record[part]["trials"]`), after checking
that the rows file is the one `record.json` names by digest and that `record.json` itself holds
no rows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trustbench.core.report import iter_trial_rows, trial_rows_problems


def full_record(run_dir: Path) -> dict[str, Any]:
    """`run_dir/record.json` with `record[part]["trials"]` = that part's rows from the JSONL."""
    record: dict[str, Any] = json.loads((Path(run_dir) / "record.json").read_text())
    assert trial_rows_problems(run_dir, record) == []
    for part in record["trial_rows"]["rows"]:
        assert "trials" not in record.get(part, {}) or not isinstance(
            record[part]["trials"], list
        ), f"record.json holds {part} rows"
    for row in iter_trial_rows(run_dir):
        section = record.setdefault(row.pop("part"), {})
        section.setdefault("trials", []).append(row)
    return record
