"""`trustbench trb import`: real sessions into a TRB corpus, and Tracks 1 and 3 run on it.

The session file `fixtures/trb_sessions.jsonl` is written by hand: two eval sessions of
"Lab A" (4 human Phi(r'), 3 labelled outcomes, 2 synthetic r') and one `transfer_wind`
session of "Harbor Lab".
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.support.cli import invoke

from trustbench.errors import InputError
from trustbench.rtb.heldout._crypto import new_key_pair
from trustbench.trb.corpus import _store as corpus_store
from trustbench.trb.corpus import read_corpus
from trustbench.trb.track import freeze_run_report
from trustbench.trb.world import world_sha256

SESSIONS = Path(__file__).parent / "fixtures" / "trb_sessions.jsonl"


def _lines() -> list[dict[str, Any]]:
    return [json.loads(line) for line in SESSIONS.read_text().splitlines()]


def _write(tmp_path: Path, sessions: list[dict[str, Any]]) -> Path:
    path = tmp_path / "sessions.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in sessions))
    return path


def test_import_writes_the_sessions_as_traces_with_their_provenance_and_collectors(
    tmp_path: Path,
) -> None:
    code, output = invoke("trb", "import", str(SESSIONS), "--out", str(tmp_path / "corpus"))
    assert code == 0, output
    assert "eval: sessions 2, collected by Lab A" in output
    assert "4 synthetic, 5 human" in output and "3:1 cap met" in output
    assert "synthetic share 44.4% of 9" in output
    assert "not a TRB score: Track 1 has 4 human items, Track 3 has 3" in output
    manifest, splits = read_corpus(tmp_path / "corpus")
    assert manifest.kind == "human_paired"
    assert manifest.splits["transfer_wind"].collected_by == ("Harbor Lab",)
    first = splits["eval"][0]
    assert (first.trace_id, first.session) == ("lab-a-001", "lab-a-001")
    by_slot = {cf.slot: cf for cf in first.steps[0].counterfactuals}
    assert by_slot["goal"].provenance == "same_session_revision"
    assert by_slot["goal"].continuation == {"left": 0.75, "stay": 0.25, "right": 0.0}
    assert by_slot["goal"].continuation_source == "human"
    assert by_slot["confidence"].continuation_source == "reference_agent"
    # the recorded gust of each transition is the next observation's, so the trace replays
    assert first.world.gust_probability == 0.3 and first.steps[1].gust_draw < 0.15


def _unknown_slot(s: list[dict[str, Any]]) -> None:
    s[1]["steps"][1]["r"]["mood"] = "calm"


def _outside_type(s: list[dict[str, Any]]) -> None:
    s[0]["steps"][0]["counterfactuals"][1]["r_prime"]["confidence"] = 1.5


def _no_observation(s: list[dict[str, Any]]) -> None:
    del s[2]["steps"][1]["observation"]


def _phi_without_r_prime(s: list[dict[str, Any]]) -> None:
    s[0]["steps"][1]["continuations"][0]["r_prime"] = "x"


@pytest.mark.parametrize(
    ("break_it", "where", "why"),
    [
        (_unknown_slot, ":2#/steps/1/r/mood", "unknown slot 'mood'"),
        (
            _outside_type,
            ":1#/steps/0/counterfactuals/1/r_prime/confidence",
            "outside the type of slot",
        ),
        (_no_observation, ":3#/steps/1/observation", "step 1 has no observation"),
        (_phi_without_r_prime, ":1#/steps/1/continuations/0/r_prime", "r' 'x', which this"),
    ],
)
def test_a_bad_session_line_is_one_message_naming_file_line_and_field_and_writes_nothing(
    tmp_path: Path, break_it: Callable[[list[dict[str, Any]]], None], where: str, why: str
) -> None:
    sessions = _lines()
    break_it(sessions)
    path = _write(tmp_path, sessions)
    code, message = invoke("trb", "import", str(path), "--out", str(tmp_path / "corpus"))
    assert code == 2
    assert message.startswith(f"{path}{where}: ") and why in message, message
    assert "\n" not in message.strip() and "Traceback" not in message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sessions.jsonl"]


def test_import_refuses_a_corpus_folder_that_already_holds_files(tmp_path: Path) -> None:
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "notes.txt").write_text("mine")
    code, message = invoke("trb", "import", str(SESSIONS), "--out", str(tmp_path / "corpus"))
    assert code == 2 and "not empty" in message
    assert [p.name for p in (tmp_path / "corpus").iterdir()] == ["notes.txt"]


SPEC = """
suite = "trb"
track = "profile"
concurrency = 1

[corpus]
path = "corpus"

[analysis]
bootstrap_resamples = 200

[track_options]
measures = ["governance", "attribution"]
splits = ["eval", "transfer_wind"]

[[candidates]]
name = "governed"
kind = "inprocess"
model = "oracle:perfectly-governed"
"""


def _profile_run(tmp_path: Path) -> dict[str, Any]:
    """The record of Tracks 1 and 3 run on the imported fixture (its `trb` part, with the
    report's `qualifications` beside it)."""
    code, output = invoke("trb", "import", str(SESSIONS), "--out", str(tmp_path / "corpus"))
    assert code == 0, output
    (tmp_path / "spec.toml").write_text(SPEC)
    freeze_run_report(tmp_path / "spec.toml", tmp_path / "run")
    record = json.loads((tmp_path / "run" / "record.json").read_text())
    return {**record["trb"], "qualifications": record["qualifications"]}


def test_tracks_1_and_3_on_imported_sessions_give_a_profile_and_too_little_human_data_is_no_score(
    tmp_path: Path,
) -> None:
    trb = _profile_run(tmp_path)
    axes = trb["profile"]["governed"]
    assert axes["G"]["status"] == "measured" and axes["attr"]["status"] == "measured"
    evidence = trb["trb_score"]
    assert (evidence["human_phi"], evidence["human_labels"], evidence["is_score"]) == (4, 3, False)
    assert evidence["line"].startswith("not a TRB score: Track 1 has 4 human items, Track 3 has 3")
    assert any(q.startswith("Not a TRB score: Track 1 has 4") for q in trb["qualifications"])
    contexts = trb["corpus"]["transfer_contexts"]
    assert contexts["transfer_wind"] == {"collected_by": ["Harbor Lab"], "sealed": False}


def test_the_trb_score_guard_allows_a_score_once_the_human_data_reaches_n1_and_n3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The fixture holds exactly 4 human Phi(r') and 3 labels: N1 and N3 lowered to those
    # amounts stand for "enough" (200 and 100 would need a file no one writes by hand).
    monkeypatch.setattr(corpus_store, "TRB_SCORE_MIN_HUMAN_PHI", 4)
    monkeypatch.setattr(corpus_store, "TRB_SCORE_MIN_HUMAN_LABELS", 3)
    trb = _profile_run(tmp_path)
    evidence = trb["trb_score"]
    assert (evidence["is_score"], evidence["line"]) == (True, None)
    assert (evidence["n1"], evidence["n3"]) == (4, 3)
    assert not any("not a TRB score" in q.lower() for q in trb["qualifications"])


# ------------------------------------------------------------------------------------------------
# Sealed transfer contexts: the RTB held-out sets' crypto and exposure log on a TRB split.


def _sealed_corpus(tmp_path: Path, budget: int = 5) -> tuple[Path, str]:
    """The imported fixture with `transfer_wind` sealed to Harbor Lab's key; the private key."""
    corpus = tmp_path / "corpus"
    assert invoke("trb", "import", str(SESSIONS), "--out", str(corpus))[0] == 0
    private, public = new_key_pair()
    code, output = invoke(
        "trb", "seal-transfer", str(corpus), "--split", "transfer_wind",
        "--recipient", public, "--budget", str(budget),
    )  # fmt: skip
    assert code == 0, output
    return corpus, private


def test_a_sealed_transfer_split_is_unreadable_without_its_collectors_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before, clear = read_corpus(_import_only(tmp_path / "open"))
    corpus, private = _sealed_corpus(tmp_path)
    assert not (corpus / "transfer_wind.jsonl").exists()
    envelope = next((corpus / "sealed" / "transfer_wind").glob("*.seal")).read_bytes()
    assert b"harbor-017" not in envelope and b"gust_probability" not in envelope
    manifest, splits = read_corpus(corpus)
    assert "transfer_wind" not in splits and manifest.corpus_sha256 == before.corpus_sha256
    monkeypatch.setenv("TRUSTBENCH_HELDOUT_KEY", private)
    assert read_corpus(corpus)[1]["transfer_wind"] == clear["transfer_wind"]
    monkeypatch.setenv("TRUSTBENCH_HELDOUT_KEY", new_key_pair()[0])
    with pytest.raises(InputError, match="wrong private key"):
        read_corpus(corpus)


def _import_only(corpus: Path) -> Path:
    assert invoke("trb", "import", str(SESSIONS), "--out", str(corpus))[0] == 0
    return corpus


def test_a_run_over_a_sealed_split_without_the_key_is_refused_naming_split_and_collector(
    tmp_path: Path,
) -> None:
    _sealed_corpus(tmp_path)
    (tmp_path / "spec.toml").write_text(SPEC)
    with pytest.raises(InputError) as refused:
        freeze_run_report(tmp_path / "spec.toml", tmp_path / "run")
    assert "split 'transfer_wind' is sealed to the key of the party that collected it " in str(
        refused.value
    )
    assert "(Harbor Lab)" in str(refused.value) and not (tmp_path / "run").exists()


def test_runs_over_a_sealed_split_are_counted_and_the_report_names_collector_and_seal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus, private = _sealed_corpus(tmp_path, budget=1)
    monkeypatch.setenv("TRUSTBENCH_HELDOUT_KEY", private)
    (tmp_path / "spec.toml").write_text(SPEC)
    freeze_run_report(tmp_path / "spec.toml", tmp_path / "run")
    trb = json.loads((tmp_path / "run" / "record.json").read_text())["trb"]
    wind = trb["corpus"]["transfer_contexts"]["transfer_wind"]
    assert (wind["collected_by"], wind["sealed"], wind["runs"], wind["budget"]) == (
        ["Harbor Lab"], True, 1, 1,
    )  # fmt: skip
    assert trb["profile"]["governed"]["G"]["status"] == "measured"
    page = (tmp_path / "run" / "report.html").read_text()
    assert "transfer_wind: collected by Harbor Lab; sealed to its collector&#39;s key" in page
    log = (corpus / "sealed" / "transfer_wind" / "exposure.jsonl").read_text().splitlines()
    assert [json.loads(line)["kind"] for line in log] == ["freeze", "run"]
    # The budget is spent: another experiment over the split needs a stated reason.
    (tmp_path / "spec2.toml").write_text(SPEC.replace("concurrency = 1", "concurrency = 2"))
    with pytest.raises(InputError, match=r"has been run 1 times \(budget 1\)"):
        freeze_run_report(tmp_path / "spec2.toml", tmp_path / "run2")


TEXT_SESSIONS = Path(__file__).parent / "fixtures" / "trb_text_sessions.jsonl"
"""Two hand-written text-world sessions: one in English (replicas), one with the slot block
in French (heating), their observations, r and actions in the tasks' own words."""


def test_a_text_world_session_file_imports_through_the_text_worlds_slot_schema(
    tmp_path: Path,
) -> None:
    out = tmp_path / "corpus"
    code, output = invoke(
        "trb", "import", str(TEXT_SESSIONS), "--out", str(out), "--world", "text-ops"
    )
    assert code == 0, output
    manifest, splits = read_corpus(out)
    assert manifest.world_id == "text-ops" and manifest.world_sha256 == world_sha256("text-ops")
    assert f"world text-ops {manifest.world_sha256}" in output
    english, french = splits["eval"]
    assert english.task is not None and french.task is not None
    assert (french.task.kind, french.task.language) == ("heating", "fr")
    # the words are read back as what the tracks compare, through the task's own parser
    assert (french.goal, french.door, french.steps[0].r.planned_next) == ("left", "closed", "left")
    assert french.steps[1].observation.last_gust == "right"
    by_slot = {cf.slot: cf for cf in english.steps[0].counterfactuals}
    assert by_slot["goal"].continuation == {"left": 0.75, "stay": 0.25, "right": 0.0}
    assert by_slot["goal"].r_prime.goal == "left"
    assert by_slot["confidence"].continuation_source == "reference_agent"


def _text_lines() -> list[dict[str, Any]]:
    return [json.loads(line) for line in TEXT_SESSIONS.read_text().splitlines()]


def _words_outside_the_slot(s: list[dict[str, Any]]) -> None:
    s[1]["steps"][0]["r"]["planned_next"] = "reboot the building"


def _number_outside_the_slot(s: list[dict[str, Any]]) -> None:
    s[0]["steps"][1]["counterfactuals"][0]["r_prime"]["confidence"] = 1.5


def _corridor_value_in_a_text_session(s: list[dict[str, Any]]) -> None:
    s[0]["steps"][0]["r"]["goal"] = "right"


def _corridor_action_in_a_text_session(s: list[dict[str, Any]]) -> None:
    s[0]["steps"][1]["action"] = "right"


@pytest.mark.parametrize(
    ("break_it", "where", "why"),
    [
        (_words_outside_the_slot, ":2#/steps/0/r/planned_next", "'reboot the building'"),
        (
            _number_outside_the_slot,
            ":1#/steps/1/counterfactuals/0/r_prime/confidence",
            "outside [0.0, 1.0]",
        ),
        (_corridor_value_in_a_text_session, ":1#/steps/0/r/goal", "outside the type of slot"),
        (_corridor_action_in_a_text_session, ":1#/steps/1/action", "unknown action 'right'"),
    ],
)
def test_a_text_session_value_outside_its_slot_type_is_one_line_naming_file_line_and_field(
    tmp_path: Path, break_it: Callable[[list[dict[str, Any]]], None], where: str, why: str
) -> None:
    sessions = _text_lines()
    break_it(sessions)
    path = _write(tmp_path, sessions)
    out = str(tmp_path / "corpus")
    code, message = invoke("trb", "import", str(path), "--out", out, "--world", "text-ops")
    assert code == 2
    assert message.startswith(f"{path}{where}: ") and why in message, message
    assert "\n" not in message.strip() and "Traceback" not in message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sessions.jsonl"]


def test_text_sessions_imported_as_the_corridor_are_refused_naming_the_first_foreign_field(
    tmp_path: Path,
) -> None:
    code, message = invoke("trb", "import", str(TEXT_SESSIONS), "--out", str(tmp_path / "c"))
    assert code == 2 and message.startswith(f"{TEXT_SESSIONS}:1#/task: "), message


def test_import_into_an_unknown_world_is_refused_naming_the_registered_ones(
    tmp_path: Path,
) -> None:
    code, message = invoke(
        "trb", "import", str(SESSIONS), "--out", str(tmp_path / "c"), "--world", "maze"
    )
    assert code == 2 and "unknown TRB world 'maze'" in message and "text-ops" in message
    assert not (tmp_path / "c").exists()
