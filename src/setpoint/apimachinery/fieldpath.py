"""Field paths and sets of them, as server-side apply records them (``managedFields``).

A *path* addresses one node of an object: a tuple of path elements, each one of

* ``("f", name)`` — a field of an object (``f:spec``);
* ``("k", keys)`` — the item of a ``map`` list whose key fields have these values
  (``k:{"name":"web","port":80}``); ``keys`` is their canonical JSON, fields sorted by name;
* ``("v", value)`` — the item of a ``set`` list with this value (``v:"a"``); canonical JSON;
* ``("i", index)`` — an item by position (only ever read, never produced here).

A *set* is a ``frozenset`` of paths: the nodes a manager owns. The ``FieldsV1`` form is the
trie of those paths, each key a serialized element; ``{}`` marks a member without children,
``".": {}`` a member that also has children. Invariants:

* paths and elements are plain hashable tuples, so the set algebra is Python's own
  (``|``, ``&``, ``-``), plus :func:`recursive_difference` and :func:`with_prefix`;
* serialization is canonical and ordered as structured-merge-diff orders it (fields, then
  keys, then values, then indices; names bytewise; values number < string < bool < list <
  object < null), so equal sets always encode to equal JSON;
* :func:`from_fields_v1` accepts what :func:`to_fields_v1` writes and raises ``ValueError``
  for anything malformed (elements of unknown type are skipped, as upstream does).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

PathElement = tuple[str, Any]
Path = tuple[PathElement, ...]
FieldSet = frozenset[Path]

EMPTY: FieldSet = frozenset()

_RANK = {"f": 0, "k": 1, "v": 2, "i": 3}


# --- elements ------------------------------------------------------------------------------------


def canonical_json(value: Any) -> str:
    """JSON as Go's encoding/json writes it for a path element: compact, keys sorted, and
    ``<``, ``>`` and ``&`` escaped."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True,
                      allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def field(name: str) -> PathElement:
    return ("f", name)


def key(fields: Mapping[str, Any]) -> PathElement:
    """The element of a ``map`` list item whose key fields are ``fields``."""
    return ("k", canonical_json(dict(fields)))


def value(v: Any) -> PathElement:
    """The element of a ``set`` list item."""
    return ("v", canonical_json(v))


def index(i: int) -> PathElement:
    return ("i", i)


def path(*parts: str | PathElement) -> Path:
    """A path; plain strings are field names: ``path("spec", "x")``."""
    return tuple(field(p) if isinstance(p, str) else p for p in parts)


def serialize_element(pe: PathElement) -> str:
    kind, payload = pe
    if kind == "i":
        return f"i:{payload}"
    return f"{kind}:{payload}"


def parse_element(text: str) -> PathElement | None:
    """An element from its ``f:``/``k:``/``v:``/``i:`` form; ``None`` for an unknown type."""
    if len(text) < 2 or text[1] != ":":
        raise ValueError(f"invalid path element {text!r}")
    kind, rest = text[0], text[2:]
    if kind == "f":
        return ("f", rest)
    if kind == "k":
        decoded = _loads(rest, text)
        if not isinstance(decoded, dict):
            raise ValueError(f"invalid key element {text!r}")
        return ("k", canonical_json(decoded))
    if kind == "v":
        return ("v", canonical_json(_loads(rest, text)))
    if kind == "i":
        try:
            return ("i", int(rest))
        except ValueError:
            raise ValueError(f"invalid index element {text!r}") from None
    return None


def _loads(text: str, whole: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise ValueError(f"invalid path element {whole!r}") from None


def _value_order(v: Any) -> tuple[Any, ...]:
    if isinstance(v, bool):
        return (2, v)
    if isinstance(v, int | float):
        return (0, v)
    if isinstance(v, str):
        return (1, v.encode())
    if isinstance(v, list):
        return (3, tuple(_value_order(x) for x in v))
    if isinstance(v, dict):
        return (4, tuple((k.encode(), _value_order(v[k])) for k in sorted(v)))
    return (5,)


def element_order(pe: PathElement) -> tuple[Any, ...]:
    """Sort key of an element: structured-merge-diff's ``PathElement.Compare``."""
    kind, payload = pe
    if kind == "f":
        return (0, payload.encode())
    if kind == "k":
        decoded = json.loads(payload)
        return (1, tuple((name.encode(), _value_order(decoded[name]))
                         for name in sorted(decoded)))
    if kind == "v":
        return (2, _value_order(json.loads(payload)))
    return (_RANK.get(kind, 4), payload)


def render_element(pe: PathElement) -> str:
    """How a conflict names an element: ``.spec``, ``[name="a",port=80]``, ``[="x"]``."""
    kind, payload = pe
    if kind == "f":
        return "." + str(payload)
    if kind == "k":
        decoded = json.loads(payload)
        return "[" + ",".join(f"{name}={_go_string(decoded[name])}"
                              for name in sorted(decoded)) + "]"
    if kind == "v":
        return f"[={_go_string(json.loads(payload))}]"
    return f"[{payload}]"


def _go_string(v: Any) -> str:
    """structured-merge-diff's ``value.ToString``."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        return "[" + ",".join(_go_string(x) for x in v) + "]"
    if isinstance(v, dict):
        return "".join(f"{k}={_go_string(x)}" for k, x in v.items())
    return str(v)


def render(p: Path) -> str:
    """A path as conflicts print it: ``.spec.containers[name="web"].image``."""
    return "".join(render_element(pe) for pe in p)


# --- set algebra ---------------------------------------------------------------------------------


def recursive_difference(s: Iterable[Path], remove: Iterable[Path]) -> FieldSet:
    """``s`` without every path of ``remove`` *and everything under them*."""
    removed = frozenset(remove)
    if not removed:
        return frozenset(s)
    lengths = sorted({len(r) for r in removed})
    kept: list[Path] = []
    for p in s:
        for n in lengths:
            if n > len(p):
                kept.append(p)
                break
            if p[:n] in removed:
                break
        else:
            kept.append(p)
    return frozenset(kept)


def with_prefix(s: Iterable[Path], prefix: Path) -> FieldSet:
    """The paths of ``s`` under ``prefix``, with ``prefix`` cut off (``prefix`` itself not
    included)."""
    n = len(prefix)
    return frozenset(p[n:] for p in s if len(p) > n and p[:n] == prefix)


# --- FieldsV1 ------------------------------------------------------------------------------------


class Trie:
    """The paths of a set as a tree: ``member`` says the node itself is in the set."""

    __slots__ = ("children", "member")

    def __init__(self) -> None:
        self.member = False
        self.children: dict[PathElement, Trie] = {}

    @classmethod
    def of(cls, paths: Iterable[Path]) -> Trie:
        root = cls()
        for p in paths:
            node = root
            for pe in p:
                child = node.children.get(pe)
                if child is None:
                    child = node.children[pe] = cls()
                node = child
            node.member = True
        return root

    def child(self, pe: PathElement) -> Trie | None:
        return self.children.get(pe)


def to_fields_v1(s: Iterable[Path]) -> dict[str, Any]:
    """The ``fieldsV1`` object of a set."""
    return _emit(Trie.of(s), include_self=False)


def _emit(node: Trie, include_self: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if include_self and node.member and node.children:
        out["."] = {}
    for pe in sorted(node.children, key=element_order):
        child = node.children[pe]
        out[serialize_element(pe)] = _emit(child, include_self=True) if child.children else {}
    return out


def from_fields_v1(obj: Any) -> FieldSet:
    """The set a ``fieldsV1`` object describes; ``ValueError`` when it is malformed."""
    if not isinstance(obj, dict):
        raise ValueError("fieldsV1 must be an object")
    out: set[Path] = set()
    _read(obj, (), out)
    return frozenset(out)


def _read(obj: dict[str, Any], prefix: Path, out: set[Path]) -> None:
    for text, sub in obj.items():
        if text == ".":
            if prefix:
                out.add(prefix)
            continue
        pe = parse_element(text)
        if pe is None:
            continue
        if not isinstance(sub, dict):
            raise ValueError(f"fieldsV1 entry {text!r} must be an object")
        child = (*prefix, pe)
        if not sub:
            out.add(child)
        else:
            _read(sub, child, out)
