"""Each distinct reply of a case validated and judged once, with `_validation`'s results.

Apart from `_validation` (which says what a valid, supported reply is) because this is only a
faster way to get its answers for a whole report; `tests/rtb/test_reply_grader.py` checks it
against `validate_response` and `support_gaps` on every built-in policy.
"""

from __future__ import annotations

import marshal
from collections.abc import Callable

from pydantic import BaseModel

from trustbench.rtb.policy._protocol import AuthoredCase
from trustbench.rtb.policy._registry import policy_of
from trustbench.rtb.review._validation import (
    ValidatedResponse,
    checked_reply,
    id_by_type_only,
    parsed_reply,
    support_gaps,
)

Graded = tuple[ValidatedResponse, str | None, tuple[str, ...]]
"""A graded reply: its validation without the parsed response (outcome and invalid reason), the
finding's explanation (None without a finding), and its support gaps (`support_gaps`)."""

_MAX_GRADED = 4096
"""At most this many graded replies are kept (a few MB); then they are dropped and kept anew."""


class ReplyGrader:
    """`validate_response` then `support_gaps` for each reply of one report, the same results.

    A report grades every trial of a case, and a reviewer's replies to one case mostly differ
    in their fresh evaluation id alone; validating and judging each of them (pydantic, schema,
    answer key) was most of `report`'s grading CPU (issue 30). A parsed reply whose
    `evaluation_id` is the trial's own is graded once per case and distinct rest of the reply
    (the JSON value with the id blanked, its member order kept), then looked up. That is exact
    because nothing after parsing reads the id's value but to compare it with the input's: the
    policy's schema says only that it is a string (`id_by_type_only`), the response and
    candidate-input models keep it exactly as given (`_keeps_id`), the candidate input is the
    case's under that id (`to_candidate_input`), and `support_gaps` never reads it. Replies of
    any other shape, or of a policy that is not so, are graded in full each time.

    One grader is for one corpus: results are kept by case id.
    """

    def __init__(self, candidate_input: Callable[[AuthoredCase, str], BaseModel]) -> None:
        self._candidate_input = candidate_input
        self._graded: dict[tuple[str, bytes], Graded] = {}
        self._plain: dict[str, bool] = {}
        """Per case id: whether its policy keeps the evaluation id as given (`_keeps_ids`)."""

    def grade(
        self, raw: str | None, case: AuthoredCase, evaluation_id: str, extraction: str
    ) -> Graded:
        """`raw` validated against the case's input under `evaluation_id`, and judged."""
        instance, failed = parsed_reply(raw, extraction)
        if failed is not None:
            return failed, None, tuple(support_gaps(failed, case))
        key = None
        if (
            type(instance) is dict
            and instance.get("evaluation_id") == evaluation_id
            and self._keeps_ids(case)
        ):
            # marshal (version 2: no back-references) is exact for what JSON decodes to: it
            # keeps each value's type (1, 1.0 and true differ), every float's bits and the
            # member order, and `marshal.loads` inverts it, so equal bytes are equal replies.
            key = (case.case_id, marshal.dumps({**instance, "evaluation_id": ""}, 2))
            found = self._graded.get(key)
            if found is not None:
                return found
        validated = checked_reply(instance, self._candidate_input(case, evaluation_id))
        response = validated.response
        graded: Graded = (
            ValidatedResponse(outcome=validated.outcome, invalid_reason=validated.invalid_reason),
            response.explanation if response is not None else None,
            tuple(support_gaps(validated, case)),
        )
        if key is not None:
            if len(self._graded) >= _MAX_GRADED:
                self._graded.clear()
            self._graded[key] = graded
        return graded

    def _keeps_ids(self, case: AuthoredCase) -> bool:
        plain = self._plain.get(case.case_id)
        if plain is None:
            corpus_format = policy_of(case)
            plain = self._plain[case.case_id] = (
                id_by_type_only(corpus_format)
                and _keeps_id(corpus_format.response_model)
                and _keeps_id(corpus_format.candidate_model)
            )
        return plain


_ID_CHANGING_CONFIG = ("str_strip_whitespace", "str_to_lower", "str_to_upper")


def _keeps_id(model: type[BaseModel]) -> bool:
    """Whether `model` holds its `evaluation_id` exactly as given: a plain `str`, no validator."""
    field = model.model_fields.get("evaluation_id")
    decorators = model.__pydantic_decorators__
    return (
        field is not None
        and field.annotation is str
        and not field.metadata
        and not (
            decorators.validators
            or decorators.field_validators
            or decorators.root_validators
            or decorators.model_validators
        )
        and not any(model.model_config.get(name) for name in _ID_CHANGING_CONFIG)
        and model.model_post_init is BaseModel.model_post_init
    )
