"""TCP keep-alive and the unacknowledged-data timeout on the API server's connections.

A client that vanishes without closing its connection (its machine dies, a partition, a NAT
entry dropped) leaves a half-open connection: nothing arrives, nothing fails, and a watch on
it would hold its watcher, its queue and a place among the open connections until its own
timeout. The kernel finds such a peer for us, given two options per connection:

* **keep-alive** (``SO_KEEPALIVE`` with ``TCP_KEEPIDLE``, ``TCP_KEEPINTVL``, ``TCP_KEEPCNT``):
  after ``idle`` seconds of silence the kernel sends a probe every ``interval`` seconds, and
  drops the connection after ``count`` probes without an answer. kube-apiserver does the
  same (its listener sets keep-alive with a 3-minute period; Go probes every 15 s, 9 times).
  Probes are only sent while nothing is waiting to be acknowledged.
* **user timeout** (``TCP_USER_TIMEOUT``, RFC 5482): the longest sent data may stay
  unacknowledged. Without it a watch that keeps writing to a vanished peer is found only
  when the kernel gives up retransmitting (``tcp_retries2``, about 15 minutes; sooner if the
  watch falls behind its own bound first), and its keep-alive never starts, as the
  connection is never quiet. It is off by default, as in kube-apiserver, because Linux
  applies it to data held back by a closed receive window too: a client that is alive but
  has stopped reading for that long (``kubectl logs -f | less`` left on one page) would be
  dropped, and kube-apiserver never drops it. A client that reads slowly still takes data
  and is not affected. When it is set, Linux also uses it, instead of the probe count, to end
  a connection whose probes go unanswered; ``Limits(tcp_user_timeout=None)`` sets it to the
  keep-alive's own bound, ``idle + interval x count``.

The options are set on each accepted connection (plain or TLS) before it is served. Options
this platform lacks are skipped (macOS names the idle time ``TCP_KEEPALIVE`` and has no user
timeout; Windows has neither count nor user timeout before recent versions); a connection
whose options cannot be set (it was reset meanwhile) is served as it is.

Non-guarantees: the kernel works in whole seconds for keep-alive and milliseconds for the
user timeout; a dead peer is found within ``idle + interval x count`` seconds of the last
thing it sent, plus the retransmission back-off in flight; nothing here helps a peer that is
alive and answers TCP but sends no HTTP (that is the guard's header and idle timeouts).
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Sequence
from typing import Final, Protocol

from setpoint.server.limits import Limits

log = logging.getLogger(__name__)

#: (level, option, value) as ``setsockopt`` takes them
Option = tuple[int, int, int]

#: the idle time's option: Linux's name, then macOS's
_IDLE: Final = getattr(socket, "TCP_KEEPIDLE", None) or getattr(socket, "TCP_KEEPALIVE", None)


class _Extra(Protocol):
    def get_extra_info(self, name: str, default: object = None) -> object: ...


def socket_options(limits: Limits) -> tuple[Option, ...]:
    """The options every accepted connection gets, those this platform has."""
    tcp = socket.IPPROTO_TCP
    options: list[Option] = [(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)]
    for option, value in ((_IDLE, limits.keepalive_idle),
                          (getattr(socket, "TCP_KEEPINTVL", None), limits.keepalive_interval),
                          (getattr(socket, "TCP_KEEPCNT", None), limits.keepalive_count)):
        if option is not None:
            options.append((tcp, option, value))
    user_timeout = getattr(socket, "TCP_USER_TIMEOUT", None)
    if user_timeout is not None:
        # 0 restores the kernel's own limit; a positive bound is at least 1 ms
        seconds = limits.unacknowledged_timeout
        options.append((tcp, user_timeout, max(1, round(seconds * 1000)) if seconds else 0))
    return tuple(options)


def apply(transport: _Extra, options: Sequence[Option]) -> bool:
    """Set ``options`` on the socket under ``transport`` (a TLS transport passes the question
    to the one beneath). False when there is no TCP socket, or the options could not be set;
    the connection is served either way."""
    sock = transport.get_extra_info("socket")
    if sock is None or getattr(sock, "family", None) not in (socket.AF_INET, socket.AF_INET6):
        return False
    setsockopt = getattr(sock, "setsockopt", None)
    if setsockopt is None:
        return False
    try:
        for level, option, value in options:
            setsockopt(level, option, value)
    except OSError as e:  # reset before we got to it: nothing left to protect
        log.debug("could not set keep-alive on a connection: %s", e)
        return False
    return True
