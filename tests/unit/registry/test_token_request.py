"""TokenRequest: tokens for a ServiceAccount, their limits and bindings."""

from __future__ import annotations

from typing import Any

import pytest

from setpoint.apimachinery import errors
from setpoint.auth import jwt
from setpoint.pki import certs
from setpoint.registry.serviceaccounts import create_token

ISSUER = "https://kubernetes.default.svc.cluster.local"
ACCOUNT = {"metadata": {"name": "bot", "namespace": "team", "uid": "sa-1"}}
NOW = 1_800_000_000.0
SIGNER = jwt.Signer(certs.new_key())


def lookup(kind: str, namespace: str, name: str) -> str | None:
    return {("Pod", "team", "p"): "pod-1"}.get((kind, namespace, name))


def request(spec: dict[str, Any] | None = None) -> dict[str, Any]:
    return create_token(ACCOUNT, {"apiVersion": "authentication.k8s.io/v1",
                                  "kind": "TokenRequest", "spec": spec or {}},
                        signer=SIGNER, issuer=ISSUER, api_audiences=[ISSUER], now=NOW,
                        lookup=lookup)


def test_a_token_for_an_hour_by_default() -> None:
    out = request()
    assert out["status"]["expirationTimestamp"] == "2027-01-15T09:00:00Z"
    claims = jwt.Verifier(SIGNER.public_key).verify(out["status"]["token"], NOW)
    assert claims["sub"] == "system:serviceaccount:team:bot"
    assert claims["aud"] == [ISSUER]
    assert claims["exp"] - claims["iat"] == 3600
    assert out["spec"]["audiences"] == [ISSUER]


def test_bound_to_a_pod() -> None:
    out = request({"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "p"},
                   "audiences": ["vault"], "expirationSeconds": 600})
    claims = jwt.Verifier(SIGNER.public_key).verify(out["status"]["token"], NOW)
    assert claims["kubernetes.io"]["pod"] == {"name": "p", "uid": "pod-1"}
    assert claims["aud"] == ["vault"]


@pytest.mark.parametrize(("spec", "error", "message"), [
    ({"expirationSeconds": 599}, errors.Invalid, "less than 10 minutes"),
    ({"expirationSeconds": 2**32 + 1}, errors.Invalid, "larger than 2^32"),
    ({"expirationSeconds": "1h"}, errors.Invalid, "must be an integer"),
    ({"audiences": "x"}, errors.Invalid, "audiences"),
    ({"boundObjectRef": {"kind": "ConfigMap", "name": "c"}}, errors.Invalid, "Unsupported"),
    ({"boundObjectRef": {"kind": "Pod", "name": "gone"}}, errors.NotFound, "not found"),
    ({"boundObjectRef": {"kind": "Pod", "name": "p", "uid": "old"}}, errors.Conflict,
     "does not match the UID in record"),
])
def test_bad_requests(spec: dict[str, Any], error: type[errors.ApiError], message: str) -> None:
    with pytest.raises(error) as caught:
        request(spec)
    assert message in str(caught.value.status())
