"""The outcome of an exec or attach, as the error channel carries it.

Since ``v4.channel.k8s.io`` it is a ``metav1.Status``, also on success; a non-zero exit is
reason ``NonZeroExitCode`` with the code as a cause of type ``ExitCode`` (client-go turns it
into kubectl's exit code; the Python client reads ``details.causes[0].message``). Older
versions send only the text of a failure. The bodies are what the kubelet marshals: no
``kind``/``apiVersion`` for the exit statuses.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any

import orjson

from setpoint.apimachinery import errors
from setpoint.server.streaming.target import ExitStatus

Status = dict[str, Any]


def success() -> Status:
    return {"metadata": {}, "status": "Success"}


def exited(status: ExitStatus, command: Sequence[str] = ()) -> Status:
    if status.code == 0:
        return success()
    what = status.message or (
        f"command '{shlex.join(command)}' exited with {status.code}" if command
        else f"exited with {status.code}")
    return {
        "metadata": {},
        "status": "Failure",
        "message": f"command terminated with non-zero exit code: {what}",
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": str(status.code)}]},
    }


def failed(error: errors.ApiError) -> Status:
    return error.status()


def internal(detail: str) -> Status:
    return errors.InternalError(f"Internal error occurred: {detail}").status()


def encode(status: Status, *, as_json: bool) -> bytes | None:
    """What the error channel carries: the Status (v4+), or a failure's text (else ``None``)."""
    if as_json:
        return orjson.dumps(status)
    if status.get("status") == "Success":
        return None
    return str(status.get("message") or "error").encode()
