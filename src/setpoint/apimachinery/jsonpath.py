"""client-go's JSONPath (``k8s.io/client-go/util/jsonpath``) over JSON-shaped Python values.

This is the dialect of ``additionalPrinterColumns`` and ``kubectl -o jsonpath``: ``.a.b``,
``[0]``, ``[-1]``, ``[1:3]``, ``[::2]``, ``[*]``, ``.*``, ``..name``, unions ``[0,2]``,
``['key']``, filters ``[?(@.type=="Ready")]`` with ``== != < > <= >=`` and existence
``[?(@.x)]``, quoted text ``{"\\n"}``, and ``{range ...}...{end}`` templates.

Behaviour follows client-go with missing keys allowed (as the API server's table convertor
and ``kubectl`` use it), including its less obvious rules:

* a missing member yields nothing, but an array index out of range is an error;
* ``['a.b']`` is the path ``.a.b``; a member whose name has dots is written ``.a\\.b``;
* filter comparisons need operands of one kind: ``1`` and ``1.0`` (int and float) or a number
  and a string are "incompatible types", and comparing null, objects or lists is an error.

Invariants: a parsed :class:`JSONPath` is immutable and evaluation never modifies its input.
Object members are visited in sorted key order where client-go's order is unspecified.

>>> JSONPath.parse('.status.conditions[?(@.type=="Ready")].status').find(
...     {"status": {"conditions": [{"type": "Ready", "status": "True"}]}})
['True']
>>> format_cell({"b": 1.0, "a": [True, None]})
'{"a":[true,null],"b":1}'
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from setpoint.apimachinery import regexp

__all__ = ["JSONPath", "JSONPathError", "format_cell"]


class JSONPathError(ValueError):
    """An expression that does not parse, or that fails while being evaluated."""


# --- nodes -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Text:
    text: str


@dataclass(frozen=True, slots=True)
class _Field:
    name: str


@dataclass(frozen=True, slots=True)
class _Wildcard:
    pass


@dataclass(frozen=True, slots=True)
class _Recursive:
    pass


@dataclass(frozen=True, slots=True)
class _Param:
    value: int = 0
    known: bool = False
    derived: bool = False


@dataclass(frozen=True, slots=True)
class _Array:
    params: tuple[_Param, _Param, _Param]


@dataclass(frozen=True, slots=True)
class _Filter:
    left: tuple[_Node, ...]
    right: tuple[_Node, ...]
    operator: str


@dataclass(frozen=True, slots=True)
class _Literal:
    value: int | float | bool


@dataclass(frozen=True, slots=True)
class _Union:
    branches: tuple[tuple[_Node, ...], ...]


@dataclass(frozen=True, slots=True)
class _Identifier:
    name: str


_Node: TypeAlias = (_Text | _Field | _Wildcard | _Recursive | _Array | _Filter | _Literal
                    | _Union | _Identifier)


@dataclass(frozen=True, slots=True)
class _Range:
    expression: tuple[_Node, ...]
    body: tuple[_Item, ...]


@dataclass(frozen=True, slots=True)
class _Action:
    nodes: tuple[_Node, ...]


_Item: TypeAlias = _Text | _Action | _Range


# --- parser ------------------------------------------------------------------------------------

_DICT_KEY = regexp.Regexp(r"'([^']*)'")
_SLICE = regexp.Regexp(r"(-?[0-9]*)(:-?[0-9]*)?(:-?[0-9]*)?")
_FILTER = regexp.Regexp(r"(?s)([^!<>=]+)([!<>=]+)(.+?)")
_INT = regexp.Regexp(r"[+-]?[0-9]+")
_FLOAT = regexp.Regexp(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_TERMINATORS = frozenset(" \t\r\n.,[]$@{}")


def _describe(ch: str) -> str:
    """Go's ``%#U``: ``U+0041 'A'``, or just ``U+0009`` for what does not print."""
    code = f"U+{ord(ch):04X}"
    return f"{code} '{ch}'" if ch.isprintable() else code


def _is_alphanumeric(ch: str) -> bool:
    return ch == "_" or ch.isalpha() or unicodedata.category(ch) == "Nd"


def _go_atoi(text: str) -> int | None:
    if not _INT.fullmatch(text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


_SIMPLE_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
                   "\\": "\\"}


def _unquote(text: str) -> str:
    """Go's ``strconv`` unquoting of a '...' or "..." literal (the quotes included)."""
    quote, body = text[0], text[1:-1]
    out: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            if ch == quote:
                raise ValueError("invalid syntax")
            out.append(ch)
            i += 1
            continue
        if i + 1 >= len(body):
            raise ValueError("invalid syntax")
        esc = body[i + 1]
        i += 2
        if esc in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[esc])
        elif esc in "'\"":
            if esc != quote:
                raise ValueError("invalid syntax")
            out.append(esc)
        elif esc in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[esc]
            digits = body[i:i + width]
            if len(digits) != width or not all(c in "0123456789abcdefABCDEF" for c in digits):
                raise ValueError("invalid syntax")
            code = int(digits, 16)
            if esc != "x" and (code > 0x10FFFF or 0xD800 <= code < 0xE000):
                raise ValueError("invalid syntax")
            out.append(chr(code))
            i += width
        elif esc in "01234567":
            digits = body[i - 1:i + 2]
            if len(digits) != 3 or not all(c in "01234567" for c in digits) \
                    or int(digits, 8) > 255:
                raise ValueError("invalid syntax")
            out.append(chr(int(digits, 8)))
            i += 2
        else:
            raise ValueError("invalid syntax")
    return "".join(out)


class _Parser:
    """One pass over a template; mirrors client-go's parser state machine."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def parse_template(self) -> list[_Text | _Action]:
        items: list[_Text | _Action] = []
        while self.pos < len(self.text):
            brace = self.text.find("{", self.pos)
            if brace < 0:
                items.append(_Text(self.text[self.pos:]))
                break
            if brace > self.pos:
                items.append(_Text(self.text[self.pos:brace]))
            self.pos = brace + 1
            items.append(_Action(tuple(self.parse_action())))
        return items

    def parse_action(self) -> list[_Node]:
        """Nodes up to the closing brace (which is consumed)."""
        nodes: list[_Node] = []
        while True:
            rest = self.text[self.pos:]
            if rest.startswith("}"):
                self.pos += 1
                return nodes
            if rest.startswith("[?("):
                nodes.append(self.parse_filter())
                continue
            if rest.startswith(".."):
                if nodes and isinstance(nodes[-1], _Recursive):
                    raise JSONPathError("invalid multiple recursive descent")
                self.pos += 2
                nodes.append(_Recursive())
                if self.peek() and _is_alphanumeric(self.peek()):
                    nodes.append(self.parse_field())
                continue
            ch = self.peek()
            if ch in ("", "\r", "\n"):
                raise JSONPathError("unclosed action")
            if ch in " @$":
                self.pos += 1
            elif ch == "[":
                nodes.append(self.parse_array())
            elif ch in "\"'":
                nodes.append(self.parse_quote(ch))
            elif ch == ".":
                self.pos += 1
                nodes.append(self.parse_field())
            elif ch in "+-" or unicodedata.category(ch) == "Nd":
                nodes.append(self.parse_number())
            elif _is_alphanumeric(ch):
                nodes.append(self.parse_identifier())
            else:
                raise JSONPathError(f"unrecognized character in action: {_describe(ch)}")

    def read_word(self, *, escapes: bool) -> str:
        start = self.pos
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            if escapes and ch == "\\":
                self.pos = min(self.pos + 2, len(self.text))
                continue
            if ch in _TERMINATORS:
                break
            self.pos += 1
        return self.text[start:self.pos]

    def parse_field(self) -> _Field | _Wildcard:
        word = self.read_word(escapes=True)
        if word == "*":
            return _Wildcard()
        return _Field(word.replace("\\", ""))

    def parse_identifier(self) -> _Identifier | _Literal:
        word = self.read_word(escapes=False)
        if word in ("true", "false"):
            return _Literal(word == "true")
        return _Identifier(word)

    def parse_number(self) -> _Literal:
        start = self.pos
        if self.peek() in ("+", "-"):
            self.pos += 1
        while self.pos < len(self.text) and (
                self.text[self.pos] == "." or unicodedata.category(self.text[self.pos]) == "Nd"):
            self.pos += 1
        word = self.text[start:self.pos]
        as_int = _go_atoi(word)
        if as_int is not None:
            return _Literal(as_int)
        if _FLOAT.fullmatch(word):
            return _Literal(float(word))
        raise JSONPathError(f"cannot parse number {word}")

    def parse_array(self) -> _Node:
        end = self.pos + 1
        while end < len(self.text) and self.text[end] not in "]\n":
            end += 1
        if end >= len(self.text) or self.text[end] == "\n":
            raise JSONPathError("unterminated array")
        inside = self.text[self.pos + 1:end]
        self.pos = end + 1
        return _array_node(inside)

    def parse_filter(self) -> _Node:
        self.pos += 3
        start = self.pos
        begin = finished = False
        pair = ""
        while True:
            ch = self.peek()
            if ch in ("", "\n"):
                raise JSONPathError("unterminated filter")
            self.pos += 1
            if ch in "\"'":
                if not begin:
                    begin, pair = True, ch
                elif self.text[self.pos - 2] != "\\" and ch == pair:
                    finished = True
            elif ch == ")" and begin == finished:
                break
        if self.peek() != "]":
            raise JSONPathError("unclosed array expect ]")
        self.pos += 1
        inside = self.text[start:self.pos - 2]
        match = _FILTER.groups(inside)
        if match is None:
            return _Filter(_sub_action(inside), (), "exists")
        left, operator, right = (group or "" for group in match)
        return _Filter(_sub_action(left), _sub_action(right), operator)

    def parse_quote(self, quote: str) -> _Text:
        start = self.pos
        self.pos += 1
        while True:
            ch = self.peek()
            if ch in ("", "\n"):
                raise JSONPathError("unterminated quoted string")
            self.pos += 1
            if ch == quote and self.text[self.pos - 2] != "\\":
                break
        literal = self.text[start:self.pos]
        try:
            return _Text(_unquote(literal))
        except ValueError as e:
            raise JSONPathError(f"unquote string {literal} error {e}") from None


def _sub_action(text: str) -> tuple[_Node, ...]:
    """Parse ``text`` as the inside of one action, as client-go does for filters and keys."""
    items = _Parser("{" + text + "}").parse_template()
    if not items or not isinstance(items[0], _Action):
        raise JSONPathError(f"invalid expression {text}")
    return items[0].nodes


def _array_node(inside: str) -> _Node:
    if inside == "*":
        inside = ":"
    parts = inside.split(",")
    if len(parts) > 1:
        return _Union(tuple(_sub_action("[" + part.strip(" ") + "]") for part in parts))
    key = _DICT_KEY.groups(inside)
    if key is not None:
        nodes = _sub_action("." + (key[0] or ""))
        return nodes[0] if len(nodes) == 1 else _Union((nodes,))
    match = _SLICE.groups(inside)
    if match is None:
        raise JSONPathError(f"invalid array index {inside}")
    params: list[_Param] = []
    for i, group in enumerate(match):
        text = group or ""
        if i > 0 and text:
            text = text[1:]
            if not text:
                params.append(_Param())
                continue
        if text:
            number = _go_atoi(text)
            if number is None:
                raise JSONPathError(f"array index {text} is not a number")
            params.append(_Param(number, known=True))
        elif i == 1:
            params.append(_Param(params[0].value + 1, known=True, derived=True))
        else:
            params.append(_Param())
    return _Array((params[0], params[1], params[2]))


def _structure(items: Sequence[_Text | _Action]) -> tuple[_Item, ...]:
    """Nest ``{range ...}`` ... ``{end}`` blocks; an unmatched ``{end}`` stays an action."""
    stack: list[tuple[tuple[_Node, ...], list[_Item]]] = [((), [])]
    for item in items:
        keyword = ""
        if isinstance(item, _Action) and item.nodes and isinstance(item.nodes[0], _Identifier):
            keyword = item.nodes[0].name
        if keyword == "range" and isinstance(item, _Action):
            stack.append((item.nodes[1:], []))
        elif keyword == "end" and len(stack) > 1:
            expression, body = stack.pop()
            stack[-1][1].append(_Range(expression, tuple(body)))
        else:
            stack[-1][1].append(item)
    while len(stack) > 1:  # a range without {end} runs to the end of the template
        expression, body = stack.pop()
        stack[-1][1].append(_Range(expression, tuple(body)))
    return tuple(stack[0][1])


# --- evaluation --------------------------------------------------------------------------------


def _go_type(value: Any) -> str:
    if isinstance(value, dict):
        return "map[string]interface {}"
    if isinstance(value, list):
        return "[]interface {}"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    return "<nil>" if value is None else type(value).__name__


def _go_value(value: Any) -> str:
    """Go's ``%v`` of a decoded JSON value, for error messages."""
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{_go_value(value[k])}" for k in sorted(value)) + "]"
    if isinstance(value, list):
        return "[" + " ".join(_go_value(v) for v in value) + "]"
    if value is None:
        return "<nil>"
    return format_cell(value)


def _children(value: Any) -> list[Any]:
    """What ``.*`` and ``..`` step into: members, elements, or a string's bytes."""
    if isinstance(value, dict):
        return [value[k] for k in sorted(value)]
    if isinstance(value, list):
        return list(value)
    if isinstance(value, str):
        return list(value.encode("utf-8", "surrogatepass"))
    return []


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    raise JSONPathError("invalid type for comparison")


def _equal(left: Any, right: Any) -> bool:
    if _kind(left) != _kind(right):
        raise JSONPathError("incompatible types for comparison")
    return bool(left == right)


def _less(left: Any, right: Any) -> bool:
    kind = _kind(left)
    if kind != _kind(right):
        raise JSONPathError("incompatible types for comparison")
    if kind == "bool":
        raise JSONPathError("invalid type for comparison")
    return bool(left < right)


def _compare(operator: str, left: Any, right: Any) -> bool:
    if operator == "==":
        return _equal(left, right)
    if operator == "!=":
        return not _equal(left, right)
    if operator == "<":
        return _less(left, right)
    if operator == "<=":
        return _less(left, right) or _equal(left, right)
    if operator == ">":
        return not (_less(left, right) or _equal(left, right))
    if operator == ">=":
        return not _less(left, right)
    raise JSONPathError(f"unrecognized filter operator {operator}")


def _eval_list(values: list[Any], nodes: Sequence[_Node]) -> list[Any]:
    for node in nodes:
        values = _eval(values, node)
    return values


def _eval(values: list[Any], node: _Node) -> list[Any]:
    if isinstance(node, _Text):
        return [node.text]
    if isinstance(node, _Literal):
        return [node.value for _ in values]
    if isinstance(node, _Field):
        return [v[node.name] for v in values if isinstance(v, dict) and node.name in v]
    if isinstance(node, _Array):
        return _eval_array(values, node)
    if isinstance(node, _Filter):
        return _eval_filter(values, node)
    if isinstance(node, _Wildcard):
        return [child for v in values if v is not None for child in _children(v)]
    if isinstance(node, _Recursive):
        return list(_descend(values))
    if isinstance(node, _Union):
        return [found for branch in node.branches for found in _eval_list(values, branch)]
    if node.name == "end":
        raise JSONPathError("not in range, nothing to end")
    raise JSONPathError(f"unrecognized identifier {node.name}")


def _descend(values: list[Any]) -> Iterator[Any]:
    for value in values:
        children = [] if value is None else _children(value)
        if children:
            yield value
            yield from _descend(children)


def _eval_array(values: list[Any], node: _Array) -> list[Any]:
    result: list[Any] = []
    for value in values:
        if value is None:
            continue
        if not isinstance(value, list):
            raise JSONPathError(f"{_go_type(value)} is not array or slice")
        length = len(value)
        start_param, end_param, step_param = node.params
        start = start_param.value if start_param.known else 0
        if start < 0:
            start += length
        end = end_param.value if end_param.known else length
        if end < 0 or (end == 0 and end_param.derived):
            end += length
        if end == start:
            return result  # client-go stops here: an empty selection ends the whole step
        if start >= length or start < 0:
            raise JSONPathError(f"array index out of bounds: index {start}, length {length}")
        if end > length or end < 0:
            raise JSONPathError(f"array index out of bounds: index {end - 1}, length {length}")
        if start > end:
            raise JSONPathError(f"starting index {start} is greater than ending index {end}")
        step = 1
        if step_param.known:
            if step_param.value <= 0:
                raise JSONPathError("step must be > 0")
            step = step_param.value
        result.extend(value[start:end:step])
    return result


def _eval_filter(values: list[Any], node: _Filter) -> list[Any]:
    result: list[Any] = []
    for value in values:
        if not isinstance(value, list):
            raise JSONPathError(f"{_go_value(value)} is not array or slice and cannot be "
                                "filtered")
        for element in value:
            if node.operator == "exists":
                try:
                    if _eval_list([element], node.left):
                        result.append(element)
                except JSONPathError:
                    pass
                continue
            lefts = _eval_list([element], node.left)
            if not lefts:
                continue
            if len(lefts) > 1:
                raise JSONPathError("can only compare one element at a time")
            rights = _eval_list([element], node.right)
            if not rights:
                continue
            if len(rights) > 1:
                raise JSONPathError("can only compare one element at a time")
            if _compare(node.operator, lefts[0], rights[0]):
                result.append(element)
    return result


def _run(items: Sequence[_Item], root: Any) -> Iterator[list[Any]]:
    """Each template item's results, as client-go's ``FindResults`` groups them."""
    for item in items:
        if isinstance(item, _Text):
            yield [item.text]
        elif isinstance(item, _Action):
            yield _eval_list([root], item.nodes)
        else:
            for value in _eval_list([root], item.expression):
                yield from _run(item.body, value)


@dataclass(frozen=True, slots=True)
class JSONPath:
    """A parsed JSONPath template. Build with :meth:`parse`."""

    expression: str
    _items: tuple[_Item, ...]

    @classmethod
    def parse(cls, expr: str) -> JSONPath:
        """Parse ``.spec.replicas`` or ``{.spec.replicas}``; text without braces is one action,
        as additionalPrinterColumns paths are."""
        if not isinstance(expr, str):
            raise JSONPathError("a JSONPath must be a string")
        template = expr if "{" in expr else "{" + expr + "}"
        return cls(expr, _structure(_Parser(template).parse_template()))

    def find(self, obj: Any) -> list[Any]:
        """All matches in document order (a missing member yields nothing).

        Raises :class:`JSONPathError` where client-go fails too: an index out of range, a
        filter on a non-list, incomparable filter operands, unknown identifiers.
        """
        return [value for group in _run(self._items, obj) for value in group]

    def execute(self, obj: Any) -> str:
        """What ``kubectl -o jsonpath`` prints: matches of one action joined by spaces."""
        return "".join(" ".join(format_cell(v) for v in group)
                       for group in _run(self._items, obj))

    def __str__(self) -> str:
        return self.expression


# --- printing ----------------------------------------------------------------------------------


def _shortest_digits(value: float) -> tuple[str, int]:
    """Shortest round-trip digits and the decimal point position: value = 0.DIGITS * 10**dp."""
    text = repr(abs(value))
    mantissa, _, exponent = text.partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    point = len(whole) + (int(exponent) if exponent else 0)
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    return stripped.rstrip("0"), point


def _fixed(digits: str, point: int) -> str:
    if point <= 0:
        return "0." + "0" * -point + digits
    if point >= len(digits):
        return digits + "0" * (point - len(digits))
    return digits[:point] + "." + digits[point:]


def _exponent(digits: str, point: int, min_width: int) -> str:
    exp = point - 1
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return f"{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):0{min_width}d}"


def _go_float(value: float, *, json: bool) -> str:
    """A float64 as Go prints it: ``%v`` (text) or ``encoding/json`` (inside JSON)."""
    if value == 0:
        return "-0" if str(value).startswith("-") else "0"
    sign = "-" if value < 0 else ""
    digits, point = _shortest_digits(value)
    if json:
        if 1e-6 <= abs(value) < 1e21:
            return sign + _fixed(digits, point)
        return sign + _exponent(digits, point, 1)
    if point - 1 < -4 or point - 1 >= 6:
        return sign + _exponent(digits, point, 2)
    return sign + _fixed(digits, point)


_JSON_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b",
                 "\f": "\\f", "<": "\\u003c", ">": "\\u003e", "&": "\\u0026",
                 "\u2028": "\\u2028", "\u2029": "\\u2029"}


def _json_string(text: str) -> str:
    out = ['"']
    for ch in text:
        if ch in _JSON_ESCAPES:
            out.append(_JSON_ESCAPES[ch])
        elif ch < " ":
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _go_json(value: Any) -> str:
    """Go's ``json.Marshal``: compact, keys sorted, HTML characters escaped."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{_json_string(str(k))}:{_go_json(value[k])}"
                              for k in sorted(value, key=str)) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(_go_json(v) for v in value) + "]"
    if isinstance(value, str):
        return _json_string(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _go_float(value, json=True)
    return _json_string(str(value))


def format_cell(value: Any) -> str:
    """One value as client-go's JSONPath printer writes it.

    Strings bare, ``true``/``false``, integers in decimal, floats as Go's ``%v`` (``1``,
    ``2.5``, ``1e+06``), ``null`` for null, objects and lists as compact JSON.
    """
    if isinstance(value, dict | list | tuple):
        return _go_json(value)
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _go_float(value, json=False)
    return str(value)
