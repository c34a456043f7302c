"""README.md's table of ``setpoint serve`` options names every option ``serve --help`` has,
and only those, with the defaults the parser has where the table gives one plain value: an
operator reads the table, so it cannot drift from the code."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from setpoint.cli.main import _parser, format_size

README = Path(__file__).resolve().parents[2] / "README.md"
SIZES = {"--watch-cache-bytes", "--list-budget-bytes"}


def serve_parser() -> argparse.ArgumentParser:
    parser = _parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    serve: argparse.ArgumentParser = sub.choices["serve"]
    return serve


def table_rows() -> list[list[str]]:
    text = README.read_text()
    start = text.index("`setpoint serve` takes:")
    table = text[start:text.index("\n\n", text.index("\n|", start))]
    lines = [line for line in table.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in line.strip("|").split(" | ")] for line in lines[2:]]


def flags(cell: str) -> set[str]:
    return set(re.findall(r"--[a-z][a-z0-9-]*", cell))


def test_the_table_lists_exactly_the_options_of_serve() -> None:
    named: set[str] = set()  # the options a row is about
    mentioned: set[str] = set()  # and those its text names (a companion option)
    for row in table_rows():
        named |= flags(row[0])
        mentioned |= flags(row[1])
    options = {option for action in serve_parser()._actions
               for option in action.option_strings if option.startswith("--")}
    options -= {"--help", "--no-leader-elect"}  # argparse's own, and --leader-elect's negation
    assert named - options == set()
    assert options - named - mentioned == set()


def test_plain_defaults_in_the_table_are_the_parser_s() -> None:
    actions = {option: action for action in serve_parser()._actions
               for option in action.option_strings}
    checked = 0
    for row in table_rows():
        names = re.findall(r"^`(--[a-z0-9-]+)[^`]*`$", row[0])
        plain = re.fullmatch(r"`([^`]+)`", row[2])
        if not names or plain is None:
            continue
        default = actions[names[0]].default
        if default is None:  # computed at start (DATA_DIR/pki, the host name): said in words
            continue
        shown = (format_size(default) if names[0] in SIZES
                 else f"{default:g}" if isinstance(default, (int, float)) else str(default))
        assert shown == plain.group(1), names[0]
        checked += 1
    assert checked >= 15
