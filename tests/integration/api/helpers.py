"""Small helpers for talking to the in-process server over HTTP."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from setpoint.client import Client, load_kubeconfig
from setpoint.server.securing import SecurityConfig
from setpoint.server.server import Server, ServerConfig
from setpoint.storage import StorageConfig

CRD_V1: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com", "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget",
                  "shortNames": ["wd"]},
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "subresources": {"status": {},
                             "scale": {"specReplicasPath": ".spec.replicas",
                                       "statusReplicasPath": ".status.replicas",
                                       "labelSelectorPath": ".status.selector"}},
            "additionalPrinterColumns": [
                {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                {"name": "Phase", "type": "string", "jsonPath": ".status.phase"}],
            "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {
                    "spec": {"type": "object", "required": ["size"], "properties": {
                        "size": {"type": "integer", "minimum": 0},
                        "replicas": {"type": "integer"},
                        "color": {"type": "string", "enum": ["red", "blue"],
                                  "default": "red"}}},
                    "status": {"type": "object", "properties": {
                        "phase": {"type": "string"}, "replicas": {"type": "integer"},
                        "selector": {"type": "string"}}}}}}}],
    },
}

WIDGETS = "/apis/example.com/v1/namespaces/default/widgets"


def widget(name: str, size: int = 1, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"apiVersion": "example.com/v1", "kind": "Widget",
                            "metadata": {"name": name}, "spec": {"size": size}}
    body.update(extra)
    return body


async def request(http: aiohttp.ClientSession, method: str, path: str, body: Any = None, *,
                  content_type: str = "application/json", raw: bytes | None = None,
                  headers: dict[str, str] | None = None,
                  ) -> tuple[int, Any, aiohttp.typedefs.LooseHeaders]:
    data: Any = raw if raw is not None else (orjson.dumps(body) if body is not None else None)
    if isinstance(data, bytes) and len(data) > 1024 * 1024:
        data = io.BytesIO(data)
    hdrs = {"Content-Type": content_type, **(headers or {})}
    async with http.request(method, path, data=data, headers=hdrs) as response:
        payload = await response.read()
        try:
            decoded = orjson.loads(payload) if payload else None
        except orjson.JSONDecodeError:
            decoded = payload.decode()
        return response.status, decoded, response.headers


async def install_widgets(http: aiohttp.ClientSession) -> None:
    status, body, _ = await request(http, "POST",
                                    "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                                    CRD_V1)
    assert status == 201, body
    for _ in range(100):
        status, _, _ = await request(http, "GET", WIDGETS)
        if status == 200:
            return
        await asyncio.sleep(0.02)
    raise AssertionError("widgets were not served within 2 s")


def secured_config(tmp_path: Path) -> ServerConfig:
    """An in-process server on memory storage, secured as ``setpoint serve`` is by default
    (TLS, authentication, RBAC), its PKI under ``tmp_path / "pki"`` and its admin's
    kubeconfig at ``tmp_path / "kubeconfig"``."""
    return ServerConfig(port=0, storage=StorageConfig(kind="memory"),
                        kubeconfig_path=tmp_path / "kubeconfig",
                        security=SecurityConfig(pki_dir=tmp_path / "pki"))


async def grant(admin: Client, user: str, rules: list[dict[str, Any]], *,
                name: str | None = None) -> None:
    """A ClusterRole of ``rules`` bound to ``user``, both named ``name`` (default: the
    user's name)."""
    name = name or user
    await admin.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                        "metadata": {"name": name}, "rules": rules})
    await admin.create({"apiVersion": "rbac.authorization.k8s.io/v1",
                        "kind": "ClusterRoleBinding", "metadata": {"name": name},
                        "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                    "kind": "ClusterRole", "name": name},
                        "subjects": [{"kind": "User", "name": user,
                                      "apiGroup": "rbac.authorization.k8s.io"}]})


def user_client(server: Server, tmp_path: Path, user: str) -> Client:
    """A client of the secured in-process ``server`` authenticated as ``user`` (no groups),
    through a kubeconfig written under ``tmp_path``."""
    secured = server.secured
    assert secured is not None
    path = tmp_path / f"{user}.kubeconfig"
    path.write_text(json.dumps(secured.kubeconfig(server.url, name=user, user=user,
                                                  groups=())))
    return Client(load_kubeconfig(path))
