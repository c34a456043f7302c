"""What the error channel carries at the end of an exec."""

from __future__ import annotations

import orjson
import pytest

from setpoint.apimachinery import errors
from setpoint.server.streaming import status
from setpoint.server.streaming.target import ExitStatus


def test_success_is_a_status_from_v4_on_and_nothing_before() -> None:
    body = status.exited(ExitStatus(0), ["true"])
    assert status.encode(body, as_json=True) == b'{"metadata":{},"status":"Success"}'
    assert status.encode(body, as_json=False) is None


def test_a_non_zero_exit_carries_its_code_as_client_go_reads_it() -> None:
    body = status.exited(ExitStatus(3), ["sh", "-c", "exit 3"])
    decoded = orjson.loads(status.encode(body, as_json=True) or b"")
    assert decoded == {
        "metadata": {}, "status": "Failure", "reason": "NonZeroExitCode",
        "message": "command terminated with non-zero exit code: "
                   "command 'sh -c 'exit 3'' exited with 3",
        "details": {"causes": [{"reason": "ExitCode", "message": "3"}]},
    }
    assert status.encode(body, as_json=False) == decoded["message"].encode()


def test_an_api_error_is_its_own_status() -> None:
    body = status.failed(errors.NotFound('container "x" not found'))
    assert body["code"] == 404
    assert body["reason"] == "NotFound"
    assert status.internal("boom")["message"] == "Internal error occurred: boom"


def test_exit_codes_are_bytes() -> None:
    with pytest.raises(ValueError, match=r"out of 0\.\.255"):
        ExitStatus(256)
