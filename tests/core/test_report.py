"""The HTML report page and the JSON record writer."""

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from trustbench.core.figures import not_run_figure, rate_figure
from trustbench.core.gates import GateSpec, evaluate_gates
from trustbench.core.report import (
    ConfusionBlock,
    FiguresBlock,
    ForestBlock,
    ProfileBlock,
    ReportPage,
    TextBlock,
    gates_record,
    record_json_text,
    render_report_html,
    write_record_json,
    write_report_html,
)
from trustbench.core.stats import paired_difference
from trustbench.errors import InputError

HOSTILE = "<script>alert('x')</script> & $\\alpha$"


class _Collector(HTMLParser):
    """Collects tags, resource-bearing attributes, ids and text of a page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.resources: list[str] = []
        self.ids: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for name, value in attrs:
            if name in {"src", "href", "xlink:href", "action", "data", "poster"} and value:
                self.resources.append(value)
            if name == "id" and value:
                self.ids.append(value)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _figures() -> list:
    groups = [f"g{i // 2}" for i in range(12)]
    difference, _ = paired_difference(
        "false_approval_difference",
        [1, 0, 1, 1, 0, 0, 1, 0, 1, 1, 0, 1],
        [0] * 12,
        clusters=groups,
        description="deny cases",
        cluster="domain_group",
        resamples=200,
    )
    return [
        rate_figure(
            "false_approval_rate",
            3,
            20,
            unit="case",
            description="deny cases",
            one_sided_upper=True,
        ),
        not_run_figure("prohibited_effect_rate", description="trials", reason="not in run"),
        rate_figure("unsupported_completion_rate", 0, 0, description="claims"),
        difference,
    ]


def _page(gates: bool = True) -> ReportPage:
    figures = _figures()
    specs = [
        GateSpec(metric="unsupported_completion_rate", threshold=0, comparison="<="),
        GateSpec(
            metric="false_approval_rate",
            threshold=0.05,
            comparison="<=",
            bound="upper",
            interval_method="clopper_pearson",
            confidence=0.95,
        ),
    ]
    return ReportPage(
        title=f"Report {HOSTILE}",
        subtitle="demo",
        gates=evaluate_gates(specs, figures) if gates else [],
        sections=[
            FiguresBlock(title="Figures", figures=figures),
            ConfusionBlock(
                title="Confusion",
                rows=["permit", "deny", "hold"],
                columns=["permit", "deny", "hold", "missing", HOSTILE],
                counts=[[5, 1, 0, 0, 0], [2, 3, 0, 1, 0], [1, 0, 4, 0, 1]],
            ),
            ForestBlock(title="Forest", figures=figures),
            ProfileBlock(
                title="Profile",
                axes=["G", "ground", "attr"],
                series={"full": [0.8, 0.6, None], HOSTILE: [0.2, 0.5, 0.4]},
                errors={"full": [(0.7, 0.9), None, None]},
                radar=True,
            ),
            TextBlock(title="Notes", paragraphs=[HOSTILE]),
        ],
        manifest={"manifest sha256": "0" * 64, "endpoint": "http://127.0.0.1:8000/v1"},
        qualifications=["Synthetic cases; not a validated test population."],
    )


@pytest.fixture(scope="module")
def page_html() -> str:
    return render_report_html(_page())


def test_page_with_every_block_parses_and_references_no_external_resource(page_html: str) -> None:
    parser = _Collector()
    parser.feed(page_html)
    parser.close()
    assert parser.tags[0] == "html" and parser.tags.count("svg") == 4  # heatmap, forest, bar, radar
    assert "script" not in parser.tags and "link" not in parser.tags and "img" not in parser.tags
    external = [r for r in parser.resources if not r.startswith(("#", "data:"))]
    assert external == []
    # The only URL on the page is the manifest's endpoint, shown as text, not fetched.
    assert re.findall(r"https?://[^\s<\"]+", page_html) == ["http://127.0.0.1:8000/v1"]
    assert len(parser.ids) == len(set(parser.ids)), "SVG ids collide between plots"


def test_page_escapes_record_text(page_html: str) -> None:
    assert "<script>" not in page_html
    assert "&lt;script&gt;" in page_html


def test_unrun_figure_is_shown_as_not_run_never_zero(page_html: str) -> None:
    row = re.search(r"<td class=\"name\">prohibited_effect_rate</td>(.*?)</tr>", page_html, re.S)
    assert row is not None
    assert "not run" in row.group(1) and "0.00%" not in row.group(1)
    na_row = re.search(
        r"<td class=\"name\">unsupported_completion_rate</td>(.*?)</tr>", page_html, re.S
    )
    assert na_row is not None and "n/a" in na_row.group(1)


def test_failed_gate_is_shown_before_the_figures_table_and_above_other_gates(
    page_html: str,
) -> None:
    failed = page_html.index("FAILED")
    assert failed < page_html.index('<table class="figures">')
    assert failed < page_html.index("NOT EVALUABLE")
    assert "Release blocked" in page_html


def test_page_without_gates_says_none_were_declared() -> None:
    html = render_report_html(_page(gates=False))
    assert "No release gates were declared" in html
    assert html.index("No release gates") < html.index('<table class="figures">')


def test_rendering_is_deterministic(page_html: str) -> None:
    assert render_report_html(_page()) == page_html


def test_write_report_html_writes_utf8_file(tmp_path: Path) -> None:
    path = write_report_html(tmp_path / "run" / "report.html", _page())
    assert path.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_record_json_is_sorted_stable_and_round_trips(tmp_path: Path) -> None:
    figures = _figures()
    results = evaluate_gates(
        [GateSpec(metric="false_approval_rate", threshold=0.5, comparison="<=")], figures
    )
    record = {"zeta": 1, "figures": figures, "gates": gates_record(results), "alpha": ("a", "b")}
    path = write_record_json(tmp_path / "record.json", record)
    text = path.read_text(encoding="utf-8")
    assert text == record_json_text(record) and text.endswith("\n")
    loaded = json.loads(text)
    assert list(loaded) == ["alpha", "figures", "gates", "zeta"]
    assert loaded["figures"][1]["status"] == "not_run"
    assert loaded["figures"][1]["estimate"] is None
    assert loaded["gates"]["passed"] == 1 and loaded["gates"]["blocking"] is False
    assert [p.name for p in tmp_path.iterdir()] == ["record.json"]  # no temporary left


def test_record_json_refuses_nan_naming_the_pointer(tmp_path: Path) -> None:
    with pytest.raises(InputError) as problem:
        write_record_json(tmp_path / "record.json", {"tracks": {"review/x": [1.0, float("nan")]}})
    assert "record.json#/tracks/review~1x/1" in str(problem.value)
    assert not (tmp_path / "record.json").exists()


def test_gates_record_counts_blocking_when_a_gate_is_not_evaluable() -> None:
    results = evaluate_gates([GateSpec(metric="absent", threshold=0, comparison="<=")], [])
    summary = gates_record(results)
    assert summary["not_evaluable"] == 1 and summary["blocking"] is True
