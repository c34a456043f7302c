"""``setpoint serve`` limit flags: defaults as Kubernetes', values carried into ServerConfig,
nonsense refused."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from setpoint.cli.main import _parser, serve_config
from setpoint.server.limits import Limits


def parse(tmp_path: Path, *args: str) -> argparse.Namespace:
    return _parser().parse_args(["serve", "--data-dir", str(tmp_path), *args])


def test_defaults(tmp_path: Path) -> None:
    assert serve_config(parse(tmp_path)).limits == Limits()


def test_flags_reach_the_config(tmp_path: Path) -> None:
    limits = serve_config(parse(
        tmp_path, "--max-requests-inflight", "10", "--max-mutating-requests-inflight", "5",
        "--max-connections", "64", "--header-timeout", "2.5", "--body-timeout", "7",
        "--idle-timeout", "30")).limits
    assert (limits.max_requests_inflight, limits.max_mutating_requests_inflight,
            limits.max_connections) == (10, 5, 64)
    assert (limits.header_timeout, limits.body_timeout, limits.idle_timeout) == (2.5, 7, 30)


def test_keepalive_flags_reach_the_config(tmp_path: Path) -> None:
    limits = serve_config(parse(
        tmp_path, "--tcp-keepalive-idle", "60", "--tcp-keepalive-interval", "5",
        "--tcp-keepalive-count", "3", "--tcp-user-timeout", "40")).limits
    assert (limits.keepalive_idle, limits.keepalive_interval, limits.keepalive_count,
            limits.tcp_user_timeout) == (60, 5, 3, 40)
    # the kernel's own limit unless asked, as kube-apiserver (see server/keepalive.py)
    assert serve_config(parse(tmp_path, "--tcp-keepalive-idle", "60")
                        ).limits.unacknowledged_timeout == 0
    assert Limits(keepalive_idle=60, tcp_user_timeout=None).unacknowledged_timeout == 60 + 15 * 9


@pytest.mark.parametrize("args", [
    ("--max-requests-inflight", "0"), ("--max-mutating-requests-inflight", "-3"),
    ("--max-connections", "0"), ("--header-timeout", "0"), ("--body-timeout", "-1"),
    ("--idle-timeout", "nan"), ("--tcp-keepalive-idle", "0"),
    ("--tcp-keepalive-interval", "40000"), ("--tcp-keepalive-count", "200"),
    ("--tcp-user-timeout", "-1"), ("--tcp-user-timeout", "nan")])
def test_unbounded_values_are_refused(tmp_path: Path, args: tuple[str, str]) -> None:
    with pytest.raises(ValueError, match="must be"):
        serve_config(parse(tmp_path, *args))
