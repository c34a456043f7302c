"""The ``fieldsV1`` encoding of field sets, remembered between the writes of one resource.

Every update decodes the ``fieldsV1`` of each managedFields entry of the live object and
encodes the entries of the new one; the sets repeat (the same managers own the same fields of
the objects of one shape), so :class:`FieldsCodec` keeps the sets it parsed by their encoded
text and the encodings it emitted by their set.

Invariants: :meth:`FieldsCodec.decode` and :meth:`FieldsCodec.encode` answer what
:func:`~setpoint.apimachinery.fieldpath.from_fields_v1` and
:func:`~setpoint.apimachinery.fieldpath.to_fields_v1` answer, malformed input included (it is
never remembered); an encoding handed out is a fresh object the caller may change. Bounded:
at most :data:`MAX_SETS` sets each way, none whose encoding exceeds :data:`MAX_TEXT_BYTES`
(least recently used first out), so at most about 1 MiB of encodings per resource version.
Non-guarantee: a decoded set may be an object an earlier write got too (sets are immutable).
"""

from __future__ import annotations

import collections
from typing import Any, Final

import orjson

from setpoint.apimachinery import fieldpath
from setpoint.apimachinery.fieldpath import FieldSet

#: field sets remembered each way, per codec (one per resource version)
MAX_SETS: Final = 128
#: the longest encoding remembered (bytes of JSON)
MAX_TEXT_BYTES: Final = 4 * 1024


class FieldsCodec:
    """``fieldsV1`` to :data:`FieldSet` and back, remembering recent answers."""

    def __init__(self, max_sets: int = MAX_SETS, max_text_bytes: int = MAX_TEXT_BYTES) -> None:
        self._max_sets = max_sets
        self._max_text = max_text_bytes
        self._sets: collections.OrderedDict[bytes, FieldSet] = collections.OrderedDict()
        self._texts: collections.OrderedDict[FieldSet, bytes] = collections.OrderedDict()

    def decode(self, fields_v1: Any) -> FieldSet:
        """The set ``fields_v1`` describes; ``ValueError`` when it is malformed."""
        if not isinstance(fields_v1, dict):
            return fieldpath.from_fields_v1(fields_v1)  # raises
        try:
            text = orjson.dumps(fields_v1)
        except orjson.JSONEncodeError:
            return fieldpath.from_fields_v1(fields_v1)
        found = self._sets.get(text)
        if found is not None:
            self._sets.move_to_end(text)
            return found
        parsed = fieldpath.from_fields_v1(fields_v1)
        if len(text) <= self._max_text:
            self._sets[text] = parsed
            if len(self._sets) > self._max_sets:
                self._sets.popitem(last=False)
        return parsed

    def encode(self, fields: FieldSet) -> dict[str, Any]:
        """The ``fieldsV1`` object of ``fields`` (a new one on every call)."""
        text = self._texts.get(fields)
        if text is not None:
            self._texts.move_to_end(fields)
            encoded: dict[str, Any] = orjson.loads(text)
            return encoded
        made = fieldpath.to_fields_v1(fields)
        text = orjson.dumps(made)
        if len(text) <= self._max_text:
            self._texts[fields] = text
            if len(self._texts) > self._max_sets:
                self._texts.popitem(last=False)
        return made
