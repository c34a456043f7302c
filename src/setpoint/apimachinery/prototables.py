"""The protobuf messages of Kubernetes' built-in kinds, as the protobuf decoder reads them.

``kubernetes-protobuf.json`` beside this module is extracted by ``scripts/extract_protobuf.py``
from Kubernetes' own ``generated.proto`` files and the Go types they are generated from
(Apache-2.0, the Kubernetes Authors; the file records the release, the sources and their
SHA-256). For every group version it lists the kinds, and for every message those kinds reach,
its fields: number, JSON name, type and how Go's JSON encoding shows them.

A field's type is a scalar (``string``, ``bytes``, ``bool``, ``int32``, ``int64``, ``uint32``,
``uint64``, ``double``, ``float``), a message name, or ``map<key,value>``; its flags are ``r``
(repeated), ``o`` (``omitempty``), ``p`` (a Go pointer: present means shown, even when zero)
and ``i`` (inline: the message's members are the parent's). A message whose JSON is not an
object has a *form* (:data:`FORMS`): ``time``, ``microtime``, ``duration``, ``json`` (a
JSON value in bytes field 1), ``intorstring``, ``quantity``, ``list`` (a named slice), and the
three ``JSONSchemaPropsOr...`` unions.

Invariants of a loaded :class:`Tables`: every message a field names is in the tables, every
kind names a message, flags and forms are known ones (checked on load, :class:`TableError`
otherwise); nothing is mutated after loading. Non-guarantees: only the group versions the data
file lists are known.
"""

from __future__ import annotations

import importlib.resources
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

__all__ = ["FORMS", "DATA_FILE", "Field", "Message", "TableError", "Tables"]

DATA_FILE = "kubernetes-protobuf.json"

#: the kinds ``metav1.AddToGroupVersion`` registers in every group version live in meta/v1,
#: which is also a group version of its own
META_API_VERSION = "meta.k8s.io/v1"

FORMS = frozenset({"time", "microtime", "duration", "json", "intorstring", "quantity", "list",
                   "schemaorarray", "schemaorbool", "schemaorstringarray"})

# field kinds
STRING, BYTES, BOOL, INT32, INT64, UINT32, UINT64, DOUBLE, FLOAT, MESSAGE, MAP, RAW = range(12)

# wire types
VARINT, FIXED64, LEN, FIXED32 = 0, 1, 2, 5

_SCALARS = {"string": STRING, "bytes": BYTES, "bool": BOOL, "int32": INT32, "int64": INT64,
            "uint32": UINT32, "uint64": UINT64, "double": DOUBLE, "float": FLOAT}
_WIRE = {STRING: LEN, BYTES: LEN, RAW: LEN, MESSAGE: LEN, MAP: LEN, BOOL: VARINT,
         INT32: VARINT, INT64: VARINT, UINT32: VARINT, UINT64: VARINT, DOUBLE: FIXED64,
         FLOAT: FIXED32}
_FLAGS = frozenset("ropi")


class TableError(ValueError):
    """The data file is not a table this module understands."""


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a message.

    ``kind`` is one of the scalar kinds, ``MESSAGE`` (``message`` names it), ``MAP`` (``key``
    is the key's scalar kind; ``value`` the value's kind and ``message`` its message, if any)
    or ``RAW`` (the bytes themselves, for the ``json`` form). ``omit_zero`` says an empty
    value is left out of the JSON: a zero scalar of an ``omitempty`` non-pointer field, and
    any empty list or map.
    """

    number: int
    json: str
    kind: int
    wire: int
    message: str | None
    repeated: bool
    omitempty: bool
    pointer: bool
    inline: bool
    omit_zero: bool
    key: int = STRING
    value: int = STRING
    key_wire: int = LEN
    value_wire: int = LEN


@dataclass(frozen=True, slots=True)
class Message:
    """A message: its fields by number, their order in Go's JSON, its form if not an object."""

    name: str
    form: str | None
    fields: Mapping[int, Field]
    rank: Mapping[int, int]  # field number -> position in the JSON object
    own: frozenset[str]  # JSON names of the fields that are not inline
    ascending: bool  # the JSON order is the order of the field numbers


def _kind(type_name: str, messages: Mapping[str, Any], where: str) -> tuple[int, str | None]:
    if type_name in _SCALARS:
        return _SCALARS[type_name], None
    if type_name not in messages:
        raise TableError(f"{where}: message {type_name!r} is not in the tables")
    return MESSAGE, type_name


def _field(row: Any, messages: Mapping[str, Any], form: str | None, where: str) -> Field:
    if not (isinstance(row, list) and len(row) == 4 and isinstance(row[0], int)
            and isinstance(row[1], str) and isinstance(row[2], str)
            and isinstance(row[3], str)):
        raise TableError(f"{where}: a field is [number, json name, type, flags], not {row!r}")
    number, json_name, type_name, flags = row
    if not 1 <= number < 1 << 29 or not set(flags) <= _FLAGS:
        raise TableError(f"{where}: field {number} has an invalid number or flags {flags!r}")
    repeated, inline = "r" in flags, "i" in flags
    key = value = STRING
    if type_name.startswith("map<") and type_name.endswith(">"):
        key_name, _, value_name = type_name[4:-1].partition(",")
        key = _SCALARS.get(key_name, MESSAGE)
        if key in (MESSAGE, BYTES, BOOL, DOUBLE, FLOAT):
            raise TableError(f"{where}: map key type {key_name!r} is not allowed")
        value, message = _kind(value_name, messages, where)
        kind = MAP
    else:
        kind, message = _kind(type_name, messages, where)
    if form == "json" and number == 1 and kind == BYTES:
        kind = RAW
    if inline and (kind != MESSAGE or repeated):
        raise TableError(f"{where}: only a single message can be inline")
    pointer, omitempty = "p" in flags, "o" in flags
    omit_zero = repeated or kind == MAP or (omitempty and not pointer and kind != MESSAGE)
    if form is not None:  # a form reads its fields as they are
        omit_zero = repeated or kind == MAP
    return Field(number, json_name, kind, _WIRE[kind], message, repeated, omitempty, pointer,
                 inline, omit_zero, key, value, _WIRE[key], _WIRE[value])


def _message(name: str, entry: Any, messages: Mapping[str, Any]) -> Message:
    if not isinstance(entry, dict) or not isinstance(entry.get("fields"), list):
        raise TableError(f"{name}: a message is an object with a list of fields")
    form = entry.get("form")
    if form is not None and form not in FORMS:
        raise TableError(f"{name}: unknown form {form!r}")
    fields: dict[int, Field] = {}
    for row in entry["fields"]:
        f = _field(row, messages, form, name)
        if f.number in fields:
            raise TableError(f"{name}: field {f.number} is defined twice")
        fields[f.number] = f
    return Message(name, form, fields, {n: i for i, n in enumerate(fields)},
                   frozenset(f.json for f in fields.values() if not f.inline),
                   list(fields) == sorted(fields))


@dataclass(frozen=True, slots=True)
class Tables:
    """The messages, and the kinds by ``(apiVersion, kind)``."""

    kubernetes_version: str
    messages: Mapping[str, Message]
    kinds: Mapping[tuple[str, str], Message]

    @classmethod
    def from_document(cls, document: Any) -> Tables:
        """Tables from the data file's JSON; :class:`TableError` if it is not well-formed."""
        if not isinstance(document, dict):
            raise TableError("the tables are a JSON object")
        raw_messages = document.get("messages")
        group_versions = document.get("groupVersions")
        option_kinds = document.get("optionKinds", {})
        if not isinstance(raw_messages, dict) or not isinstance(group_versions, dict) or \
                not isinstance(option_kinds, dict):
            raise TableError("the tables need messages, groupVersions and optionKinds")
        messages = {name: _message(name, entry, raw_messages)
                    for name, entry in raw_messages.items()}
        for message in messages.values():
            for f in message.fields.values():
                if f.inline and f.message is not None and messages[f.message].form is not None:
                    raise TableError(f"{message.name}: an inline field must be an object")
        kinds: dict[tuple[str, str], Message] = {}
        for api_version in [*group_versions, META_API_VERSION]:
            for kind, name in option_kinds.items():
                if name not in messages:
                    raise TableError(f"option kind {kind}: no message {name!r}")
                kinds[(api_version, kind)] = messages[name]
        for api_version, gv in group_versions.items():
            if not isinstance(gv, dict) or not isinstance(gv.get("package"), str) or \
                    not isinstance(gv.get("kinds"), list):
                raise TableError(f"{api_version}: a group version has a package and kinds")
            for kind in gv["kinds"]:
                name = f"{gv['package']}.{kind}"
                if name not in messages:
                    raise TableError(f"{api_version} {kind}: no message {name!r}")
                kinds[(api_version, kind)] = messages[name]
        return cls(str(document.get("kubernetesVersion", "")), messages, kinds)

    @classmethod
    def load(cls) -> Tables:
        """The tables shipped in the package."""
        raw = importlib.resources.files(__package__).joinpath(DATA_FILE).read_bytes()
        return cls.from_document(orjson.loads(raw))
