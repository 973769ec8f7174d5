"""Checks that remember their findings (schema problems, leak scans, tool argument models)
report exactly what a fresh check would: per file, per position, per forbidden set, per tool."""

from __future__ import annotations

import asyncio
from typing import Any

from trustbench.rtb.corpus._leakscan import find_leaks
from trustbench.rtb.corpus._load import schema_problems
from trustbench.rtb.workflow._tools import _arguments_model, tool_schema

BAD_INPUT: dict[str, Any] = {"evaluation_id": 7}


def test_a_remembered_schema_problem_names_the_file_it_was_found_in_now() -> None:
    first = schema_problems("a.json", BAD_INPUT, "candidate_input.schema.json")
    second = schema_problems("b.json", dict(BAD_INPUT), "candidate_input.schema.json")
    assert first and {p.file for p in first} == {"a.json"}
    assert [(p.pointer, p.message) for p in second] == [(p.pointer, p.message) for p in first]
    assert {p.file for p in second} == {"b.json"}


def test_a_document_changed_after_its_check_is_checked_again() -> None:
    document: dict[str, Any] = {"evaluation_id": 7}
    before = schema_problems("c.json", document, "candidate_input.schema.json")
    document["evaluation_id"] = "e-1"
    after = schema_problems("c.json", document, "candidate_input.schema.json")
    assert before != after
    assert not any(p.pointer == "/evaluation_id" for p in after)


def test_the_same_text_is_reported_at_every_place_it_occurs() -> None:
    payload = {"a": "see case-07 now", "b": ["see case-07 now"]}
    leaks = find_leaks(payload, {"case-07"})
    assert [(leak.pointer, leak.found) for leak in leaks] == [
        ("/a", "case-07"),
        ("/b/0", "case-07"),
    ]


def test_a_text_clean_for_one_forbidden_set_is_still_scanned_for_another() -> None:
    assert find_leaks("the answer is case-07", {"case-08"}) == []
    assert [leak.found for leak in find_leaks("the answer is case-07", {"case-07"})] == ["case-07"]


class _Tools:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    async def look(self, name: str, count: int = 1) -> dict[str, Any]:
        """Look a name up.

        Args:
            name: What to look up.
            count: How many.
        """
        return {"found": f"{self.prefix}{name}" * count}


def test_tools_of_two_toolboxes_share_one_argument_model_and_keep_their_own_state() -> None:
    one, two = _Tools("1:"), _Tools("2:")
    assert _arguments_model(one.look) is _arguments_model(two.look)
    model = _arguments_model(one.look)
    assert set(model.model_fields) == {"name", "count"}  # `self` is not an argument
    assert asyncio.run(one.look(**model.model_validate({"name": "x"}).model_dump())) == {
        "found": "1:x"
    }
    assert asyncio.run(two.look(name="x")) == {"found": "2:x"}
    schema = tool_schema(two.look)["function"]["parameters"]
    assert schema["required"] == ["name"] and "self" not in schema["properties"]


def test_a_tool_schema_is_the_callers_own_copy_and_the_next_caller_gets_it_whole() -> None:
    one, two = _Tools("1:"), _Tools("2:")
    first = tool_schema(one.look)
    first["function"]["parameters"]["properties"].pop("count")
    first["function"]["description"] = "changed by its caller"
    second = tool_schema(two.look)
    assert set(second["function"]["parameters"]["properties"]) == {"name", "count"}
    assert second["function"]["description"] == "Look a name up."
    assert second["function"]["name"] == "look"
