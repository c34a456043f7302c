"""Help text for a terminal: reStructuredText markup taken out of docstrings.

Module docstrings are written for the API documentation (````literal````,
``:mod:`~setpoint.x```, ``::`` before a literal block); ``--help`` shows plain text:
:func:`plain` keeps the words and drops the markup.

Invariants: only markup is removed, never words; text without markup comes back unchanged.
Non-guarantees: only the inline markup the project's docstrings use is recognised (literals,
interpreted-text roles, ``::``), not all of reStructuredText.
"""

from __future__ import annotations


def _strip_roles(text: str) -> str:
    """``:role:`target``` becomes ``target`` (``~a.b.c`` becomes ``c``)."""
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] == ":":
            end = i + 1
            while end < len(text) and (text[end].isalnum() or text[end] in "_-"):
                end += 1
            if end > i + 1 and text.startswith(":`", end):
                close = text.find("`", end + 2)
                if close > 0:
                    target = text[end + 2:close]
                    if target.startswith("~"):
                        target = target[1:].rpartition(".")[2]
                    out.append(target)
                    i = close + 1
                    continue
        out.append(text[i])
        i += 1
    return "".join(out)


def plain(doc: str) -> str:
    """``doc`` without inline reStructuredText markup, for ``--help``."""
    text = _strip_roles(doc.replace("``", ""))
    lines = []
    for line in text.splitlines():
        stripped = line.rstrip()
        if stripped.endswith("::"):
            stripped = stripped[:-1] if stripped[:-2].strip() else stripped[:-2]
        lines.append(stripped)
    return "\n".join(lines).strip()
