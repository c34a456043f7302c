"""The three patch formats of the Kubernetes API, applied to JSON-shaped Python values.

* :func:`merge_patch` — JSON merge patch (RFC 7386, ``application/merge-patch+json``).
* :func:`json_patch` — JSON patch (RFC 6902, ``application/json-patch+json``).
* :func:`strategic_merge_patch` — strategic merge patch
  (``application/strategic-merge-patch+json``) for the built-in kinds, following
  ``k8s.io/apimachinery/pkg/util/strategicpatch`` with a small table of list merge keys
  instead of Go struct tags.

Invariants, for all three:

* inputs are never mutated, and the result shares no mutable structure with them;
* numbers compare as Go's JSON decoding makes them compare (``1 == 1.0``), and booleans never
  equal numbers;
* every failure is a :class:`PatchError` (a failed JSON-patch ``test`` is the subclass
  :class:`PatchTestFailed`) whose message says which operation or directive failed and why.

Non-guarantees: :func:`json_patch` follows the RFC, so it rejects negative array indices and
leading zeros that the Go library Kubernetes uses happens to accept.

>>> merge_patch({"a": 1, "b": {"c": 2}}, {"b": {"c": None, "d": 3}})
{'a': 1, 'b': {'d': 3}}
>>> json_patch({"items": [1]}, [{"op": "add", "path": "/items/-", "value": 2}])
{'items': [1, 2]}
>>> strategic_merge_patch({"metadata": {"finalizers": ["a"]}},
...                       {"metadata": {"finalizers": ["b"]}})
{'metadata': {'finalizers': ['b', 'a']}}
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping
from typing import Any, Final

import orjson

from setpoint.apimachinery.decoding import MAX_DEPTH
from setpoint.apimachinery.jsoncopy import deep_copy

__all__ = [
    "DEFAULT_MERGE_KEYS",
    "PatchError",
    "PatchTestFailed",
    "json_patch",
    "merge_patch",
    "strategic_merge_patch",
]


class PatchError(Exception):
    """A patch that cannot be applied: malformed, or not applicable to this document."""


class PatchTestFailed(PatchError):
    """A JSON-patch ``test`` operation found a different value."""


# --- JSON value helpers ------------------------------------------------------------------------


def _kind(value: Any) -> str:
    """The JSON type of a value; ``int`` and ``float`` are one kind, as in Go's decoding."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    return type(value).__name__


def _equal(a: Any, b: Any) -> bool:
    """Deep equality of JSON values with Go semantics (``1 == 1.0``, ``True != 1``)."""
    kind = _kind(a)
    if kind != _kind(b):
        return False
    if kind == "object":
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if kind == "array":
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _render(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return repr(value)


# --- RFC 7386 merge patch ----------------------------------------------------------------------


def merge_patch(target: Any, patch: Any) -> Any:
    """Apply a JSON merge patch (RFC 7386): objects merge key by key, ``null`` deletes, all
    else replaces. The result shares nothing with either argument.

    The target is copied once, and the patch merged into that copy in place: copying each
    nested level again as the patch descends into it cost, for a patch as deep as the
    object, the depth times the containers below it (a deep patch of a large object could
    hold the event loop for seconds)."""
    if not isinstance(patch, Mapping):
        return deep_copy(patch)
    result: dict[str, Any] = deep_copy(dict(target)) if isinstance(target, Mapping) else {}
    _merge_into(result, patch)
    return result


def _merge_into(result: dict[str, Any], patch: Mapping[str, Any]) -> None:
    """Merge ``patch`` into ``result``, a copy of the caller's own (changed in place)."""
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, Mapping):
            current = result.get(key)
            if isinstance(current, dict):
                _merge_into(current, value)  # already part of the copy
            else:
                child: dict[str, Any] = deep_copy(dict(current)) \
                    if isinstance(current, Mapping) else {}
                _merge_into(child, value)
                result[key] = child
        else:
            result[key] = deep_copy(value)


# --- RFC 6902 JSON patch -----------------------------------------------------------------------


def _pointer(path: Any, what: str = "path") -> list[str]:
    """Split a JSON pointer (RFC 6901) into unescaped reference tokens."""
    if not isinstance(path, str):
        raise PatchError(f"{what} must be a string, got {_render(path)}")
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f'{what} "{path}" is not a JSON pointer: it must be empty or start '
                         'with "/"')
    tokens = path[1:].split("/")
    for token in tokens:
        rest = token.replace("~0", "").replace("~1", "")
        if "~" in rest:
            raise PatchError(f'{what} "{path}" has an invalid escape: "~" must be followed by '
                             '"0" or "1"')
    return [t.replace("~1", "/").replace("~0", "~") for t in tokens]


def _array_index(token: str, length: int, path: str, *, allow_end: bool) -> int:
    """The index a token names in an array of ``length``; ``-`` is the end (add only)."""
    if token == "-" and allow_end:
        return length
    if not token.isascii() or not token.isdigit() or (len(token) > 1 and token[0] == "0"):
        raise PatchError(f'path "{path}": "{token}" is not a valid array index')
    index = int(token)
    limit = length if allow_end else length - 1
    if index > limit:
        raise PatchError(f'path "{path}": index {index} is out of bounds for an array of '
                         f"length {length}")
    return index


def _parent(doc: Any, tokens: list[str], path: str, op: str) -> Any:
    """The container that holds the last token of ``tokens``."""
    node = doc
    for i, token in enumerate(tokens[:-1]):
        if isinstance(node, dict):
            if token not in node:
                raise PatchError(f'{op} operation does not apply: doc is missing path: "{path}"')
            node = node[token]
        elif isinstance(node, list):
            node = node[_array_index(token, len(node), path, allow_end=False)]
        else:
            prefix = "/" + "/".join(tokens[:i])
            raise PatchError(f'{op} operation does not apply: "{prefix}" is a {_kind(node)}, '
                             f'not an object or array, in path "{path}"')
    if not isinstance(node, dict | list):
        raise PatchError(f'{op} operation does not apply: the parent of "{path}" is a '
                         f"{_kind(node)}, not an object or array")
    return node


def _get(doc: Any, tokens: list[str], path: str, op: str) -> Any:
    if not tokens:
        return doc
    parent = _parent(doc, tokens, path, op)
    key = tokens[-1]
    if isinstance(parent, dict):
        if key not in parent:
            raise PatchError(f'{op} operation does not apply: doc is missing path: "{path}"')
        return parent[key]
    return parent[_array_index(key, len(parent), path, allow_end=False)]


class _Work:
    """What the operations of one JSON patch have cost so far, within its bounds (None: no
    bound): the bytes the values of ``add``, ``replace`` and ``copy`` add, those of ``copy``
    alone, and the array elements moved."""

    __slots__ = ("added", "copied", "max_added", "max_copied", "max_shifted", "shifted")

    def __init__(self, max_added: int | None, max_copied: int | None,
                 max_shifted: int | None) -> None:
        self.added = self.copied = self.shifted = 0
        self.max_added, self.max_copied, self.max_shifted = max_added, max_copied, max_shifted

    def add(self, value: Any, *, copied: bool = False) -> None:
        """Count a value an operation adds (``copied``: by a ``copy``)."""
        if self.max_added is None and (self.max_copied is None or not copied):
            return
        size = _json_size(value)
        self.added += size
        if self.max_added is not None and self.added > self.max_added:
            raise PatchError(f"the patch adds more than {self.max_added} bytes")
        if copied and self.max_copied is not None:
            self.copied += size
            if self.copied > self.max_copied:
                raise PatchError("the copy operations of the patch add more than "
                                 f"{self.max_copied} bytes")

    def shift(self, elements: int) -> None:
        self.shifted += elements
        if self.max_shifted is not None and self.shifted > self.max_shifted:
            raise PatchError("the operations of the patch move more than "
                             f"{self.max_shifted} array elements")


def _json_size(value: Any) -> int:
    """Bytes of ``value`` as JSON (its ``repr``'s for what orjson cannot encode)."""
    try:
        return len(orjson.dumps(value))
    except orjson.JSONEncodeError:
        return len(repr(value))


def _add(doc: Any, tokens: list[str], value: Any, path: str, op: str = "add",
         work: _Work | None = None) -> Any:
    if not tokens:
        return value
    parent = _parent(doc, tokens, path, op)
    key = tokens[-1]
    if isinstance(parent, dict):
        parent[key] = value
    else:
        index = _array_index(key, len(parent), path, allow_end=True)
        if work is not None:
            work.shift(len(parent) - index)  # the elements after it move up
        parent.insert(index, value)
    return doc


def _remove(doc: Any, tokens: list[str], path: str, op: str = "remove",
            work: _Work | None = None) -> Any:
    """Remove and return the value at ``tokens`` (which must not be the root)."""
    parent = _parent(doc, tokens, path, op)
    key = tokens[-1]
    if isinstance(parent, dict):
        if key not in parent:
            raise PatchError(f'{op} operation does not apply: doc is missing path: "{path}"')
        return parent.pop(key)
    index = _array_index(key, len(parent), path, allow_end=False)
    if work is not None:
        work.shift(len(parent) - index - 1)  # the elements after it move down
    return parent.pop(index)


_JSON_PATCH_OPS = ("add", "remove", "replace", "move", "copy", "test")

#: what the values ``copy`` operations add may total, as JSON (kube-apiserver's default
#: ``JSONPatchMaxCopyBytes``): each copy can double the document, so without a bound a few
#: dozen of them ask for terabytes
MAX_COPY_BYTES: Final = 3 * 1024 * 1024

#: array elements the operations may move in all (an insert or a removal moves every element
#: after it): 10,000 removals at the head of a long array would hold the caller for seconds;
#: this allows 10,000 operations at the head of 5,000-element arrays
MAX_SHIFTED_ELEMENTS: Final = 50_000_000


def json_patch(doc: Any, operations: Any, *, max_added_bytes: int | None = None,
               max_copy_bytes: int | None = MAX_COPY_BYTES,
               max_shifted_elements: int | None = MAX_SHIFTED_ELEMENTS) -> Any:
    """Apply an RFC 6902 JSON patch and return the new document.

    The operations apply in order to one working copy; the first failure raises and nothing
    of the partial result escapes. A ``test`` of a missing member against ``null`` passes, as
    in the library Kubernetes uses. Bounds, each a :class:`PatchError` when passed (None:
    none): the values ``copy`` operations add, as JSON, total at most ``max_copy_bytes``
    (repeated copies cannot grow the document exponentially); the operations move at most
    ``max_shifted_elements`` array elements; with ``max_added_bytes``, the values of
    ``add``, ``replace`` and ``copy`` together total at most that many bytes. A result
    nested too deep to walk (copies of a value into its own deepest point double its depth
    each time, within the byte bounds) is a :class:`PatchError` too.
    """
    try:
        return _json_patch(doc, operations, max_added_bytes, max_copy_bytes,
                           max_shifted_elements)
    except RecursionError:
        raise PatchError(f"the patched object nests deeper than {MAX_DEPTH} levels") from None


def _json_patch(doc: Any, operations: Any, max_added_bytes: int | None,
                max_copy_bytes: int | None, max_shifted_elements: int | None) -> Any:
    if not isinstance(operations, list):
        raise PatchError(f"a JSON patch must be a list of operations, got {_kind(operations)}")
    result = deep_copy(doc)
    work = _Work(max_added_bytes, max_copy_bytes, max_shifted_elements)
    for i, operation in enumerate(operations):
        if not isinstance(operation, Mapping):
            raise PatchError(f"operation {i}: must be an object, got {_kind(operation)}")
        op = operation.get("op")
        if op not in _JSON_PATCH_OPS:
            raise PatchError(f"operation {i}: unknown op {_render(op)}; expected one of "
                             + ", ".join(_JSON_PATCH_OPS))
        if "path" not in operation:
            raise PatchError(f'operation {i} ({op}): missing "path"')
        path = operation["path"]
        tokens = _pointer(path)
        if op in ("add", "replace", "test") and "value" not in operation:
            raise PatchError(f'{op} operation at "{path}": missing "value"')
        if op in ("add", "replace"):
            work.add(operation.get("value"))
        value = deep_copy(operation.get("value"))
        if op == "add":
            result = _add(result, tokens, value, path, work=work)
        elif op == "remove":
            if not tokens:
                raise PatchError("remove operation does not apply: cannot remove the whole "
                                 "document")
            _remove(result, tokens, path, work=work)
        elif op == "replace":
            if not tokens:
                result = value
            else:
                _get(result, tokens, path, op)  # must exist
                _remove(result, tokens, path, op, work)
                result = _add(result, tokens, value, path, op, work)
        elif op == "test":
            _test(result, tokens, path, operation["value"])
        else:  # move, copy
            if "from" not in operation:
                raise PatchError(f'{op} operation at "{path}": missing "from"')
            source = operation["from"]
            from_tokens = _pointer(source, "from")
            if op == "move":
                if from_tokens == tokens:
                    continue
                if tokens[:len(from_tokens)] == from_tokens:
                    raise PatchError(f'move operation does not apply: "{source}" cannot be '
                                     f'moved into its own child "{path}"')
                if not from_tokens:
                    raise PatchError("move operation does not apply: cannot move the whole "
                                     "document")
                moved = _remove(result, from_tokens, source, op, work)
                result = _add(result, tokens, moved, path, op, work)
            else:
                found = _get(result, from_tokens, source, op)
                work.add(found, copied=True)
                copied = deep_copy(found)
                result = _add(result, tokens, copied, path, op, work)
    return result


def _test(doc: Any, tokens: list[str], path: str, expected: Any) -> None:
    if tokens:
        parent = _parent(doc, tokens, path, "test")
        if isinstance(parent, dict) and tokens[-1] not in parent:
            if expected is None:
                return
            raise PatchTestFailed(f'testing value {path} failed: the path "{path}" is missing')
    actual = _get(doc, tokens, path, "test")
    if not _equal(actual, expected):
        raise PatchTestFailed(f"testing value {path} failed: expected {_render(expected)}, "
                              f"found {_render(actual)}")


# --- strategic merge patch ---------------------------------------------------------------------

_DIRECTIVE = "$patch"
_RETAIN_KEYS = "$retainKeys"
_DELETE_FROM_PRIMITIVE_LIST = "$deleteFromPrimitiveList"
_SET_ELEMENT_ORDER = "$setElementOrder"

DEFAULT_MERGE_KEYS: Mapping[str, str] = types.MappingProxyType({
    "metadata.ownerReferences": "uid",
    "metadata.finalizers": "",
})
"""Lists that merge rather than replace, by dotted path (list indices are not part of a path).

A non-empty value names the merge key of a list of objects; ``""`` marks a list of primitives
merged as a set. Every other list is replaced whole, as for a field without a patch strategy.
The built-in kinds setpoint serves have exactly these two (``Namespace.spec.finalizers`` is
atomic in Kubernetes, so a patch replaces it).
"""


#: the list work one strategic merge patch may do, in element comparisons: merging two lists
#: (and ordering them by ``$setElementOrder``) compares each element of one with each of the
#: other, so it is charged the square of their lengths. 100,000 is lists of about 300
#: elements in all; Kubernetes' only merged lists of the kinds served here, finalizers and
#: owner references, hold a handful. Without a bound, a patch of a few thousand finalizers
#: held the event loop for minutes
MAX_MERGE_WORK: Final = 100_000


class _Strategic:
    """One application of a strategic merge patch; works on private copies in place."""

    def __init__(self, merge_keys: Mapping[str, str], max_work: int | None) -> None:
        self.merge_keys = merge_keys
        self.max_work = max_work
        self.work = 0

    def charge(self, *lengths: int, path: str) -> None:
        """Count the work of merging lists of ``lengths``; PatchError beyond the bound."""
        self.work += sum(lengths) ** 2
        if self.max_work is not None and self.work > self.max_work:
            raise PatchError(f"the lists merged at {path} are too long: a strategic merge "
                             f"patch may compare list elements at most {self.max_work} times")

    # The list strategy of the field at ``path``: None = replace, "" = primitives, else key.
    def strategy(self, path: str) -> str | None:
        return self.merge_keys.get(path)

    def merge_map(self, original: dict[str, Any], patch: dict[str, Any],
                  path: str) -> dict[str, Any] | None:
        """Merge ``patch`` into ``original``; None means the map itself is deleted."""
        if _DIRECTIVE in patch:
            directive = patch[_DIRECTIVE]
            if directive == "replace":
                del patch[_DIRECTIVE]
                return patch
            if directive == "delete":
                return None
            if directive != "merge":
                raise PatchError(f"unknown patch type: {_render(directive)} in map: "
                                 f"{_render(patch)}")
            del patch[_DIRECTIVE]  # "merge" is the default behaviour
        self.retain_keys(original, patch)
        self.set_element_orders(original, patch, path)
        for key, patch_value in patch.items():
            is_delete_list = key.startswith(_DELETE_FROM_PRIMITIVE_LIST)
            if is_delete_list:
                key = _directive_field(key, _DELETE_FROM_PRIMITIVE_LIST)
            child = f"{path}.{key}" if path else key
            if patch_value is None:
                original.pop(key, None)
                continue
            if key not in original or _kind(original[key]) != _kind(patch_value):
                if not is_delete_list:
                    self.put(original, key, patch_value)
                continue
            current = original[key]
            if isinstance(current, dict):
                merged = self.merge_map(current, patch_value, child)
                # A "$patch: delete" of a nested map leaves it empty, as Kubernetes does.
                original[key] = {} if merged is None else merged
            elif isinstance(current, list):
                strategy = self.strategy(child)
                if strategy is None and not is_delete_list:
                    original[key] = patch_value  # replaced as sent, directives and all
                else:
                    original[key], _ = self.merge_list(current, patch_value, strategy or "",
                                                       child, is_delete_list)
            else:
                self.put(original, key, patch_value)
        return original

    @staticmethod
    def put(original: dict[str, Any], key: str, patch_value: Any) -> None:
        """Set a new value from the patch, without its nulls and directives."""
        kept, value = _strip(_without_nulls(patch_value))
        if kept:
            original[key] = value
        else:
            original.pop(key, None)

    def retain_keys(self, original: dict[str, Any], patch: dict[str, Any]) -> None:
        if _RETAIN_KEYS not in patch:
            return
        retain = patch.pop(_RETAIN_KEYS)
        if not isinstance(retain, list):
            raise PatchError("invalid patch format of retainKeys")
        for key, value in patch.items():
            if value is None or key.startswith((_DELETE_FROM_PRIMITIVE_LIST, _SET_ELEMENT_ORDER)):
                continue
            if key not in retain:
                raise PatchError("invalid patch format of retainKeys")
        for key in [k for k in original if k not in retain]:
            del original[key]

    def set_element_orders(self, original: dict[str, Any], patch: dict[str, Any],
                           path: str) -> None:
        for directive in [k for k in patch if k.startswith(_SET_ELEMENT_ORDER)]:
            order = patch.pop(directive)
            key = _directive_field(directive, _SET_ELEMENT_ORDER)
            child = f"{path}.{key}" if path else key
            if not isinstance(order, list):
                raise PatchError("invalid patch format of setElementOrder list")
            in_original, in_patch = key in original, key in patch
            original_list = original.get(key) if in_original else []
            patch_list = patch.get(key) if in_patch else []
            if not isinstance(original_list, list) or not isinstance(patch_list, list):
                raise PatchError(f"{_SET_ELEMENT_ORDER}/{key} applies to a list, but "
                                 f'"{child}" is not one')
            strategy = self.strategy(child)
            merge_key = strategy or ""
            self.charge(len(order), len(original_list), len(patch_list), path=child)
            _check_order(patch_list, order, merge_key)
            live_order = original_list
            if in_original and not in_patch:
                merged = original_list
            elif in_patch and not in_original:
                merged = [v for keep, v in map(_strip, patch_list) if keep]
            elif in_patch:
                if strategy is None:
                    merged = patch_list
                else:
                    merged, live_order = self.merge_list(original_list, patch_list, merge_key,
                                                         child, False)
            else:
                continue
            if merge_key:
                in_order, server_only = _partition_maps(merged, order, merge_key)
            else:
                in_order, server_only = _partition_values(merged, order)
            original[key] = _normalize_order(in_order, server_only, order, live_order,
                                             merge_key)
            patch.pop(key, None)

    def merge_list(self, original: list[Any], patch: list[Any], merge_key: str, path: str,
                   is_delete_list: bool) -> tuple[list[Any], list[Any]]:
        """Merge two lists; returns the result and the live order ``$setElementOrder`` uses.

        That live order is what Go's slice of the original elements reads after the merge:
        deletions shift later elements left in place and appended elements land in the freed
        slots. Kubernetes orders server-only elements by it, so we model it to match.
        """
        if not original and not patch:
            return original, original
        self.charge(len(original), len(patch), path=path)
        kind = _element_kind(original, patch)
        if kind != "object":
            if is_delete_list:
                return [v for v in original if not any(_equal(v, d) for d in patch)], original
            merged = _dedupe(original + patch)
            server_order, view = original, original
        else:
            if not merge_key:
                raise PatchError(f"cannot merge lists without merge key for {path}")
            backing = _Backing(original)
            patch, replace = _special_elements(backing, patch, merge_key)
            if replace:
                server_order, merged, patch = patch, list(patch), []
            else:
                server_order = backing.items()
                self.merge_by_key(backing, patch, merge_key, path)
                merged = backing.items()
            view = backing.view()
        if merge_key:
            in_patch, server_only = _partition_maps(merged, patch, merge_key)
        else:
            in_patch, server_only = _partition_values(merged, patch)
        return _normalize_order(in_patch, server_only, patch, server_order, merge_key), view

    def merge_by_key(self, backing: _Backing, patch: list[Any], merge_key: str,
                     path: str) -> None:
        for element in patch:
            if merge_key not in element:
                raise PatchError(f"map: {_render(element)} does not contain declared merge "
                                 f"key: {merge_key}")
            index = _find_by_key(backing.items(), merge_key, element[merge_key])
            if index is None:
                backing.append(element)
            else:
                merged = self.merge_map(backing.array[index], element, path)
                backing.array[index] = {} if merged is None else merged


class _Backing:
    """A list with Go slice semantics over one backing array (see ``merge_list``)."""

    def __init__(self, items: list[Any]) -> None:
        self.array = list(items)
        self.length = len(items)
        self.original_length = len(items)

    def items(self) -> list[Any]:
        return self.array[:self.length]

    def view(self) -> list[Any]:
        return self.array[:self.original_length]

    def delete(self, index: int) -> None:
        self.array[index:self.length - 1] = self.array[index + 1:self.length]
        self.length -= 1

    def append(self, item: Any) -> None:
        if self.length < len(self.array):
            self.array[self.length] = item
        else:
            self.array.append(item)
        self.length += 1


def _directive_field(key: str, prefix: str) -> str:
    head, slash, field = key.partition("/")
    if head != prefix or not slash:
        kind = "primitive list" if prefix == _DELETE_FROM_PRIMITIVE_LIST \
            else "setElementOrder list"
        raise PatchError(f"invalid patch format of {kind}")
    return field


def _without_nulls(value: Any) -> Any:
    """Drop null members from objects, recursively (a new object never stores nulls)."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def _strip(value: Any) -> tuple[bool, Any]:
    """Remove directive-bearing maps; (False, None) when ``value`` itself is one."""
    if isinstance(value, dict):
        if _DIRECTIVE in value:
            return False, None
        out: dict[str, Any] = {}
        for k, v in value.items():
            keep, stripped = _strip(v)
            if keep:
                out[k] = stripped
        return True, out
    if isinstance(value, list):
        return True, [s for keep, s in map(_strip, value) if keep]
    return True, value


def _element_kind(*lists: list[Any]) -> str:
    kind: str | None = None
    for items in lists:
        for item in items:
            item_kind = _kind(item)
            if kind is None:
                if item_kind == "array":
                    raise PatchError("lists of lists are not supported")
                kind = item_kind
            elif item_kind != kind:
                raise PatchError("list element types are not identical: "
                                 + " ".join(_render(x) for x in lists))
    if kind is None:
        raise PatchError("no elements in any of the given slices")
    return kind


def _dedupe(values: list[Any]) -> list[Any]:
    out: list[Any] = []
    for v in values:
        if not any(_equal(v, seen) for seen in out):
            out.append(v)
    return out


def _find_by_key(items: list[Any], merge_key: str, value: Any) -> int | None:
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise PatchError(f"value for key {i} is not a map")
        if merge_key in item and _equal(item[merge_key], value):
            return i
    return None


def _special_elements(backing: _Backing, patch: list[Any],
                      merge_key: str) -> tuple[list[Any], bool]:
    """Apply the ``$patch`` elements of a keyed list: deletions happen on ``backing``; returns
    the remaining plain elements and whether the list is to be replaced by them."""
    plain: list[Any] = []
    replace = False
    for element in patch:
        if _DIRECTIVE not in element:
            plain.append(element)
            continue
        directive = element[_DIRECTIVE]
        if directive == "delete":
            if merge_key not in element:
                raise PatchError(f"map: {_render(element)} does not contain declared merge "
                                 f"key: {merge_key}")
            while (index := _find_by_key(backing.items(), merge_key, element[merge_key])) \
                    is not None:
                backing.delete(index)
        elif directive == "replace":
            replace = True
        elif directive == "merge":
            raise PatchError("merging lists cannot yet be specified in the patch")
        else:
            raise PatchError(f"unknown patch type: {_render(directive)} in map: "
                             f"{_render(element)}")
    return plain, replace


def _identity(merge_key: str) -> Callable[[Any], Any]:
    """What identifies an element for ordering: its merge key value, or itself."""
    if merge_key:
        return lambda item: item.get(merge_key) if isinstance(item, dict) else None
    return lambda item: item


def _index(items: list[Any], item: Any, merge_key: str) -> int:
    ident = _identity(merge_key)
    wanted = ident(item)
    for i, candidate in enumerate(items):
        if _equal(ident(candidate), wanted):
            return i
    return -1


def _partition_values(merged: list[Any], by: list[Any]) -> tuple[list[Any], list[Any]]:
    inside = [v for v in merged if any(_equal(v, b) for b in by)]
    outside = [v for v in merged if not any(_equal(v, b) for b in by)]
    return inside, outside


def _partition_maps(merged: list[Any], by: list[Any],
                    merge_key: str) -> tuple[list[Any], list[Any]]:
    inside: list[Any] = []
    outside: list[Any] = []
    for item in merged:
        if not isinstance(item, dict) or merge_key not in item:
            raise PatchError(f"map: {_render(item)} does not contain declared merge key: "
                             f"{merge_key}")
        found = _find_by_key([b for b in by if isinstance(b, dict)], merge_key, item[merge_key])
        (outside if found is None else inside).append(item)
    return inside, outside


def _sort_by(items: list[Any], order: list[Any], merge_key: str) -> list[Any]:
    """Stable sort by position in ``order``; elements marked for deletion go last."""
    if merge_key:
        for item in [*items, *order]:
            if not isinstance(item, dict) or merge_key not in item:
                raise PatchError(f"map: {_render(item)} does not contain declared merge key: "
                                 f"{merge_key}")
        deleted = [i for i in items if i.get(_DIRECTIVE) == "delete"]
        items = [i for i in items if i.get(_DIRECTIVE) != "delete"]
    else:
        deleted = []

    def position(item: Any) -> int:
        index = _index(order, item, merge_key)
        return index if index >= 0 else len(order)

    return sorted(items, key=position) + deleted


def _normalize_order(in_patch: list[Any], server_only: list[Any], patch_order: list[Any],
                     server_order: list[Any], merge_key: str) -> list[Any]:
    """Order patch items as the patch does and server-only items as the live list does, then
    interleave them: a server-only item goes before the next patch item only when the live
    list puts it there, which is how Kubernetes keeps both relative orders."""
    right = _sort_by(in_patch, patch_order, merge_key)
    left = _sort_by(server_only, server_order, merge_key)
    out: list[Any] = []
    i = j = 0
    while i < len(left) or j < len(right):
        if i >= len(left):
            out.append(right[j])
            j += 1
        elif j >= len(right):
            out.append(left[i])
            i += 1
        else:
            li = _index(server_order, left[i], merge_key)
            ri = _index(server_order, right[j], merge_key)
            if li >= 0 and ri >= 0 and li < ri:
                out.append(left[i])
                i += 1
            else:
                out.append(right[j])
                j += 1
    return out


def _check_order(patch_list: list[Any], order: list[Any], merge_key: str) -> None:
    """The patch list must follow ``$setElementOrder`` (deletions aside)."""
    if not order or not patch_list:
        return
    items = [p for p in patch_list
             if not (merge_key and isinstance(p, dict) and p.get(_DIRECTIVE) == "delete")]
    ident = _identity(merge_key)
    p = s = 0
    while p < len(items) and s < len(order):
        if isinstance(items[p], dict) and _DIRECTIVE in items[p]:
            p += 1
            continue
        if merge_key and (not isinstance(items[p], dict) or merge_key not in items[p]
                          or not isinstance(order[s], dict) or merge_key not in order[s]):
            raise PatchError(f"map: {_render(items[p])} does not contain declared merge key: "
                             f"{merge_key}")
        if _equal(ident(items[p]), ident(order[s])):
            p += 1
        s += 1
    if p < len(items):
        raise PatchError(f"The order in patch list:\n{_render(patch_list)}\n doesn't match "
                         f"{_SET_ELEMENT_ORDER} list:\n{_render(order)}\n")


def strategic_merge_patch(target: Mapping[str, Any], patch: Mapping[str, Any], *,
                          merge_keys: Mapping[str, str] | None = None,
                          max_work: int | None = MAX_MERGE_WORK) -> dict[str, Any]:
    """Apply a strategic merge patch to an object of a built-in kind.

    Objects merge as in a merge patch (``null`` deletes); lists listed in ``merge_keys``
    (default :data:`DEFAULT_MERGE_KEYS`) merge, every other list is replaced. Directives:
    ``$patch: replace|delete|merge`` in maps (``merge`` is the default behaviour) and
    ``$patch: replace|delete`` as elements of keyed lists, ``$deleteFromPrimitiveList/<f>``,
    ``$setElementOrder/<f>`` and ``$retainKeys``. Merging lists is bounded by ``max_work``
    (:data:`MAX_MERGE_WORK`; None: no bound), a :class:`PatchError` beyond.
    """
    if not isinstance(target, Mapping) or not isinstance(patch, Mapping):
        raise PatchError("a strategic merge patch and its target must be JSON objects")
    merger = _Strategic(DEFAULT_MERGE_KEYS if merge_keys is None else merge_keys, max_work)
    result = merger.merge_map(deep_copy(dict(target)), deep_copy(dict(patch)), "")
    return {} if result is None else result
