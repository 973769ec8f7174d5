"""Models that leave a field out of their serialized form while it holds its old default."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, SerializerFunctionWrapHandler, model_serializer


class OmitsDefaults(BaseModel):
    """Leaves each field of `OMITTED` out of the serialized form while it holds a listed value.

    A field added to a stored format is omitted at its default, so every file written before it
    existed (and every one that does not use it) keeps its bytes and hashes, and loads unchanged.
    """

    OMITTED: ClassVar[dict[str, tuple[object, ...]]] = {}
    """Field -> the values at which it is left out."""

    @model_serializer(mode="wrap")
    def _omit_defaults(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        out = handler(self)
        for key, values in self.OMITTED.items():
            if key in out and out[key] in values:
                del out[key]
        return out
