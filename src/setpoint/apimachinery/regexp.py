"""Regular expressions in linear time: every pattern the server matches runs on RE2.

Python's ``re`` backtracks: ``^(a+)+$`` against 27 characters takes seconds, and a pattern
from a CRD, a CEL rule or a selector could hold the event loop that long. RE2 (what Go's
``regexp`` implements, so what Kubernetes evaluates) matches in time linear in the text,
whatever the pattern, and its memory is bounded per pattern. :class:`Regexp` is the one way
the package matches text: fixed patterns of its own and patterns users write alike.

The syntax is RE2's: ``\\d``, ``\\w``, ``\\s`` and ``\\b`` are ASCII-only, ``$`` without
``(?m)`` is the end of the text (Python's ``\\Z`` is RE2's ``\\z``), ``(?i)`` and ``(?s)`` are
written in the pattern. Matching is on the text's UTF-8 form; results are ``str``.

Linear is not cheap for every pattern: RE2 runs most patterns as a DFA (about 0.1 ns per
text byte), but a pattern whose DFA would be too large (counted repetitions such as
``[^a]{1000}[^a]{1000}a``) falls back to simulating its program on every byte, which costs up
to about 2 ns per program instruction per byte: seconds for a long text. Patterns users write
are therefore *metered*: matching one charges its program size times the text's length to
the :func:`budget` of the work at hand (one validation, one request) and raises
:class:`BudgetExceeded` instead of starting a match the budget cannot pay for. Without an
ambient budget, one match may cost at most :data:`DEFAULT_BUDGET`.

Invariants: compiling never logs and raises only :class:`RegexpError` (RE2's message);
matching raises nothing but :class:`BudgetExceeded`, and that only for metered patterns.
Non-guarantees: RE2 refuses patterns whose program exceeds :data:`MAX_PROGRAM_MEMORY`
("pattern too large"), which Go would run.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextvars import ContextVar, Token
from typing import Any, Final

import re2

__all__ = ["DEFAULT_BUDGET", "MAX_PROGRAM_MEMORY", "Budget", "BudgetExceeded", "Regexp",
           "RegexpError", "budget"]

#: RE2's budget for one compiled pattern (its default): bounds the memory of any pattern
MAX_PROGRAM_MEMORY: Final = 8 << 20
#: matching work metered patterns may do for one piece of work, in program instructions times
#: text bytes: about 0.2 s at RE2's slowest (2 ns a unit); a few milliseconds for the usual
#: patterns, and room for a 30-instruction pattern (a DNS name) on 3 MiB of text
DEFAULT_BUDGET: Final = 100_000_000

# The compiled-program class of the google-re2 binding. Its ``Match`` is what the binding's
# ``re``-like wrapper calls; calling it directly saves a Python generator and a match object
# per call, which is most of the cost of matching a short name.
_RE2: Final[Any] = re2._re2.RE2
_UNANCHORED: Final = _RE2.Anchor.UNANCHORED
_START: Final = _RE2.Anchor.ANCHOR_START
_BOTH: Final = _RE2.Anchor.ANCHOR_BOTH
_NO_SPAN: Final = (-1, -1)


class RegexpError(ValueError):
    """A pattern RE2 cannot compile; the message is RE2's."""


class BudgetExceeded(Exception):
    """Matching a metered pattern against this text would exceed the matching budget."""

    def __init__(self, pattern: str, cost: int, remaining: int) -> None:
        super().__init__(
            f"matching {pattern!r} against {cost} units of work (program size times text "
            f"length) exceeds the {remaining} units left of the budget")
        self.pattern = pattern
        self.cost = cost


class Budget:
    """The matching work metered patterns may still do (program instructions x text bytes)."""

    __slots__ = ("remaining",)

    def __init__(self, units: int = DEFAULT_BUDGET) -> None:
        self.remaining = units

    def charge(self, pattern: str, cost: int) -> None:
        if cost > self.remaining:
            raise BudgetExceeded(pattern, cost, self.remaining)
        self.remaining -= cost


# The budget of the work under way: set by budget() around one validation. A context variable
# rather than an argument because the matches happen deep inside compiled validators; it is
# scoped to the ``with`` block (and to the task), never shared between requests.
_CURRENT: ContextVar[Budget | None] = ContextVar("setpoint_regexp_budget", default=None)


class budget:  # lower case: it reads as a function, ``with regexp.budget():``
    """Meter the matches of metered patterns inside the block against one budget.

    A block inside another shares the outer budget (the work is the outer work's).
    """

    __slots__ = ("_budget", "_token")

    def __init__(self, units: int = DEFAULT_BUDGET) -> None:
        self._budget = Budget(units)
        self._token: Token[Budget | None] | None = None

    def __enter__(self) -> Budget:
        outer = _CURRENT.get()
        if outer is not None:
            return outer
        self._token = _CURRENT.set(self._budget)
        return self._budget

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _CURRENT.reset(self._token)
            self._token = None


def _options(*, capture: bool) -> Any:
    options = re2.Options()
    options.log_errors = False
    options.max_mem = MAX_PROGRAM_MEMORY
    options.never_capture = not capture
    return options


class Regexp:
    """A compiled RE2 pattern.

    >>> Regexp(r"^[a-z]([-a-z0-9]*[a-z0-9])?$").search("my-name")
    True
    >>> Regexp(r"(\\d+)-(\\d+)").groups("10-20")
    ('10', '20')
    """

    __slots__ = ("_metered", "_program", "_test", "pattern", "size")

    def __init__(self, pattern: str, *, metered: bool = False) -> None:
        self.pattern = pattern
        source = pattern.encode("utf-8", "surrogatepass")
        # Two programs: with capturing groups (groups, find), and without for yes-or-no
        # questions, which RE2 then answers with its DFA alone (22 times faster on 100 KB).
        program = _RE2(source, _options(capture=True))
        if not program.ok():
            raise RegexpError(program.error().decode("utf-8", "replace"))
        test = _RE2(source, _options(capture=False))
        if not test.ok():
            raise RegexpError(test.error().decode("utf-8", "replace"))
        self._program = program
        self._test = test
        self._metered = metered
        #: the number of instructions of the compiled program (what a match costs per byte)
        self.size: int = max(program.ProgramSize(), test.ProgramSize())

    def __repr__(self) -> str:
        return f"Regexp({self.pattern!r})"

    def _charge(self, data: bytes) -> None:
        """Pay for reading ``data`` once (metered patterns only); a scan for every match pays
        once too, as the successive searches read the text once between them."""
        cost = self.size * (len(data) + 1)
        current = _CURRENT.get()
        if current is None:
            if cost > DEFAULT_BUDGET:
                raise BudgetExceeded(self.pattern, cost, DEFAULT_BUDGET)
        elif cost > current.remaining:
            raise BudgetExceeded(self.pattern, cost, current.remaining)
        else:
            current.remaining -= cost

    # The methods below inline what they share: they run on every name and label written.

    def search(self, text: str) -> bool:
        """Does the pattern match anywhere in ``text``?"""
        data = text.encode("utf-8", "surrogatepass")
        if self._metered:
            self._charge(data)
        return self._test.Match(_UNANCHORED, data, 0, len(data))[0] != _NO_SPAN  # type: ignore[no-any-return]

    def match(self, text: str) -> bool:
        """Does the pattern match at the start of ``text``?"""
        data = text.encode("utf-8", "surrogatepass")
        if self._metered:
            self._charge(data)
        return self._test.Match(_START, data, 0, len(data))[0] != _NO_SPAN  # type: ignore[no-any-return]

    def fullmatch(self, text: str) -> bool:
        """Does the pattern match the whole of ``text``?"""
        data = text.encode("utf-8", "surrogatepass")
        if self._metered:
            self._charge(data)
        return self._test.Match(_BOTH, data, 0, len(data))[0] != _NO_SPAN  # type: ignore[no-any-return]

    def groups(self, text: str, *, whole: bool = True) -> tuple[str | None, ...] | None:
        """The capturing groups of a match of the whole text (or of a prefix, ``whole=False``);
        ``None`` when it does not match; a group that took no part is ``None``."""
        data = text.encode("utf-8", "surrogatepass")
        if self._metered:
            self._charge(data)
        spans = self._program.Match(_BOTH if whole else _START, data, 0, len(data))
        if spans[0] == _NO_SPAN:
            return None
        if len(data) == len(text):  # ASCII: byte offsets are character offsets
            return tuple(None if start < 0 else text[start:stop] for start, stop in spans[1:])
        return tuple(None if start < 0 else _decode(data[start:stop])
                     for start, stop in spans[1:])

    def prefix(self, text: str) -> str | None:
        """The text of a match at the start of ``text``, or ``None``."""
        data = text.encode("utf-8", "surrogatepass")
        if self._metered:
            self._charge(data)
        start, stop = self._program.Match(_START, data, 0, len(data))[0]
        return None if start < 0 else _decode(data[start:stop])

    def find(self, text: str) -> str | None:
        """The leftmost match in ``text`` (leftmost-first, as Go), or ``None``."""
        data = text.encode("utf-8", "surrogatepass")
        if self._metered:
            self._charge(data)
        start, stop = self._program.Match(_UNANCHORED, data, 0, len(data))[0]
        return None if start < 0 else _decode(data[start:stop])

    def finditer(self, text: str) -> Iterator[tuple[str | None, ...]]:
        """Every non-overlapping match, left to right: the whole match then its groups.

        As Go's ``FindAll``: after an empty match the search resumes one character later,
        and an empty match right where the previous match ended is skipped.
        """
        data = _encode(text)
        if self._metered:
            self._charge(data)
        pos = 0
        end = len(data)
        previous_end = -1
        while pos <= end:
            spans = self._program.Match(_UNANCHORED, data, pos, end)
            start, stop = spans[0]
            if start < 0:
                return
            accept = True
            if stop == pos:  # an empty match
                accept = start != previous_end
                pos += _char_length(data, pos)
            else:
                pos = stop
            previous_end = stop
            if accept:
                yield tuple(None if span == _NO_SPAN else _decode(data[span[0]:span[1]])
                            for span in spans)

    def findall(self, text: str, limit: int = -1) -> list[str]:
        """The text of every match (at most ``limit`` of them when it is not negative)."""
        found: list[str] = []
        if limit == 0:
            return found
        for match in self.finditer(text):
            whole = match[0]
            assert whole is not None
            found.append(whole)
            if len(found) == limit:
                break
        return found


def _encode(text: str) -> bytes:
    # surrogatepass: a lone surrogate (from a query string, say) becomes bytes RE2 treats as
    # invalid UTF-8, instead of an exception
    return text.encode("utf-8", "surrogatepass")


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:  # a match that splits the bytes of a lone surrogate
        return data.decode("utf-8", "replace")


def _char_length(data: bytes, pos: int) -> int:
    """The length in bytes of the UTF-8 character at ``pos`` (1 at the end or on junk)."""
    if pos >= len(data):
        return 1
    lead = data[pos]
    if lead >= 0xF0:
        return 4
    if lead >= 0xE0:
        return 3
    if lead >= 0xC0:
        return 2
    return 1
