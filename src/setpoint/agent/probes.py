"""Probes and lifecycle hooks: what to run, and how results become states.

A probe (``livenessProbe``, ``readinessProbe``, ``startupProbe``) and a lifecycle handler
(``postStart``, ``preStop``) are one of: ``exec`` (a command in the container; exit 0 is
success), ``httpGet`` (a GET to the pod's IP, or ``host``; 200-399 is success), ``tcpSocket``
(a connection opens), ``grpc`` (not supported: reported as a failure) and, for hooks,
``sleep``. :func:`run_action` runs one with a timeout and returns a :class:`Outcome` whose
message reads as the kubelet's (``HTTP probe failed with statuscode: 500``,
``dial tcp 10.42.0.7:80: connect: connection refused``).

:class:`ProbeState` is the kubelet's result rule, pure: a probe's published result flips only
after ``failureThreshold`` consecutive failures or ``successThreshold`` consecutive successes.
Before its first result a readiness probe reads *failure* (not ready), a liveness probe
*success*, a startup probe *unknown*.

:class:`ProbeSpec` bounds the timings the spec can ask for (a period of at least 1 s, as the
API validates); the waits themselves belong to the caller's clock.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

__all__ = ["ExecFn", "Outcome", "ProbeSpec", "ProbeState", "resolve_port", "run_action"]

#: Kubernetes' probe User-Agent, at the minor version setpoint reports.
USER_AGENT: Final = "kube-probe/1.32"
_MAX_HEADER_BYTES: Final = 64 * 1024
_MAX_OUTPUT: Final = 10 * 1024

#: Runs a command in the container: (argv, timeout seconds) → (exit code, output).
ExecFn = Callable[[list[str], float], Awaitable[tuple[int, bytes]]]

ProbeKind = Literal["liveness", "readiness", "startup"]


@dataclass(frozen=True, slots=True)
class Outcome:
    ok: bool
    message: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeSpec:
    """A probe's action and timings, with Kubernetes' defaults."""

    action: Mapping[str, Any]
    initial_delay: float = 0.0
    period: float = 10.0
    timeout: float = 1.0
    success_threshold: int = 1
    failure_threshold: int = 3
    termination_grace: float | None = None

    @classmethod
    def parse(cls, probe: Mapping[str, Any] | None) -> ProbeSpec | None:
        if not probe:
            return None

        def num(key: str, default: float, low: float) -> float:
            value = probe.get(key)
            try:
                return max(low, float(value)) if value is not None else default
            except (TypeError, ValueError):
                return default

        grace = probe.get("terminationGracePeriodSeconds")
        return cls(action=probe, initial_delay=num("initialDelaySeconds", 0.0, 0.0),
                   period=num("periodSeconds", 10.0, 1.0),
                   timeout=num("timeoutSeconds", 1.0, 1.0),
                   success_threshold=int(num("successThreshold", 1, 1)),
                   failure_threshold=int(num("failureThreshold", 3, 1)),
                   termination_grace=None if grace is None else max(0.0, float(grace)))


class ProbeState:
    """Consecutive results → the published result (True, False or None for unknown)."""

    __slots__ = ("_count", "_last", "failure_threshold", "result", "success_threshold")

    def __init__(self, kind: ProbeKind, spec: ProbeSpec) -> None:
        self.success_threshold = spec.success_threshold
        self.failure_threshold = spec.failure_threshold
        self.result: bool | None = {"liveness": True, "readiness": False, "startup": None}[kind]
        self._last: bool | None = None
        self._count = 0

    def observe(self, ok: bool) -> bool:
        """Record one probe result; True when the published result changed."""
        if self._last == ok:
            self._count += 1
        else:
            self._last, self._count = ok, 1
        threshold = self.success_threshold if ok else self.failure_threshold
        if self._count < threshold:
            return False
        changed = self.result != ok
        self.result = ok
        return changed


def resolve_port(port: Any, container: Mapping[str, Any]) -> int:
    """A probe's ``port``: a number, or the name of one of the container's ports."""
    if isinstance(port, int) and not isinstance(port, bool):
        number = port
    elif isinstance(port, str) and port.isdigit():
        number = int(port)
    else:
        for p in container.get("ports") or []:
            if p.get("name") == port:
                number = int(p.get("containerPort", 0))
                break
        else:
            raise ValueError(f"port {port!r} not found in the container's ports")
    if not 0 < number < 65536:
        raise ValueError(f"invalid port {number}")
    return number


async def run_action(action: Mapping[str, Any], *, container: Mapping[str, Any], pod_ip: str,
                     timeout: float, exec_fn: ExecFn,
                     sleep: Callable[[float], Awaitable[None]] | None = None) -> Outcome:
    """Run a probe or hook action once, within ``timeout`` seconds."""
    try:
        if (ex := action.get("exec")) is not None:
            argv = [str(a) for a in ex.get("command") or []]
            if not argv:
                return Outcome(False, "exec: no command")
            code, output = await exec_fn(argv, timeout)
            text = output[:_MAX_OUTPUT].decode(errors="replace")
            if code < 0:
                return Outcome(False, f"command {argv!r} timed out")
            return Outcome(code == 0, text if code == 0 or text else
                           f"command {argv!r} exited with {code}")
        if (http := action.get("httpGet")) is not None:
            return await _http_get(http, container, pod_ip, timeout)
        if (tcp := action.get("tcpSocket")) is not None:
            host = tcp.get("host") or pod_ip
            port = resolve_port(tcp.get("port"), container)
            return await _tcp(host, port, timeout)
        if (sl := action.get("sleep")) is not None:
            if sleep is not None:
                await sleep(max(0.0, float(sl.get("seconds", 0))))
            return Outcome(True)
        if action.get("grpc") is not None:
            return Outcome(False, "grpc probes are not supported by setpoint's process runtime")
        return Outcome(False, "no action")
    except ValueError as e:
        return Outcome(False, str(e))


def _dial_error(host: str, port: int, e: BaseException) -> str:
    if isinstance(e, TimeoutError):
        return f"dial tcp {host}:{port}: i/o timeout"
    if isinstance(e, ConnectionRefusedError):
        return f"dial tcp {host}:{port}: connect: connection refused"
    return f"dial tcp {host}:{port}: {e.strerror if isinstance(e, OSError) else e}"


async def _tcp(host: str, port: int, timeout: float) -> Outcome:
    try:
        async with asyncio.timeout(timeout):
            _, writer = await asyncio.open_connection(host, port)
    except (OSError, TimeoutError) as e:
        return Outcome(False, _dial_error(host, port, e))
    writer.close()
    try:
        await writer.wait_closed()
    except OSError:
        pass
    return Outcome(True)


async def _http_get(http: Mapping[str, Any], container: Mapping[str, Any], pod_ip: str,
                    timeout: float) -> Outcome:
    scheme = str(http.get("scheme") or "HTTP").lower()
    host = http.get("host") or pod_ip
    port = resolve_port(http.get("port", 80 if scheme == "http" else 443), container)
    path = str(http.get("path") or "/")
    if not path.startswith("/"):
        path = "/" + path
    host_part = f"[{host}]" if ":" in host else host
    url = f"{scheme}://{host_part}:{port}{path}"
    headers = {"Host": f"{host_part}:{port}", "User-Agent": USER_AGENT, "Accept": "*/*"}
    for h in http.get("httpHeaders") or []:
        name = str(h.get("name", ""))
        if name and "\n" not in name and "\r" not in name:
            headers[name] = str(h.get("value", "")).replace("\r", "").replace("\n", "")
    headers["Connection"] = "close"
    request = (f"GET {path} HTTP/1.1\r\n"
               + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n")
    context: ssl.SSLContext | None = None
    if scheme == "https":
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # the kubelet does not verify probe certificates
    writer: asyncio.StreamWriter | None = None
    try:
        async with asyncio.timeout(timeout):
            try:
                reader, writer = await asyncio.open_connection(
                    host, port, ssl=context, limit=_MAX_HEADER_BYTES)
            except OSError as e:
                return Outcome(False, f'Get "{url}": {_dial_error(host, port, e)}')
            writer.write(request.encode("latin-1", errors="replace"))
            await writer.drain()
            status_line = await reader.readline()
    except TimeoutError:
        return Outcome(False, f'Get "{url}": context deadline exceeded '
                              f"(Client.Timeout exceeded while awaiting headers)")
    except (OSError, ValueError, asyncio.LimitOverrunError) as e:
        return Outcome(False, f'Get "{url}": {e}')
    finally:
        if writer is not None:
            writer.close()
    parts = status_line.decode("latin-1").split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        return Outcome(False, f'Get "{url}": malformed HTTP response {status_line[:80]!r}')
    code = int(parts[1])
    if 200 <= code < 400:
        return Outcome(True)
    return Outcome(False, f"HTTP probe failed with statuscode: {code}")
