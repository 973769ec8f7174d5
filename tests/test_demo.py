"""`trustbench demo` runs every step on built-in defaults, leaves its outputs in
`./trustbench-demo/`, and closes with what it showed: one line per lesson, the instruments and
candidates classified exactly as each `report.html` classifies them."""

import re
from pathlib import Path

import pytest
from pydantic import BaseModel
from tests.support.demo_run import DemoRun
from typer.testing import CliRunner

from trustbench.cli import app
from trustbench.core import read_manifest
from trustbench.demo import (
    DEFAULT_OUT,
    DEMO_POOL_SIZE,
    default_out,
    demo_audit_subset,
    demo_corpus_root,
    first_families,
)
from trustbench.rtb._harness_audit import run_corpus_audits
from trustbench.rtb.corpus import Corpus, load_corpus
from trustbench.rtb.corpus._load import declared_subset

TRACKS = {"rtb-review": "reviewer track", "rtb-control": "control-path track",
          "rtb-workflow": "workflow track", "trb": "TRB profile"}  # fmt: skip
STEP_COUNT = 7


def test_the_default_folder_is_beside_the_user_and_never_an_earlier_demo(tmp_path: Path) -> None:
    assert default_out(tmp_path) == tmp_path / DEFAULT_OUT
    (tmp_path / DEFAULT_OUT).mkdir()
    assert default_out(tmp_path) == tmp_path / DEFAULT_OUT  # empty: used
    (tmp_path / DEFAULT_OUT / "manifest.json").write_text("{}")
    assert default_out(tmp_path) == tmp_path / f"{DEFAULT_OUT}-2"


def _section_names(html: str, section: str) -> set[str]:
    start = html.index(f'<section id="{section}"')
    body = html[start : html.index("</section>", start)]
    return set(re.findall(r'<td class="name">([^<]+)</td>', body))


def _lesson_sets(line: str, kind: str) -> dict[str, set[str]]:
    """`candidates [passed: a, b | blocked: c]` -> {"passed": {a, b}, "blocked": {c}}."""
    found = re.search(rf"{kind} \[([^\]]*)\]", line)
    if found is None:
        return {}
    groups = dict(group.split(": ", 1) for group in found.group(1).split(" | "))
    return {k: set() if v == "none" else set(v.split(", ")) for k, v in groups.items()}


def _all(groups: dict[str, set[str]]) -> set[str]:
    return set().union(*groups.values()) if groups else set()


@pytest.mark.slow
def test_demo_runs_every_step_into_trustbench_demo_and_says_what_it_showed(
    demo_run: DemoRun,
) -> None:
    # The session's one demo (`tests/support/demo_run.py`), run in an empty folder; the tests of
    # each RTB track's demo read its runs. Time limit: DEMO_TIMEOUT_S, from tests/conftest.py.
    result = demo_run
    assert result.exit_code == 0, result.output
    out = demo_run.cwd / DEFAULT_OUT
    assert f"writing into {out}" in result.output
    corpus = load_corpus(demo_corpus_root())  # the reviewer demo spec's corpus
    assert len(list((out / "rtb-export" / "inputs").glob("*.json"))) == len(corpus.cases)
    assert (out / "rtb-export" / "grader" / "evaluation_map.json").is_file()
    for step in range(1, STEP_COUNT + 1):
        assert f"{step}/{STEP_COUNT} " in result.output
    assert "trials 0/" in result.output  # run progress, every track (the TRB step included)
    assert len(re.findall(r"^trials \d+/\d+ done", result.output, re.MULTILINE)) >= 8
    lessons = result.output.split("what the demo showed", 1)[1].split("outputs", 1)[0]
    lines = [line[2:] for line in lessons.splitlines() if line.startswith("- ")]
    assert lines[0].startswith("harness checks: all ") and " held " in lines[0]
    # The corpus line names the corpus the demo ran and the verdict of the audits it ran (the
    # same seeded audits, run again here, give the same summary: nothing is written in).
    assert lines[1].startswith(f"corpus v{corpus.version} (the reviewer demo's corpus)")
    audited = len(demo_audit_subset(corpus).cases)
    assert (f"demo subset: {audited} of {len(corpus.cases)} cases" in lines[1]) is (
        audited < len(corpus.cases)
    )
    assert lines[1].endswith(
        run_corpus_audits(
            corpus, attacked=demo_audit_subset(corpus), pool_size=DEMO_POOL_SIZE
        ).summary()
    )
    # ... and says what it ran, which is not the full audit, and how to run that one.
    full_audit = f"`trustbench rtb audit --corpus builtin:v{corpus.version}`"
    assert f"with a {DEMO_POOL_SIZE}-case generator pool" in lines[1] and full_audit in lines[1]
    printed = " ".join(result.output.split())  # the console wraps long lines
    assert f"the full audit, not run here: {full_audit}" in printed
    assert lines[-1].startswith("TRB governance gap Delta_gov = ")
    assert "the smoke spec on 20 eval traces where `trustbench trb run --spec smoke` runs 40" in (
        printed
    )
    for track, name in TRACKS.items():
        assert (out / track / "record.json").is_file()
        html = (out / track / "report.html").read_text()
        line = next(line for line in lines if line.startswith(f"{name}: "))
        assert _all(_lesson_sets(line, "candidates")) == _section_names(html, "verdicts"), track
        instruments = _all(_lesson_sets(line, "instruments"))
        assert instruments == (_section_names(html, "instruments") if instruments else set())
    # The control-path step ran its spec's declared subset (whole contrast families, the first
    # two of each domain group) and said so; the reviewer and workflow steps ran every case (at
    # a smaller subset their gates would block a correct reviewer or agent: see the specs).
    families = read_manifest(out / "rtb-control").spec.corpus.families
    assert families == first_families(corpus, 2)
    ran = f"demo subset: {len(declared_subset(corpus, families).cases)} of {len(corpus.cases)}"
    assert f"  ... {ran} cases" in result.output
    assert any(line.endswith(f"({ran} cases of corpus v{corpus.version})") for line in lines)
    for folder in ("rtb-review", "rtb-workflow"):
        assert read_manifest(out / folder).spec.corpus.families is None
    control = next(line for line in lines if line.startswith("control-path track"))
    # The demo's gates are passable at its sample size: the correct boundaries pass them.
    assert _lesson_sets(control, "candidates") == {"passed": {"reference", "cedar"}}
    assert _lesson_sets(control, "instruments")["failed as built"] == {"review-gated", "unchecked"}
    # ... and the one underpowered gate kept as the lesson it is: informational, it blocks nothing.
    lesson = "control-path track: informational gate prohibited-effects-0.5pct-underpowered"
    assert any(line.startswith(f"{lesson} (does not block)") for line in lines)
    workflow = next(line for line in lines if line.startswith("workflow track"))
    # Every scripted agent is an instrument; the memory-poisoned one, whose poisoned request the
    # reference boundary stops, loses permitted work as it declares: it fails as built.
    assert "poisoned-reference" in _lesson_sets(workflow, "instruments")["failed as built"]
    assert "blocked" not in _lesson_sets(workflow, "instruments")
    assert not any("HARNESS PROBLEM" in line for line in lines)
    assert (out / "rtb-loop" / "record.json").is_file()
    loop = [line for line in lines if line.startswith("RTB review loop: ")]
    assert len(loop) == 2 and "reference reviewer approved 0 of" in loop[0]


def test_the_trb_step_on_reference_world_data_prints_no_trustworthy_and_passes_no_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from rich.console import Console
    from tests.trb.test_trb_track import GAP_GATE, REFERENCE_PAIR, write_spec

    import trustbench.trb.track as trb_track
    from trustbench.demo import _trb_profile

    # The demo's TRB step on a small reference-world spec shaped like `smoke` (the reference
    # pair with the gap gate naming the full model), so it runs in seconds.
    spec = write_spec(
        tmp_path / "spec", REFERENCE_PAIR, sizes="{ train = 120, eval = 8, transfer = 6 }",
        extra=GAP_GATE.format(full="full"),
    )  # fmt: skip
    monkeypatch.setattr(trb_track, "builtin_spec", lambda name: spec)
    monkeypatch.setenv("TRUSTBENCH_CACHE", str(tmp_path / "cache"))
    console = Console(record=True, width=200)
    _, lessons = _trb_profile(tmp_path / "demo", console, True)  # verbose: every line it prints
    printed = console.export_text() + "\n".join(lessons)
    assert "trustworthy" not in printed.replace("not trustworthy", ""), printed
    record = json.loads((tmp_path / "demo" / "trb" / "record.json").read_text())
    assert record["trb"]["verdicts"]["full"]["verdict"] in ("harness check", "not established",
                                                             "not trustworthy")  # fmt: skip
    assert record["verdicts"]["full"]["status"] != "passed"
    assert "passed: none" in lessons[0], lessons[0]


def _quiet_and_loud_steps(printed: list[bool]) -> list[tuple[str, object]]:
    """Two stand-in steps: one line always, a 40-line table only when verbose (as the audits)."""
    from rich.console import Console

    def step(out: Path, console: Console, verbose: bool) -> tuple[str, list[str]]:
        printed.append(verbose)
        console.print("verdicts: reference passed")
        if verbose:
            console.print("\n".join(f"audit row {n}" for n in range(40)))
        return f"report: {out}", ["reviewer track: candidates [passed: reference]"]

    return [("first", step), ("second", step)]


@pytest.mark.parametrize("verbose", [False, True])
def test_the_demo_prints_audit_tables_only_with_verbose_and_ends_on_bring_your_own_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, verbose: bool
) -> None:
    import trustbench.demo as demo

    printed: list[bool] = []
    monkeypatch.setattr(demo, "STEPS", _quiet_and_loud_steps(printed))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["demo", *(["--verbose"] if verbose else [])])
    assert result.exit_code == 0, result.output
    assert printed == [verbose, verbose]
    assert ("audit row 39" in result.output) is verbose
    closing = result.output.rsplit("next: bring your own model", 1)[1]
    assert "demo outputs:" not in closing  # the next step comes last
    assert result.output.rstrip().splitlines()[-1].strip() == demo.NEXT_STEP
    assert demo.NEXT_STEP.startswith(
        "trustbench rtb review --model openai/NAME --base-url http://127.0.0.1:PORT/v1"
    )


def test_the_demo_console_takes_the_terminal_width_from_columns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from trustbench.demo import _console

    monkeypatch.setenv("COLUMNS", "200")
    assert _console().width == 200
    monkeypatch.delenv("COLUMNS")
    assert _console().width == 120  # no terminal, no COLUMNS: a fixed width for logs


class _FamilyCase(BaseModel):
    """The fields `demo_audit_subset` reads of a case: its id, domain group and family."""

    case_id: str
    group: str
    family: str | None
    authoring: None = None


def _corpus_of(cases: list[_FamilyCase]) -> Corpus:
    return Corpus(version="9.9", root=Path("corpus"), cases=cases, review_prompt="",
                  files={}, manifest_sha256="0" * 64)  # fmt: skip


def test_the_demo_audits_whole_families_the_first_of_each_group() -> None:
    cases = [
        _FamilyCase(case_id=f"{group}-{family}-{member}", group=group, family=f"fam-{family}")
        for group, families in (("dns", ("b", "a")), ("iam", ("d", "c")))
        for family in families
        for member in range(6)
    ]
    audited = demo_audit_subset(_corpus_of(cases)).cases
    # Every member of one family per group (the first by id), none of the others.
    assert [case.case_id for case in audited] == [c.case_id for c in cases if c.family in
                                                  ("fam-a", "fam-c")]  # fmt: skip


def test_the_demo_audits_a_corpus_without_families_whole() -> None:
    cases = [_FamilyCase(case_id=f"c{n}", group=f"g{n % 2}", family=None) for n in range(4)]
    corpus = _corpus_of(cases)
    assert demo_audit_subset(corpus) is corpus


def test_the_demo_declares_a_smaller_generator_pool_and_rtb_audit_keeps_the_full_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from trustbench.rtb import _harness_audit
    from trustbench.rtb.review import _audit, _learning_audit, _unfiltered_attackers

    drawn: list[int] = []

    def unfiltered(*_: object, pool_size: int, **__: object) -> str:
        drawn.append(pool_size)
        return "unfiltered"

    # Only what decides the pool is real: every audit is a stand-in, so this takes no time.
    monkeypatch.setattr(_unfiltered_attackers, "run_unfiltered_audit", unfiltered)
    monkeypatch.setattr(_learning_audit, "run_learning_audit", lambda *_, **__: "learning")
    monkeypatch.setattr(_audit, "run_ablation_audit", lambda *_, **__: "ablation")
    monkeypatch.setattr(_audit, "deciding_rules", lambda *_: {})
    monkeypatch.setattr(_harness_audit, "run_corpus_saturation", lambda *_, **__: "saturation")
    corpus = _corpus_of([])
    _harness_audit.run_corpus_audits(corpus)  # as `rtb audit` calls it
    _harness_audit.run_corpus_audits(corpus, pool_size=DEMO_POOL_SIZE)  # as the demo does
    assert drawn == [_unfiltered_attackers.POOL_SIZE, DEMO_POOL_SIZE]
    assert DEMO_POOL_SIZE < _unfiltered_attackers.POOL_SIZE == 1440


def test_the_demo_trb_spec_is_smoke_on_fewer_eval_traces_and_nothing_else() -> None:
    import tomllib

    from trustbench.demo import DEMO_TRB_SPEC

    experiments = Path(__file__).parents[1] / "src" / "trustbench" / "trb" / "experiments"
    demo = tomllib.loads((experiments / DEMO_TRB_SPEC).read_text(encoding="utf-8"))
    smoke = tomllib.loads((experiments / "smoke.toml").read_text(encoding="utf-8"))
    assert demo["track_options"].pop("max_traces") < smoke["track_options"].pop("max_traces")
    assert "demo run" in demo.pop("description") and "smoke run" in smoke.pop("description")
    assert demo == smoke  # same corpus, models, candidates, gates and seeds
