"""What a client asks of exec, attach, port-forward and log, from the query string.

Parsing follows kube-apiserver: booleans as Go's ``strconv.ParseBool``, ``stdout`` and
``stderr`` default to true for exec and attach (``SetDefaults_PodExecOptions``), ``stderr`` is
dropped with a TTY (the terminal merges it), ``command`` repeats, ports may repeat and hold
comma-separated lists. Errors are Kubernetes' own: 400 for what cannot be parsed, 422
``PodLogOptions ... is invalid`` for log options out of range.

A container of ``""`` means the client named none; choosing the default is the caller's
business (it knows the pod).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from multidict import MultiMapping

from setpoint.apimachinery import errors, fields, regexp, timeutil
from setpoint.server import responses

#: how many words a command may have, and how long it may be in all
MAX_COMMAND_WORDS = 1024
MAX_COMMAND_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecOptions:
    container: str = ""
    command: tuple[str, ...] = ()
    stdin: bool = False
    stdout: bool = True
    stderr: bool = True
    tty: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class AttachOptions:
    container: str = ""
    stdin: bool = False
    stdout: bool = True
    stderr: bool = True
    tty: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class PortForwardOptions:
    #: only the WebSocket channel protocol names its ports up front; SPDY streams name
    #: theirs in their headers
    ports: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class LogOptions:
    container: str = ""
    follow: bool = False
    previous: bool = False
    since_seconds: int | None = None
    since_time: datetime | None = None
    timestamps: bool = False
    tail_lines: int | None = None
    limit_bytes: int | None = None
    #: ``All``, ``Stdout`` or ``Stderr``; ``None`` when not asked (both)
    stream: str | None = None


Query = MultiMapping[str] | Mapping[str, str]

LOG_STREAMS = ("All", "Stderr", "Stdout")
_INTEGER = regexp.Regexp(r"^[+-]?[0-9]+$")


def _streams(query: Query) -> tuple[bool, bool, bool, bool]:
    stdin = responses.parse_bool(query, "stdin", False)
    stdout = responses.parse_bool(query, "stdout", True)
    stderr = responses.parse_bool(query, "stderr", True)
    tty = responses.parse_bool(query, "tty", False)
    if tty:
        stderr = False
    if not (stdin or stdout or stderr):
        raise errors.BadRequest("you must specify at least 1 of stdin, stdout, stderr")
    return stdin, stdout, stderr, tty


def parse_exec(query: Query) -> ExecOptions:
    command = tuple(query.getall("command", [])) if isinstance(query, MultiMapping) else (
        (query["command"],) if "command" in query else ())
    if not command:
        raise errors.BadRequest("you must specify at least one command for the container")
    if (len(command) > MAX_COMMAND_WORDS
            or sum(len(word.encode()) for word in command) > MAX_COMMAND_BYTES):
        raise errors.BadRequest(
            f"command too long (at most {MAX_COMMAND_WORDS} words, {MAX_COMMAND_BYTES} bytes)")
    stdin, stdout, stderr, tty = _streams(query)
    return ExecOptions(container=query.get("container", ""), command=command, stdin=stdin,
                       stdout=stdout, stderr=stderr, tty=tty)


def parse_attach(query: Query) -> AttachOptions:
    stdin, stdout, stderr, tty = _streams(query)
    return AttachOptions(container=query.get("container", ""), stdin=stdin, stdout=stdout,
                         stderr=stderr, tty=tty)


def parse_port_forward(query: Query, *, max_ports: int) -> PortForwardOptions:
    values = query.getall("ports", []) if isinstance(query, MultiMapping) else (
        [query["ports"]] if "ports" in query else [])
    ports: list[int] = []
    for value in values:
        if not value:
            raise errors.BadRequest('query parameter "ports" cannot be empty')
        for text in value.split(","):
            port = parse_port(text.strip())
            if port in ports:
                raise errors.BadRequest(f"port {port} is requested twice")
            ports.append(port)
            if len(ports) > max_ports:
                raise errors.BadRequest(f"at most {max_ports} ports can be forwarded at once")
    return PortForwardOptions(ports=tuple(ports))


def parse_port(text: str) -> int:
    """A port number as the kubelet parses it (``strconv.ParseUint(p, 10, 16)``, > 0)."""
    if not text.isascii() or not text.isdigit() or len(text) > 5 or int(text) > 65535:
        raise errors.BadRequest(f'unable to parse "{text[:32]}" as a port')
    port = int(text)
    if port < 1:
        raise errors.BadRequest(f'port "{text}" must be > 0')
    return port


def _int64(query: Query, name: str) -> int | None:
    """An integer query parameter as Go's ``strconv.ParseInt(v, 10, 64)`` takes it."""
    value = query.get(name)
    if value is not None and value != "" and (len(value) > 20 or not _INTEGER.search(value)):
        raise errors.BadRequest(
            f'invalid value for {name}: strconv.ParseInt: parsing "{value[:32]}": '
            "invalid syntax")
    number = responses.parse_int(query, name)
    if number is not None and not -(1 << 63) <= number < (1 << 63):
        raise errors.BadRequest(
            f'invalid value for {name}: strconv.ParseInt: parsing "{value}": '
            "value out of range")
    return number


def parse_log(query: Query, name: str) -> LogOptions:
    since_time: datetime | None = None
    raw_time = query.get("sinceTime")
    if raw_time:
        try:
            since_time = timeutil.parse_time(raw_time)
        except ValueError:
            raise errors.BadRequest(
                f'invalid value for sinceTime: parsing time "{raw_time[:64]}" as RFC 3339 '
                "failed") from None
    options = LogOptions(
        container=query.get("container", ""),
        follow=responses.parse_bool(query, "follow"),
        previous=responses.parse_bool(query, "previous"),
        since_seconds=_int64(query, "sinceSeconds"),
        since_time=since_time,
        timestamps=responses.parse_bool(query, "timestamps"),
        tail_lines=_int64(query, "tailLines"),
        limit_bytes=_int64(query, "limitBytes"),
        stream=query.get("stream"),
    )
    problems: list[fields.FieldError] = []
    if options.tail_lines is not None and options.tail_lines < 0:
        problems.append(fields.invalid("tailLines", options.tail_lines,
                                       "must be greater than or equal to 0"))
    if options.limit_bytes is not None and options.limit_bytes < 1:
        problems.append(fields.invalid("limitBytes", options.limit_bytes,
                                       "must be greater than 0"))
    if options.since_seconds is not None and options.since_time is not None:
        problems.append(fields.forbidden(
            "", "at most one of `sinceTime` or `sinceSeconds` may be specified"))
    elif options.since_seconds is not None and options.since_seconds < 1:
        problems.append(fields.invalid("sinceSeconds", options.since_seconds,
                                       "must be greater than 0"))
    if options.stream is not None and options.stream not in LOG_STREAMS:
        problems.append(fields.not_supported("stream", options.stream, LOG_STREAMS))
    if problems:
        raise errors.invalid("PodLogOptions", "", name, problems)
    return options
