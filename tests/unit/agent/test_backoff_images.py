"""CrashLoopBackOff's delays, and what an image means to the process runtime."""

from __future__ import annotations

import pytest

from setpoint.agent import backoff as bo
from setpoint.agent import images


def _crash_loop(b: bo.Backoff, exits: list[float]) -> list[float]:
    """Each exit's wait before the restart (the container restarts as soon as allowed)."""
    waits = []
    for exited in exits:
        ready = b.ready_at(exited_at=exited)
        waits.append(ready - exited)
        assert b.in_backoff(exited_at=exited, now=ready) is False
        if ready > exited:
            assert b.in_backoff(exited_at=exited, now=ready - 0.001) is True
        b.restarted(exited_at=exited, now=ready)
    return waits


def test_delays_double_from_ten_seconds_to_five_minutes() -> None:
    b = bo.Backoff()
    # each instance runs one second after its restart
    t = 0.0
    exits = []
    waits: list[float] = []
    for _ in range(9):
        exits.append(t)
        waits += _crash_loop(b, [t])
        t += waits[-1] + 1.0
    assert waits == [0, 10, 20, 40, 80, 160, 300, 300, 300]


def test_a_container_that_ran_ten_minutes_starts_over() -> None:
    b = bo.Backoff()
    assert _crash_loop(b, [0.0, 1.0, 12.0]) == [0, 10, 20]
    # restarted at 32 (12 + 20); it runs for 10 minutes and a bit
    assert b.ready_at(exited_at=32 + 600.5) == 32 + 600.5
    b.restarted(exited_at=632.5, now=632.5)
    assert b.delay == 10
    # ... but 10 minutes exactly is not enough
    b2 = bo.Backoff()
    _crash_loop(b2, [0.0, 1.0])
    assert b2.in_backoff(exited_at=11 + 600, now=11 + 600) is True


def test_backoff_persists() -> None:
    b = bo.Backoff(delay=40, last_update=123.5)
    assert bo.Backoff.from_json(b.to_json()) == b


@pytest.mark.parametrize(("seconds", "text"), [
    (10, "10s"), (20, "20s"), (80, "1m20s"), (160, "2m40s"), (300, "5m0s"), (0.5, "0.5s"),
    (3600, "1h0m0s"),
])
def test_go_duration(seconds: float, text: str) -> None:
    assert bo.format_duration(seconds) == text


@pytest.mark.parametrize(("image", "repo"), [
    ("busybox", "busybox"), ("busybox:1.36", "busybox"), ("docker.io/library/busybox:1.36",
                                                         "busybox"),
    ("registry.k8s.io/pause:3.9", "pause"), ("localhost:5000/app@sha256:ab", "app"),
    ("ghcr.io/org/tool:v1", "org/tool"), ("Python:3.12-slim", "python"),
])
def test_repository(image: str, repo: str) -> None:
    assert images.repository(image) == repo


TABLE = images.ImageTable()


@pytest.mark.parametrize(("container", "argv"), [
    ({"image": "nginx", "command": ["nginx", "-g"], "args": ["daemon off;"]},
     ["nginx", "-g", "daemon off;"]),
    ({"image": "busybox", "args": ["sleep", "3600"]}, ["sleep", "3600"]),
    ({"image": "busybox:1.36"}, ["sh"]),
    ({"image": "python:3.12", "args": ["python3", "-c", "print(1)"]},
     ["python3", "-c", "print(1)"]),
    ({"image": "python:3.12"}, ["python3"]),
    # the infrastructure image the clients' own e2e tests run (kr8s: a pod that stays Ready)
    ({"image": "registry.k8s.io/pause:3.10"}, ["sleep", "infinity"]),
    ({"image": "gcr.io/google_containers/pause"}, ["sleep", "infinity"]),
    # the python image's `python` is python3, which every machine has (`python` not always)
    ({"image": "python", "command": ["python", "-u", "/opt/s.py"]}, ["python3", "-u", "/opt/s.py"]),
    ({"image": "python:3.12", "args": ["python", "-c", "1"]}, ["python3", "-c", "1"]),
    ({"image": "busybox", "command": ["python", "-c", "1"]}, ["python", "-c", "1"]),
])
def test_argv(container: dict[str, object], argv: list[str]) -> None:
    assert TABLE.argv(container) == argv


def test_unknown_image_without_command_cannot_run() -> None:
    with pytest.raises(images.NoCommand) as info:
        TABLE.argv({"image": "nginx:1.27", "args": ["-g", "daemon off;"]})
    message = str(info.value)
    assert message.startswith("no command specified")
    assert "'nginx:1.27'" in message
    assert "command" in message
    assert "busybox" in message


def test_an_image_table_with_an_entrypoint() -> None:
    table = images.ImageTable({"myapp": images.ImageEntry(entrypoint=("/opt/app",),
                                                          cmd=("--serve",))})
    assert table.argv({"image": "myapp:2"}) == ["/opt/app", "--serve"]
    assert table.argv({"image": "myapp:2", "args": ["--once"]}) == ["/opt/app", "--once"]
    with pytest.raises(images.NoCommand):
        table.argv({"image": "busybox"})
