"""The audit log of ``setpoint serve --audit-log-path``, with the real kubectl as the client."""

from __future__ import annotations

import json
import shutil
import stat
from pathlib import Path

import pytest

from tests.compat.conftest import Kubectl, eventually
from tests.conftest import start_serve

pytestmark = pytest.mark.compat


def test_who_did_what_is_recorded_and_secrets_stay_out(tmp_path: Path) -> None:
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed")
    log = tmp_path / "audit" / "audit.log"
    serve = start_serve(tmp_path / "data", extra_args=["--audit-log-path", str(log)])
    try:
        kubectl = Kubectl(serve.kubeconfig, tmp_path / "cache", {})
        kubectl.run("create", "secret", "generic", "pw", "--from-literal=p=hunter2-audit")
        kubectl.run("create", "clusterrole", "reader", "--verb=get", "--resource=configmaps")
        denied = kubectl.run("get", "configmaps", "--as=nobody", check=False)
        assert denied.returncode != 0

        def events() -> list[dict[str, object]]:
            return [json.loads(line) for line in log.read_text().splitlines()]

        def recorded(verb: str, resource: str) -> dict[str, object]:
            return eventually(lambda: next((e for e in events() if e["verb"] == verb and (
                e.get("objectRef") or {}).get("resource") == resource), None))

        secret = recorded("create", "secrets")
        assert secret["level"] == "Metadata"
        assert secret["user"]["username"] == "system:admin"  # type: ignore[index]
        assert secret["responseStatus"]["code"] == 201  # type: ignore[index]
        assert "requestObject" not in secret
        role = recorded("create", "clusterroles")
        assert role["level"] == "RequestResponse"
        assert role["requestObject"]["rules"][0]["verbs"] == ["get"]  # type: ignore[index]
        forbidden = eventually(lambda: next((e for e in events() if (
            e.get("impersonatedUser") or {}).get("username") == "nobody"), None))
        assert forbidden["responseStatus"]["code"] == 403  # type: ignore[index]
        assert forbidden["impersonatedUser"]["username"] == "nobody"  # type: ignore[index]
        assert forbidden["annotations"]["authorization.k8s.io/decision"] == "forbid"  # type: ignore[index]
    finally:
        serve.stop()
    assert b"hunter2-audit" not in log.read_bytes()
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
