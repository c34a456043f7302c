"""The socket options every accepted connection gets, from any valid Limits, and what an
out-of-range value does: refused when the Limits are made, never passed to the kernel."""

from __future__ import annotations

import math
import socket

import pytest
from hypothesis import given
from hypothesis import strategies as st

from setpoint.server import keepalive
from setpoint.server.limits import Limits

LINUX = all(hasattr(socket, name) for name in
            ("TCP_KEEPIDLE", "TCP_KEEPINTVL", "TCP_KEEPCNT", "TCP_USER_TIMEOUT"))


@pytest.mark.skipif(not LINUX, reason="the keep-alive options are Linux's")
@given(idle=st.integers(1, 32767), interval=st.integers(1, 32767), count=st.integers(1, 127),
       user=st.none() | st.just(0.0) | st.floats(0.001, 86400))
def test_options_follow_the_limits(idle: int, interval: int, count: int,
                                   user: float | None) -> None:
    limits = Limits(keepalive_idle=idle, keepalive_interval=interval, keepalive_count=count,
                    tcp_user_timeout=user)
    tcp = socket.IPPROTO_TCP
    bound = idle + interval * count if user is None else user
    assert keepalive.socket_options(limits) == (
        (socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1), (tcp, socket.TCP_KEEPIDLE, idle),
        (tcp, socket.TCP_KEEPINTVL, interval), (tcp, socket.TCP_KEEPCNT, count),
        (tcp, socket.TCP_USER_TIMEOUT, max(1, round(bound * 1000)) if bound else 0))


@given(name=st.sampled_from(["keepalive_idle", "keepalive_interval", "keepalive_count"]),
       value=st.integers(-(2 ** 63), 0) | st.integers(32768, 2 ** 63))
def test_out_of_range_keepalive_values_are_refused(name: str, value: int) -> None:
    with pytest.raises(ValueError, match=f"^{name} must be between"):
        Limits(**{name: value})  # type: ignore[arg-type]


@given(value=st.floats(allow_nan=True, allow_infinity=True).filter(
    lambda v: math.isnan(v) or not 0 <= v <= 86400))
def test_out_of_range_user_timeouts_are_refused(value: float) -> None:
    with pytest.raises(ValueError, match=r"^tcp_user_timeout must be between"):
        Limits(tcp_user_timeout=value)


class NoSocket:
    def get_extra_info(self, name: str, default: object = None) -> object:
        return default


def test_a_transport_without_a_tcp_socket_is_served_as_it_is() -> None:
    assert keepalive.apply(NoSocket(), keepalive.socket_options(Limits())) is False
    unix_a, unix_b = socket.socketpair(socket.AF_UNIX)
    try:
        class Unix:
            def get_extra_info(self, name: str, default: object = None) -> object:
                return unix_a if name == "socket" else default
        assert keepalive.apply(Unix(), keepalive.socket_options(Limits())) is False
    finally:
        unix_a.close()
        unix_b.close()


def test_a_socket_closed_meanwhile_is_served_as_it_is() -> None:
    sock = socket.socket()
    sock.close()  # setsockopt on it fails with EBADF

    class Closed:
        def get_extra_info(self, name: str, default: object = None) -> object:
            return sock if name == "socket" else default
    assert keepalive.apply(Closed(), keepalive.socket_options(Limits())) is False
