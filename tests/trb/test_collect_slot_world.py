"""The collection app serving a world with its own slots (the triage desk of tests/support).

The source corpus is two imported triage sessions; the app shows each item from the world's
declaration (observation fields, slots, its four actions), asks Track 3's question through the
declared attribution slot (a number in [0, 1], checked server-side), and its export is a
session file that `trb import --world triage` reads.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient
from jsonschema import Draft202012Validator
from tests.support.cli import invoke
from tests.support.triage_world import TRIAGE_DECLARATION, registered_triage_world, triage_session
from tests.trb.collect_fixtures import nonce, page_kind, serve

from trustbench.core import read_ledger
from trustbench.errors import InputError
from trustbench.trb.collect import export_collection, freeze_protocol
from trustbench.trb.collect._store import SlotAnswerError, read_frozen, slot_answer
from trustbench.trb.corpus import read_corpus_of_any_world
from trustbench.trb.corpus._import import import_sessions, session_json_schema

PROTOCOL = """
description = "triage desk pilot"
[corpus]
path = "source"
[items]
max_traces = 1
steps = [0, 1]
r_prime_slots = ["priority", "suspected_cause", "eta_hours"]
seed = 5
[session]
participants_per_item = 2
[[participants]]
id = "p01"
split = "eval"
[[participants]]
id = "p02"
split = "eval"
"""
"""One three-step trace, its first two steps, three r' each: 6 items per participant, each
followed by its Track 3 question (neither step is the last)."""

CORRIDOR_WORDS = ("corridor", "cell", "door", "gust", "wind", "goal", "move left", "move right")


def _frozen_triage_collection(tmp_path: Path, protocol: str = PROTOCOL) -> Path:
    """Import two triage sessions as the source corpus, freeze `protocol` over it."""
    sessions = tmp_path / "desk.jsonl"
    sessions.write_text("".join(json.dumps(triage_session(i, seed=4)) + "\n" for i in range(2)))
    import_sessions(sessions, tmp_path / "source", "triage")
    (tmp_path / "protocol.toml").write_text(protocol, encoding="utf-8")
    freeze_protocol(tmp_path / "protocol.toml", tmp_path / "collection")
    return tmp_path / "collection"


async def _answer_all(client: TestClient, token: str) -> int:
    """Answer every page: `escalate` on an item, P(self) = 0.75 on its Track 3 question."""
    page = await (await client.get(f"/s/{token}")).text()
    posted = 0
    while page_kind(page) != "complete" and posted < 40:
        if page_kind(page) == "item":
            form = {"nonce": nonce(page), "action": "escalate", "note": ""}
            response = await client.post(f"/s/{token}/answer", data=form)
        else:
            form = {"nonce": nonce(page), "caused_by_self": "0.75"}
            response = await client.post(f"/s/{token}/attribute", data=form)
        page = await response.text()
        posted += 1
    return posted


def test_a_triage_item_page_shows_its_own_slots_and_four_actions_and_no_corridor_words(
    tmp_path: Path,
) -> None:
    with registered_triage_world():
        folder = _frozen_triage_collection(tmp_path)

        async def driver(client: TestClient, tokens: dict[str, str]) -> tuple[str, str]:
            item = await (await client.get(f"/s/{tokens['p01']}")).text()
            form = {"nonce": nonce(item), "action": "wait"}
            outcome = await (await client.post(f"/s/{tokens['p01']}/answer", data=form)).text()
            return item, outcome

        item, outcome = serve(folder, driver)
    for slot in ("priority", "suspected_cause", "eta_hours"):
        assert "<th title=" in item and f">{slot}</th>" in item
    for field in TRIAGE_DECLARATION.observation.fields:
        assert f"<th>{field}</th>" in item
    for action in TRIAGE_DECLARATION.action_space.actions:
        assert f'name="action" value="{action}"' in item
    shown = item.partition("<main>")[2].lower()  # the page's text, not the shared stylesheet
    assert not [word for word in CORRIDOR_WORDS if word in shown]
    assert page_kind(outcome) == "outcome"
    assert 'type="number" id="slot-caused_by_self" name="caused_by_self" min="0.0" max="1.0"' in (
        outcome
    )
    assert "desk-" not in item + outcome  # no trace id on any page


def test_an_attribution_outside_its_bounds_is_refused_naming_the_slot_and_nothing_is_stored(
    tmp_path: Path,
) -> None:
    with registered_triage_world():
        folder = _frozen_triage_collection(tmp_path)

        async def driver(client: TestClient, tokens: dict[str, str]) -> tuple[str, str, str]:
            token = tokens["p01"]
            item = await (await client.get(f"/s/{token}")).text()
            form = {"nonce": nonce(item), "action": "rollback"}
            outcome = await (await client.post(f"/s/{token}/answer", data=form)).text()
            over = {"nonce": nonce(outcome), "caused_by_self": "1.5"}
            refused = await (await client.post(f"/s/{token}/attribute", data=over)).text()
            text = {"nonce": nonce(outcome), "caused_by_self": "likely"}
            not_a_number = await (await client.post(f"/s/{token}/attribute", data=text)).text()
            fine = {"nonce": nonce(outcome), "caused_by_self": "1"}
            accepted = await (await client.post(f"/s/{token}/attribute", data=fine)).text()
            return refused, not_a_number, accepted

        refused, not_a_number, accepted = serve(folder, driver)
    assert "caused_by_self: 1.5 is outside [0.0, 1.0]" in refused
    assert "caused_by_self: &#39;likely&#39; is not a number" in not_a_number
    assert page_kind(accepted) == "item"
    events = read_ledger(folder).events
    assert [e["data"]["answer"] for e in events if e["kind"] == "collect_attribution"] == [1.0]
    assert len([e for e in events if e["kind"] == "collect_rejected"]) == 2


def test_a_protocol_serving_corridor_slots_from_a_triage_corpus_is_refused_naming_the_field(
    tmp_path: Path,
) -> None:
    corridor_slots = 'r_prime_slots = ["goal", "belief", "planned_next", "confidence"]'
    protocol = PROTOCOL.replace('r_prime_slots = ["priority", "suspected_cause", "eta_hours"]',
                                corridor_slots)  # fmt: skip
    refusal = "'goal' is not an editable slot of world triage"
    with registered_triage_world(), pytest.raises(InputError, match=refusal) as refused:
        _frozen_triage_collection(tmp_path, protocol)
    assert refused.value.location == "items/r_prime_slots"


def test_a_triage_collection_opened_without_its_world_registered_is_refused_naming_it(
    tmp_path: Path,
) -> None:
    with registered_triage_world():
        folder = _frozen_triage_collection(tmp_path)
    with pytest.raises(InputError, match="unknown TRB world 'triage'") as refused:
        read_frozen(folder)
    assert str(refused.value.location).endswith("protocol.json#/traces/0/world_id")


def test_the_recorded_continuation_is_shown_over_the_four_actions_when_the_protocol_says_so(
    tmp_path: Path,
) -> None:
    protocol = PROTOCOL.replace("[session]", "[session]\nshow_model_continuation = true")
    with registered_triage_world():
        folder = _frozen_triage_collection(tmp_path, protocol)

        async def driver(client: TestClient, tokens: dict[str, str]) -> str:
            return await (await client.get(f"/s/{tokens['p01']}")).text()

        item = serve(folder, driver)
    shown = item.partition('id="model-continuation">')[2].partition("</p>")[0]
    assert shown.startswith("The recorded continuation under r&prime;:")
    assert all(f"{action} " in shown for action in TRIAGE_DECLARATION.action_space.actions)


def test_a_posted_slot_value_is_read_as_its_declared_type() -> None:
    slots = TRIAGE_DECLARATION.slots
    assert slot_answer("priority", slots["priority"], "high") == "high"
    assert slot_answer("eta_hours", slots["eta_hours"], " 12.5 ") == 12.5
    with pytest.raises(SlotAnswerError, match=r"^priority: 'urgent' is not one of"):
        slot_answer("priority", slots["priority"], "urgent")
    with pytest.raises(SlotAnswerError, match=r"^eta_hours: 100.0 is outside \[0.0, 72.0\]"):
        slot_answer("eta_hours", slots["eta_hours"], "100")
    with pytest.raises(SlotAnswerError, match=r"^eta_hours: give a value"):
        slot_answer("eta_hours", slots["eta_hours"], "  ")


def test_collected_triage_answers_export_to_sessions_that_import_with_exit_0(
    tmp_path: Path,
) -> None:
    with registered_triage_world():
        folder = _frozen_triage_collection(tmp_path)

        async def driver(client: TestClient, tokens: dict[str, str]) -> list[int]:
            return [await _answer_all(client, tokens[p]) for p in ("p01", "p02")]

        assert serve(folder, driver) == [12, 12]  # 6 items each, each with its Track 3 page
        report = export_collection(folder, tmp_path / "out")
        code, output = invoke("trb", "import", str(tmp_path / "out" / "sessions.jsonl"),
                              "--out", str(tmp_path / "paired"), "--world", "triage")  # fmt: skip
        assert code == 0, output
        manifest, splits = read_corpus_of_any_world(tmp_path / "paired")
    assert manifest.world_id == "triage" and manifest.kind == "human_paired"
    assert report["items"]["answered"] == 6 and report["agreement"]["pairwise_agreement"] == 1.0
    assert report["attribution"]["answers"] == 12  # every Track 3 question has a label
    served = [cf for step in splits["eval"][0].steps[:2] for cf in step.counterfactuals]
    assert len(served) == 6
    assert all(cf.continuation_source == "human" for cf in served)
    assert all(cf.continuation["escalate"] == 1.0 for cf in served)
    assert not splits["eval"][0].steps[2].counterfactuals  # a step not served keeps no r'


def test_exported_triage_sessions_meet_the_json_schema_written_from_the_declaration(
    tmp_path: Path,
) -> None:
    with registered_triage_world():
        folder = _frozen_triage_collection(tmp_path)

        async def driver(client: TestClient, tokens: dict[str, str]) -> int:
            return await _answer_all(client, tokens["p01"])

        serve(folder, driver)
        export_collection(folder, tmp_path / "out")
        validator = Draft202012Validator(session_json_schema("triage"))
    lines = [json.loads(line) for line in (tmp_path / "out" / "sessions.jsonl").open()]
    assert len(lines) == 1 and not list(validator.iter_errors(lines[0]))
    lines[0]["steps"][0]["r"]["eta_hours"] = 100.0
    lines[0]["steps"][0]["action"] = "reboot"
    failed = {tuple(error.absolute_path) for error in validator.iter_errors(lines[0])}
    assert failed == {("steps", 0, "r", "eta_hours"), ("steps", 0, "action")}


def test_a_world_with_open_ended_actions_is_refused_at_freeze_naming_the_corpus(
    tmp_path: Path,
) -> None:
    """The app asks for one of K actions: free-text replies are refused, never shown as none."""
    from tests.support.reply_world import registered_reply_world, reply_session

    sessions = tmp_path / "replies.jsonl"
    sessions.write_text("".join(json.dumps(reply_session(i, seed=4)) + "\n" for i in range(2)))
    with registered_reply_world():
        import_sessions(sessions, tmp_path / "source", "triage-reply")
        (tmp_path / "protocol.toml").write_text(PROTOCOL, encoding="utf-8")
        with pytest.raises(InputError, match="declares open-ended actions") as refused:
            freeze_protocol(tmp_path / "protocol.toml", tmp_path / "collection")
    assert refused.value.location == "corpus/path"
    assert not (tmp_path / "collection").exists()
