"""``setpoint --help`` reads as plain text, and ``setpoint run``'s options become the
manager's configuration."""

from __future__ import annotations

import argparse

import pytest

from setpoint.cli import helptext
from setpoint.cli import run as run_command
from setpoint.cli.main import _parser
from setpoint.client import Client, ClientConfig
from setpoint.runtime import Controller, ReconcileEventsConfig, Request

MARKUP = ("``", ":mod:", ":class:", ":func:", ":meth:", ":attr:", ":data:", "::\n")


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("no subcommands")


def test_no_help_text_shows_restructuredtext_markup() -> None:
    parser = _parser()
    texts = {"setpoint": parser.format_help()}
    texts.update({f"setpoint {name}": sub.format_help()
                  for name, sub in subcommands(parser).items()})
    assert {"setpoint serve", "setpoint run", "setpoint kubeconfig"} <= set(texts)
    for name, text in texts.items():
        found = [m for m in MARKUP if m in text]
        assert not found, f"{name} --help shows {found}:\n{text}"
    assert "setpoint serve" in texts["setpoint"]
    assert "setpoint run" in texts["setpoint"]


@pytest.mark.parametrize(("doc", "text"), [
    ("The ``setpoint`` command.", "The setpoint command."),
    ("See :mod:`setpoint.controlplane` and :class:`~setpoint.runtime.Manager`.",
     "See setpoint.controlplane and Manager."),
    ("Example::\n\n    setpoint run x.py", "Example:\n\n    setpoint run x.py"),
    ("::\n\n    code", "\n    code"),
    ("no markup: a: b `c`", "no markup: a: b `c`"),
])
def test_plain(doc: str, text: str) -> None:
    assert helptext.plain(doc) == text.strip()


def parse_run(*args: str) -> run_command.RunConfig:
    return run_command.config_from_args(_parser().parse_args(["run", "op.py", *args]))


async def reconcile(request: Request, ctx: object) -> None:
    return None


async def test_resync_reaches_the_informers() -> None:
    config = parse_run("--resync", "300")
    assert config.resync == 300.0
    async with Client(ClientConfig(server="http://127.0.0.1:1")) as client:
        manager = run_command.build_manager(
            config, client, [Controller(for_=("v1", "ConfigMap"), reconcile=reconcile)])
        assert manager.informers._config is not None
        assert manager.informers._config.resync_period == 300.0
        default = run_command.build_manager(
            parse_run(), client, [Controller(for_=("v1", "ConfigMap"), reconcile=reconcile)])
        assert default.informers._config is None


@pytest.mark.parametrize("value", ["0", "0.5", "-3", "1e9"])
def test_resync_out_of_range_is_a_usage_error(value: str) -> None:
    with pytest.raises(run_command.UsageError, match="--resync must be between 1 and"):
        parse_run("--resync", value)


async def test_a_shard_group_reaches_the_manager() -> None:
    config = parse_run("--shard-group", "books", "--shards", "8", "-n", "ops")
    async with Client(ClientConfig(server="http://127.0.0.1:1")) as client:
        manager = run_command.build_manager(
            config, client, [Controller(for_=("v1", "ConfigMap"), reconcile=reconcile)])
        assert manager.sharding is not None
        assert (manager.sharding.name, manager.sharding.shards,
                manager.sharding.namespace) == ("books", 8, "ops")
        assert manager.elector is None


@pytest.mark.parametrize(("args", "message"), [
    (("--shard-group", "g", "--leader-elect"), "exclude each other"),
    (("--shards", "4"), "--shards needs --shard-group"),
    (("--shard-group", "g", "--shards", "0"), "shards must be in"),
])
def test_shard_group_misuse_is_a_usage_error(args: tuple[str, ...], message: str) -> None:
    with pytest.raises(run_command.UsageError, match=message):
        parse_run(*args)


async def test_reconcile_events_are_on_unless_switched_off() -> None:
    async with Client(ClientConfig(server="http://127.0.0.1:1")) as client:
        on = run_command.build_manager(
            parse_run(), client, [Controller(for_=("v1", "ConfigMap"), reconcile=reconcile)])
        assert on.reconcile_events == ReconcileEventsConfig()
        off = run_command.build_manager(
            parse_run("--no-reconcile-events"), client,
            [Controller(for_=("v1", "ConfigMap"), reconcile=reconcile)])
        assert off.reconcile_events is None
    assert parse_run("--reconcile-events").reconcile_events is True
