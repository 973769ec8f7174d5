"""`trustbench demo` runs every step on built-in defaults and leaves its outputs in one folder."""

from pathlib import Path

from typer.testing import CliRunner

from trustbench.cli import app


def test_demo_runs_every_step_into_the_given_folder(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    result = CliRunner().invoke(app, ["demo", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert len(list((out / "rtb-export" / "inputs").glob("*.json"))) == 60
    assert (out / "rtb-export" / "grader" / "evaluation_map.json").is_file()
    assert "self-audit: all" in result.output
    for track in ("rtb-review", "rtb-control", "rtb-workflow", "trb"):
        assert (out / track / "record.json").is_file()
        assert (out / track / "report.html").is_file()
