"""Kubeconfig files the server writes for its users: the admin's, and each controller's.

A kubeconfig for a TLS server carries the cluster CA (``certificate-authority-data``) and a
client certificate and key (``client-certificate-data``, ``client-key-data``); for a plain
HTTP server (``--insecure-plain-http``) it carries no credentials at all. Files are written
atomically, 0600, in a 0700 directory (:func:`setpoint.pki.files.write_private`).
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import yaml

from setpoint.pki import files
from setpoint.pki.certs import KeyPair


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def kubeconfig(server_url: str, *, ca_pem: bytes | None = None,
               client: KeyPair | None = None, token: str | None = None,
               user: str = "setpoint-admin", namespace: str = "default") -> dict[str, Any]:
    cluster: dict[str, Any] = {"server": server_url}
    if ca_pem is not None:
        cluster["certificate-authority-data"] = _b64(ca_pem)
    credentials: dict[str, Any] = {}
    if client is not None:
        credentials["client-certificate-data"] = _b64(client.cert_pem)
        credentials["client-key-data"] = _b64(client.key_pem)
    if token is not None:
        credentials["token"] = token
    return {
        "apiVersion": "v1", "kind": "Config", "preferences": {},
        "clusters": [{"name": "setpoint", "cluster": cluster}],
        "users": [{"name": user, "user": credentials}],
        "contexts": [{"name": "setpoint", "context": {"cluster": "setpoint", "user": user,
                                                      "namespace": namespace}}],
        "current-context": "setpoint",
    }


def write(path: Path, config: dict[str, Any]) -> None:
    files.write_private(path, yaml.safe_dump(config, sort_keys=False).encode())
