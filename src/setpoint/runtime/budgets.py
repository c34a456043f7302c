"""Budgets for calls to things outside the cluster: rate, concurrency and a circuit breaker.

An operator that manages an external resource (a queue, a bucket, a DNS record) calls that
service's API from its reconciles. A thousand objects created at once, a resync, or a poll
of every object must not become a thousand calls in one second; a service that answers 429
or 5xx must be left alone for a while, not hammered by retries. A :class:`Budget` guards one
upstream *target* (declared by name, shared by every controller of a manager that calls it,
see :class:`Budgets`); a call goes through it as::

    async with ctx.budget("queues") as call:
        response = await http.post(...)
        call.record(response.status, response.headers.get("Retry-After"))

Entering the block waits for a concurrency slot, then for a token, and raises
:class:`BreakerOpenError` (without calling anything) while the breaker is open. Leaving it
tells the breaker how the call went: a status recorded with :meth:`Call.record` (429 and 5xx
are failures, anything else a success), or an exception escaping the block (a connection
error, ``OSError``, ``TimeoutError`` or :class:`UpstreamError` is a failure; any other
exception says nothing about the upstream and counts as neither), or, when nothing was
recorded, a success.

**Rate**: a token bucket of ``rate`` tokens per second holding at most ``burst``. Invariant:
over any interval of ``t`` seconds at most ``burst + rate·t`` calls start (so at most
``burst + rate`` in any one-second window). A caller that finds no token waits for its own,
booked in arrival order; a caller cancelled while waiting gives its token back.

**Concurrency**: at most ``concurrency`` calls are inside their block at once.

**Shared by replicas**: a budget is declared for the whole operator. A sharded manager
(:mod:`~setpoint.runtime.sharding`) scales each replica's budgets to its *share*,
``max(held shards, 1) / shards``, updated whenever a shard is taken or given up
(:meth:`Budget.set_share`): the rate is ``rate x share``, the burst and the concurrency
``floor(value x share)`` but at least 1 (the floor: a replica holding keys always makes
progress). A replica gives a shard up (and its rate falls) before another can take it, so
the replicas' rates never add up to more than ``rate``; their bursts add up to at most
``burst`` plus one for each replica whose floor applies (and likewise the concurrency).

**Circuit breaker** (closed → open → half-open):

- *closed*: calls go through; ``failure_threshold`` consecutive failures open it.
- *open*: every call raises :class:`BreakerOpenError` at once, carrying when the breaker
  will half-open (:attr:`BreakerOpenError.retry_after`). It stays open for the failure's
  ``Retry-After`` (seconds or an HTTP date, capped at ``max_open``) if it gave one,
  otherwise for ``open_for``, doubled on each failed probe (capped at ``max_open``).
- *half-open*: exactly one call (the *probe*) goes through; the others still raise. The
  probe's success closes the breaker; its failure opens it again.

A controller's engine knows :class:`BreakerOpenError`: the reconcile that raised it is
requeued for when the breaker half-opens (trigger ``retry``), without counting as a failure
of the object, so objects wait for the upstream instead of backing off one by one.

Invariants: time is read only from the injected clock (waits are clock timers), so a test
with a :class:`~setpoint.runtime.clock.FakeAsyncClock` is deterministic; every state is
bounded (a bucket, a counter, the waiting callers' queues); a budget belongs to one
manager (no global state): two managers each have their own, so a budget bounds one process
unless the managers are sharded (then each has its share, above).

Non-guarantees: the budget bounds the calls that go *through* it: a call made outside a
``budget`` block is not counted. Waiting callers are not bounded beyond the workers that
run reconciles. The breaker is per target, not per endpoint of the target.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import email.utils
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Final

from setpoint.runtime import clock as rtclock
from setpoint.runtime import metrics as rtmetrics
from setpoint.runtime.bucket import Bucket

#: breaker states (also the ``state`` label of ``setpoint_budget_breaker_state``)
CLOSED: Final = "closed"
OPEN: Final = "open"
HALF_OPEN: Final = "half_open"
STATES: Final = (CLOSED, OPEN, HALF_OPEN)

#: call outcomes (the ``outcome`` label of ``setpoint_budget_calls_total``)
OUTCOME_SUCCESS: Final = "success"
OUTCOME_FAILURE: Final = "failure"
OUTCOME_REJECTED: Final = "rejected"
OUTCOME_OTHER: Final = "other"

#: the most budgets one manager may declare
MAX_BUDGETS: Final = 64
#: how far below a whole token still counts as one (floating-point refill arithmetic)
TOKEN_EPSILON: Final = 1e-9


class BreakerOpenError(Exception):
    """The target's breaker is open: nothing was called. ``retry_after``: seconds until it
    half-opens (or, while a probe is out, until it is worth asking again)."""

    def __init__(self, target: str, retry_after: float) -> None:
        super().__init__(f"the circuit breaker of {target!r} is open; "
                         f"retry in {retry_after:.3g}s")
        self.target = target
        self.retry_after = retry_after


class UpstreamError(Exception):
    """Raise this (or a subclass) inside a budget block for a failure the breaker should
    count; ``retry_after`` (seconds) keeps the breaker open at least that long."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetConfig:
    """The limits of one target."""

    #: calls started per second, on average (0 < rate <= 100000)
    rate: float = 10.0
    #: calls that may start at once after a quiet period (1..100000)
    burst: int = 10
    #: calls in flight at once (1..10000)
    concurrency: int = 8
    #: consecutive failures that open the breaker (1..1000)
    failure_threshold: int = 1
    #: how long the breaker stays open after a failure without Retry-After (seconds)
    open_for: float = 5.0
    #: the longest the breaker stays open, whatever Retry-After says (seconds)
    max_open: float = 300.0

    def __post_init__(self) -> None:
        if not (0 < self.rate <= 100_000 and math.isfinite(self.rate)):
            raise ValueError("rate must be in (0, 100000]")
        if not 1 <= self.burst <= 100_000:
            raise ValueError("burst must be in [1, 100000]")
        if not 1 <= self.concurrency <= 10_000:
            raise ValueError("concurrency must be in [1, 10000]")
        if not 1 <= self.failure_threshold <= 1000:
            raise ValueError("failure_threshold must be in [1, 1000]")
        if not (0 < self.open_for <= self.max_open <= 86_400):
            raise ValueError("need 0 < open_for <= max_open <= 86400")


def parse_retry_after(value: str | float | None, now_epoch: float) -> float | None:
    """``Retry-After`` as seconds from now: delta-seconds or an HTTP date; None when absent
    or unreadable (never negative)."""
    if value is None:
        return None
    if isinstance(value, (int, float)):
        return max(0.0, float(value)) if math.isfinite(value) else None
    text = value.strip()[:64]
    if text and text.isascii() and text.isdigit():
        return float(min(int(text), 10**9))
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - now_epoch)


def is_failure_status(status: int) -> bool:
    """429 and 5xx open the breaker; everything else says the upstream is answering."""
    return status == 429 or 500 <= status <= 599


class Budget:
    """One target's token bucket, concurrency slots and breaker; see the module docstring."""

    def __init__(self, name: str, config: BudgetConfig | None = None, *,
                 clock: rtclock.AsyncClock | None = None,
                 metrics: rtmetrics.MetricsRegistry | None = None) -> None:
        self.name = name
        self.config = config or BudgetConfig()
        self._clock: rtclock.AsyncClock = clock or rtclock.SystemAsyncClock()
        self._share = 1.0
        self._concurrency = self.config.concurrency
        self._bucket = Bucket.full(self.config.rate, self.config.burst, self._clock.monotonic())
        #: callers waiting for a token, in arrival order, and the timer of the next token
        self._token_waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._dispenser: rtclock.Timer | None = None
        self._in_flight = 0
        self._slot_waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        #: called with the clock's monotonic time whenever a call gets its token (the
        #: moment the rate counts); None, or e.g. ``list.append`` to record them
        self.observer: Callable[[float], None] | None = None
        self._state = CLOSED
        self._failures = 0
        self._opened = 0  # consecutive openings (for the doubling of open_for)
        self._open_until = 0.0
        self._probe_out = False
        registry = metrics if metrics is not None else rtmetrics.MetricsRegistry()
        self._calls = registry.counter(
            "setpoint_budget_calls_total",
            "Calls through an external-API budget, by outcome (rejected: breaker open).",
            ("budget", "outcome"))
        self._state_gauge = registry.gauge(
            "setpoint_budget_breaker_state",
            "1 for the current state of a budget's circuit breaker, 0 for the others.",
            ("budget", "state"))
        self._waiting = registry.gauge(
            "setpoint_budget_waiting_calls", "Calls waiting for a token or a slot.",
            ("budget",))
        self._share_gauge = registry.gauge(
            "setpoint_budget_share",
            "The part of a budget this process may use (its shards' part when sharded).",
            ("budget",))
        self._share_gauge.set(1.0, name)
        for outcome in (OUTCOME_SUCCESS, OUTCOME_FAILURE, OUTCOME_REJECTED, OUTCOME_OTHER):
            self._calls.touch(name, outcome)
        self._waiting.set(0.0, name)
        self._set_state(CLOSED)

    # --- observing ---------------------------------------------------------------------

    @property
    def state(self) -> str:
        """The breaker's state now (an open breaker whose time is up reads ``half_open``)."""
        if self._state == OPEN and self._clock.monotonic() >= self._open_until:
            return HALF_OPEN
        return self._state

    @property
    def share(self) -> float:
        """The part of the configured budget this process may use (1.0 unless sharded)."""
        return self._share

    @property
    def rate(self) -> float:
        """Tokens per second now: ``config.rate x share``."""
        return self._bucket.rate

    @property
    def burst(self) -> int:
        """The bucket's size now: ``floor(config.burst x share)``, at least 1."""
        return int(self._bucket.burst)

    @property
    def concurrency(self) -> int:
        """Calls in flight at once now: ``floor(config.concurrency x share)``, at least 1."""
        return self._concurrency

    def set_share(self, share: float) -> None:
        """Scale this budget to ``share`` (in (0, 1]) of its configuration: the rate
        exactly, the burst and the concurrency rounded down but at least 1. The tokens
        earned so far are counted at the old rate; a smaller bucket loses the tokens above
        its new size at once; waiting callers are served at the new rate from now on;
        calls already in flight stay (a smaller concurrency admits nobody until enough of
        them have ended)."""
        if not (0.0 < share <= 1.0 and math.isfinite(share)):
            raise ValueError("a budget's share must be in (0, 1]")
        self._bucket.refill(self._clock.monotonic())
        cfg = self.config
        self._share = share
        self._bucket.resize(cfg.rate * share, max(1, math.floor(cfg.burst * share + 1e-9)))
        self._concurrency = max(1, math.floor(cfg.concurrency * share + 1e-9))
        self._share_gauge.set(share, self.name)
        self._dispense()
        self._grant_slots()

    def reopens_in(self) -> float:
        """Seconds until an open breaker half-opens (0 when it is not open)."""
        if self._state != OPEN:
            return 0.0
        return max(0.0, self._open_until - self._clock.monotonic())

    # --- calling -----------------------------------------------------------------------

    def call(self) -> Call:
        """``async with budget.call() as call:`` around one upstream call."""
        return Call(self)

    def _admit(self) -> bool:
        """Check the breaker; True when this call is the half-open probe."""
        now = self._clock.monotonic()
        if self._state == OPEN:
            if now < self._open_until:
                self._reject(self._open_until - now)
            self._set_state(HALF_OPEN)
        if self._state == HALF_OPEN:
            if self._probe_out:
                self._reject(min(self.config.open_for, self.config.max_open))
            self._probe_out = True
            return True
        return False

    def _reject(self, retry_after: float) -> None:
        self._calls.inc(self.name, OUTCOME_REJECTED)
        raise BreakerOpenError(self.name, retry_after)

    def _granted(self, now: float) -> None:
        if self.observer is not None:
            self.observer(now)

    async def _take_token(self) -> None:
        now = self._clock.monotonic()
        if not self._token_waiters and self._bucket.take(now, epsilon=TOKEN_EPSILON):
            self._granted(now)
            return
        waiter = asyncio.get_running_loop().create_future()
        self._token_waiters.append(waiter)
        if self._dispenser is None:
            self._dispense()
        try:
            await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                # given a token, cancelled before using it: it goes back to the bucket
                self._bucket.give_back()
                self._dispense()
            else:
                waiter.cancel()
                with contextlib.suppress(ValueError):
                    self._token_waiters.remove(waiter)
            raise

    def _dispense(self) -> None:
        """Give tokens to the waiting callers in order, then time the next token."""
        if self._dispenser is not None:
            self._dispenser.cancel()
            self._dispenser = None
        now = self._clock.monotonic()
        while self._token_waiters:
            waiter = self._token_waiters[0]
            if waiter.done():  # cancelled while waiting
                self._token_waiters.popleft()
                continue
            if not self._bucket.take(now, epsilon=TOKEN_EPSILON):
                break
            self._token_waiters.popleft()
            waiter.set_result(None)
            self._granted(now)
        if self._token_waiters:
            wait = self._bucket.seconds_until(1.0)
            self._dispenser = self._clock.call_at(now + wait, self._dispense)

    async def _take_slot(self) -> None:
        if not self._slot_waiters and self._in_flight < self._concurrency:
            self._in_flight += 1
            return
        waiter = asyncio.get_running_loop().create_future()
        self._slot_waiters.append(waiter)
        try:
            await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self._release_slot()  # given a slot, cancelled before using it
            else:
                waiter.cancel()
                with contextlib.suppress(ValueError):
                    self._slot_waiters.remove(waiter)
            raise

    def _release_slot(self) -> None:
        self._in_flight -= 1
        self._grant_slots()

    def _grant_slots(self) -> None:
        while self._slot_waiters and self._in_flight < self._concurrency:
            waiter = self._slot_waiters.popleft()
            if waiter.done():
                continue
            self._in_flight += 1
            waiter.set_result(None)

    async def _enter(self) -> bool:
        probe = self._admit()
        self._waiting.inc(self.name)
        acquired = False
        try:
            await self._take_slot()
            acquired = True
            await self._take_token()
            if not probe:  # the breaker may have opened (or half-opened) meanwhile
                probe = self._admit()
        except BaseException:
            if acquired:
                self._release_slot()
            if probe:
                self._probe_out = False
            raise
        finally:
            self._waiting.dec(self.name)
        return probe

    def _exit(self, probe: bool, failed: bool | None, retry_after: float | None) -> None:
        self._release_slot()
        if probe:
            self._probe_out = False
        if failed is None:
            self._calls.inc(self.name, OUTCOME_OTHER)
            return
        self._calls.inc(self.name, OUTCOME_FAILURE if failed else OUTCOME_SUCCESS)
        if not failed:
            if probe or self._state == CLOSED:
                self._failures = 0
                self._opened = 0
                self._set_state(CLOSED)
            return
        self._failures += 1
        if probe or self._state == HALF_OPEN or self._failures >= self.config.failure_threshold:
            self._open(retry_after)

    def _open(self, retry_after: float | None) -> None:
        cfg = self.config
        if retry_after is None:
            wait = min(cfg.max_open, cfg.open_for * 2.0 ** min(self._opened, 32))
        else:
            wait = min(cfg.max_open, max(0.0, retry_after))
        self._opened += 1
        until = self._clock.monotonic() + wait
        # a later failure never shortens an opening already under way
        self._open_until = max(until, self._open_until) if self._state == OPEN else until
        self._set_state(OPEN)

    def _set_state(self, state: str) -> None:
        self._state = state
        for s in STATES:
            self._state_gauge.set(1.0 if s == state else 0.0, self.name, s)

    def __repr__(self) -> str:
        return f"Budget({self.name!r}, {self.state})"


class Call:
    """One call through a :class:`Budget` (an async context manager)."""

    def __init__(self, budget: Budget) -> None:
        self._budget = budget
        self._probe = False
        self._status: int | None = None
        self._retry_after: float | None = None
        self._failed: bool | None = None

    @property
    def probe(self) -> bool:
        """Whether this call is the half-open breaker's one probe."""
        return self._probe

    def record(self, status: int, retry_after: str | float | None = None) -> None:
        """The upstream answered ``status`` (with this ``Retry-After`` header, if any)."""
        self._status = status
        self._failed = is_failure_status(status)
        self._retry_after = parse_retry_after(retry_after, self._budget._clock.now().timestamp())

    def fail(self, retry_after: str | float | None = None) -> None:
        """Count this call as a failure without an HTTP status (a timeout, a bad answer)."""
        self._failed = True
        self._retry_after = parse_retry_after(retry_after, self._budget._clock.now().timestamp())

    async def __aenter__(self) -> Call:
        self._probe = await self._budget._enter()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        failed = self._failed
        retry_after = self._retry_after
        if exc is not None and failed is None:
            if isinstance(exc, UpstreamError):
                failed, retry_after = True, exc.retry_after
            elif isinstance(exc, (OSError, TimeoutError)) or _is_client_connection_error(exc):
                failed = True
            else:
                failed = None  # says nothing about the upstream
        elif exc is None and failed is None:
            failed = False
        self._budget._exit(self._probe, failed, retry_after)


def _is_client_connection_error(exc: BaseException) -> bool:
    """aiohttp's connection errors (without importing aiohttp here)."""
    return any(cls.__name__ in ("ClientConnectionError", "ServerDisconnectedError")
               for cls in type(exc).__mro__)


class Budgets:
    """The budgets of one manager, by target name, built from their configs on first use."""

    def __init__(self, configs: Mapping[str, BudgetConfig] | None = None, *,
                 clock: rtclock.AsyncClock | None = None,
                 metrics: rtmetrics.MetricsRegistry | None = None) -> None:
        configs = dict(configs or {})
        if len(configs) > MAX_BUDGETS:
            raise ValueError(f"at most {MAX_BUDGETS} budgets")
        for name, cfg in configs.items():
            if not name or not isinstance(cfg, BudgetConfig):
                raise TypeError(f"budget {name!r}: need a name and a BudgetConfig")
        self.configs: dict[str, BudgetConfig] = configs
        self._clock: rtclock.AsyncClock = clock or rtclock.SystemAsyncClock()
        self._metrics = metrics
        self._budgets: dict[str, Budget] = {}
        self._share = 1.0

    def __getitem__(self, name: str) -> Budget:
        budget = self._budgets.get(name)
        if budget is None:
            config = self.configs.get(name)
            if config is None:
                raise KeyError(f"no budget named {name!r} (declared: "
                               f"{sorted(self.configs) or 'none'})")
            budget = self._budgets[name] = Budget(name, config, clock=self._clock,
                                                  metrics=self._metrics)
            if self._share != 1.0:
                budget.set_share(self._share)
        return budget

    @property
    def share(self) -> float:
        """The part of every declared budget this process may use (see :meth:`set_share`)."""
        return self._share

    def set_share(self, share: float) -> None:
        """Scale every budget, now and later built, to ``share`` of its configuration
        (:meth:`Budget.set_share`): a sharded manager gives each replica the part of the
        shards it holds, so that the replicas together keep the configured budget."""
        if not (0.0 < share <= 1.0 and math.isfinite(share)):
            raise ValueError("a budget's share must be in (0, 1]")
        self._share = share
        for budget in self._budgets.values():
            budget.set_share(share)

    def __contains__(self, name: object) -> bool:
        return name in self.configs

    def names(self) -> list[str]:
        return sorted(self.configs)
