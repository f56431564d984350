"""The base of every part of the capacity record (`qualify.capacity.record`)."""

from __future__ import annotations

from pydantic import SerializerFunctionWrapHandler, model_serializer

from qualify.records import StrictModel


class Part(StrictModel):
    """A part of the record: its JSON form holds only the fields that were written, so a field
    the stage did not write (a lane that stopped early, a record of an earlier build) reads as
    its default and stays out of the JSON again."""

    @model_serializer(mode="wrap")
    def _written(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        out: dict[str, object] = handler(self)
        return {k: v for k, v in out.items() if k in self.model_fields_set}
