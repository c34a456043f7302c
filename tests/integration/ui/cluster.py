"""A ``setpoint serve`` process with two token users for the UI's tests: ``alice``
(system:masters) and ``viewer`` (bound to the ``view`` ClusterRole), and a CRD with a status
subresource whose objects carry conditions."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from setpoint.client import config as client_config
from tests.conftest import ServeProcess, start_serve

ADMIN_TOKEN = "ui-admin-token-0123456789"
VIEW_TOKEN = "ui-view-token-0123456789"

WIDGETS_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com", "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "subresources": {"status": {}},
            "additionalPrinterColumns": [
                {"name": "Size", "type": "integer", "jsonPath": ".spec.size"}],
            "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {
                    "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                    "status": {"type": "object",
                               "x-kubernetes-preserve-unknown-fields": True}}}},
        }],
    },
}


@dataclass
class UiCluster:
    serve: ServeProcess

    @property
    def url(self) -> str:
        return self.serve.url

    def anonymous_context(self) -> ssl.SSLContext:
        """TLS that trusts the cluster CA and presents no client certificate."""
        config = client_config.load_kubeconfig(self.serve.kubeconfig)
        assert config.ca_data is not None
        return ssl.create_default_context(cadata=config.ca_data.decode("ascii"))

    def call(self, method: str, path: str, body: Any = None, *, token: str | None = ADMIN_TOKEN,
             content_type: str = "application/json",
             headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        """One request with ``token`` (None: no credentials); (status, headers, body),
        error statuses included."""
        all_headers = dict(headers or {})
        if token is not None:
            all_headers["Authorization"] = f"Bearer {token}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            all_headers["Content-Type"] = content_type
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers=all_headers)
        opener = urllib.request.build_opener(
            urllib.request.HTTPSHandler(context=self.anonymous_context()), _NoRedirect())
        try:
            with opener.open(request, timeout=10) as response:
                return response.status, dict(response.headers), response.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def ok(self, method: str, path: str, body: Any = None, **kwargs: Any) -> Any:
        status, _, data = self.call(method, path, body, **kwargs)
        assert 200 <= status < 300, (status, data)
        return json.loads(data)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def start(data_dir: Path) -> UiCluster:
    data_dir.mkdir(parents=True, exist_ok=True)
    tokens = data_dir / "tokens.csv"
    tokens.write_text(f'{ADMIN_TOKEN},alice,alice-uid,"system:masters"\n'
                      f"{VIEW_TOKEN},viewer,viewer-uid\n")
    tokens.chmod(0o600)
    serve = start_serve(data_dir, extra_args=["--token-auth-file", str(tokens),
                                              "--pod-runtime", "simulate"])
    cluster = UiCluster(serve)
    cluster.ok("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "viewer-view"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "view"},
        "subjects": [{"kind": "User", "name": "viewer",
                      "apiGroup": "rbac.authorization.k8s.io"}]})
    return cluster
