"""Query parameters of exec, attach, port-forward and log, as kube-apiserver reads them."""

from __future__ import annotations

import pytest
from multidict import MultiDict

from setpoint.apimachinery import errors
from setpoint.server.streaming import options


def q(*pairs: tuple[str, str]) -> MultiDict[str]:
    return MultiDict(pairs)


def test_exec_as_kubectl_sends_it() -> None:
    got = options.parse_exec(q(("command", "sh"), ("command", "-c"), ("command", "exit 3"),
                               ("container", "main"), ("stderr", "true"), ("stdout", "true")))
    assert got == options.ExecOptions(container="main", command=("sh", "-c", "exit 3"),
                                      stdin=False, stdout=True, stderr=True, tty=False)


def test_exec_as_the_python_client_sends_it() -> None:
    got = options.parse_exec(q(("command", "ls"), ("stderr", "True"), ("stdin", "False"),
                               ("stdout", "True"), ("tty", "False")))
    assert got.command == ("ls",)
    assert (got.stdin, got.stdout, got.stderr, got.tty) == (False, True, True, False)


def test_stdout_and_stderr_default_to_true_and_a_tty_drops_stderr() -> None:
    assert options.parse_exec(q(("command", "x"))).stderr is True
    got = options.parse_exec(q(("command", "x"), ("stdin", "1"), ("tty", "t")))
    assert (got.stdin, got.stdout, got.stderr, got.tty) == (True, True, False, True)


@pytest.mark.parametrize(("pairs", "message"), [
    ((), "at least one command"),
    ((("command", "x"), ("stdout", "false"), ("stderr", "0")), "at least 1 of stdin"),
    ((("command", "x"), ("tty", "yes")), "invalid boolean value for tty"),
    (tuple(("command", "x") for _ in range(2000)), "command too long"),
], ids=["no-command", "no-streams", "bad-bool", "long-command"])
def test_bad_exec_requests_are_400(pairs: tuple[tuple[str, str], ...], message: str) -> None:
    with pytest.raises(errors.BadRequest, match=message):
        options.parse_exec(q(*pairs))


def test_attach_has_no_command() -> None:
    got = options.parse_attach(q(("container", "c"), ("stdin", "true"), ("tty", "true")))
    assert got == options.AttachOptions(container="c", stdin=True, stdout=True, stderr=False,
                                        tty=True)


def test_ports_repeat_or_are_comma_separated() -> None:
    got = options.parse_port_forward(q(("ports", "8080,9090"), ("ports", "1")), max_ports=8)
    assert got.ports == (8080, 9090, 1)
    assert options.parse_port_forward(q(), max_ports=8).ports == ()


@pytest.mark.parametrize(("value", "message"), [
    ("0", "must be > 0"), ("65536", "unable to parse"), ("-1", "unable to parse"),
    ("http", "unable to parse"), ("", "cannot be empty"), ("80,80", "requested twice"),
    (",".join(str(p) for p in range(1, 11)), "at most 8 ports"),
])
def test_bad_ports_are_400(value: str, message: str) -> None:
    with pytest.raises(errors.BadRequest, match=message):
        options.parse_port_forward(q(("ports", value)), max_ports=8)


def test_log_options() -> None:
    got = options.parse_log(q(("container", "c"), ("follow", "true"), ("tailLines", "10"),
                              ("timestamps", "true"), ("limitBytes", "100"),
                              ("sinceTime", "2026-01-02T03:04:05Z"), ("previous", "1"),
                              ("stream", "Stderr")), "web")
    assert (got.follow, got.timestamps, got.previous) == (True, True, True)
    assert (got.tail_lines, got.limit_bytes, got.stream) == (10, 100, "Stderr")
    assert got.since_time is not None
    assert got.since_time.isoformat() == "2026-01-02T03:04:05+00:00"
    assert options.parse_log(q(), "web") == options.LogOptions()


def test_invalid_log_options_are_422_with_kubernetes_messages() -> None:
    with pytest.raises(errors.Invalid) as caught:
        options.parse_log(q(("tailLines", "-1"), ("limitBytes", "0"), ("sinceSeconds", "0")),
                          "web")
    status = caught.value.status()
    assert status["code"] == 422
    assert status["message"] == (
        'PodLogOptions "web" is invalid: [limitBytes: Invalid value: 0: must be greater than 0'
        ", sinceSeconds: Invalid value: 0: must be greater than 0, tailLines: Invalid value: "
        "-1: must be greater than or equal to 0]")
    with pytest.raises(errors.Invalid, match="at most one of `sinceTime` or `sinceSeconds`"):
        options.parse_log(q(("sinceSeconds", "5"), ("sinceTime", "2026-01-02T03:04:05Z")),
                          "web")
    with pytest.raises(errors.Invalid, match="Unsupported value"):
        options.parse_log(q(("stream", "Both")), "web")


@pytest.mark.parametrize(("name", "value", "message"), [
    ("tailLines", "ten", "invalid syntax"),
    ("tailLines", "1_000", "invalid syntax"),
    ("limitBytes", "99999999999999999999", "out of range"),
    ("sinceTime", "yesterday", "RFC 3339"),
    ("follow", "maybe", "invalid boolean"),
])
def test_unparsable_log_options_are_400(name: str, value: str, message: str) -> None:
    with pytest.raises(errors.BadRequest, match=message):
        options.parse_log(q((name, value)), "web")
