"""Which model ids the "System under test" block reads as the server's answer about a model."""

from __future__ import annotations

from trustbench.core import CandidateSpec
from trustbench.core.report._system import _reported


def test_a_tracks_own_record_under_its_adapter_id_is_no_reported_model_and_no_mismatch() -> None:
    # TRB's profile track logs each trial's hook calls as one attempt under the adapter id
    # (`proxy:chat`) beside the chat model's own calls: the server reported only `echo`.
    candidate = CandidateSpec(name="echo", kind="openai_chat", model="echo")
    model_ids = {"echo": {("echo", "echo"): 388, ("proxy:chat", "proxy:chat"): 4}}
    reported, unnamed, mismatch = _reported(candidate, model_ids)
    assert (reported, unnamed, mismatch) == ({"echo": 388}, 0, False)


def test_a_server_naming_another_model_for_the_requested_one_is_still_a_mismatch() -> None:
    candidate = CandidateSpec(name="llm", kind="openai_chat", model="m")
    model_ids = {"llm": {("m", "m-2025-01-01"): 3, ("m", None): 1}}
    assert _reported(candidate, model_ids) == ({"m-2025-01-01": 3}, 1, True)
