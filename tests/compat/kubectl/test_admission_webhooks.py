"""Admission webhooks through kubectl, called over HTTPS on a real local server: a mutating
webhook adds a label, a validating one denies with its message, a webhook that times out
lets the request through under Ignore and refuses it with Kubernetes' message under Fail,
matchConditions skip a webhook, and a Service with local endpoints is a webhook target."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.compat.conftest import Kubectl, eventually
from tests.conftest import start_serve
from tests.webhookserver import Hang, WebhookServer, patch_response, webhook_server

pytestmark = pytest.mark.compat


def _deny_secret_keys(review: dict[str, Any]) -> dict[str, Any]:
    data = review["request"]["object"].get("data") or {}
    if "password" in data:
        return {"allowed": False, "status": {
            "code": 403, "reason": "Forbidden",
            "message": "configmaps may not hold a password"}}
    return {"allowed": True}


def _label(review: dict[str, Any]) -> dict[str, Any]:
    if (review["request"]["object"]["metadata"].get("labels")) is None:
        return patch_response([{"op": "add", "path": "/metadata/labels",
                                "value": {"webhook": "was-here"}}])
    return patch_response([{"op": "add", "path": "/metadata/labels/webhook",
                            "value": "was-here"}])


@pytest.fixture(scope="module")
def webhook() -> Iterator[WebhookServer]:
    handlers = {
        "/label": _label,
        "/deny": _deny_secret_keys,
        "/hang": lambda review: Hang(),
        "/never": lambda review: {"allowed": False, "status": {"message": "called"}},
        "/service": lambda review: {"allowed": False,
                                    "status": {"message": "answered through the service"}},
    }
    with webhook_server(handlers, hosts=("hooks.webhook-svc.svc",)) as server:
        yield server


def configuration(kind: str, name: str, namespace: str, client: dict[str, Any],
                  **extra: Any) -> str:
    hook = {"name": f"{name}.example.com", "clientConfig": client, "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"],
                       "operations": ["CREATE"], "resources": ["configmaps"]}], **extra}
    return json.dumps({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
                       "metadata": {"name": name}, "webhooks": [hook]})


def setup_hook(kubectl: Kubectl, webhook: WebhookServer, kind: str, name: str, path: str,
               **extra: Any) -> None:
    kubectl.run("create", "namespace", name)
    client = {"url": webhook.url(path), "caBundle": webhook.ca_bundle}
    kubectl.run("apply", "-f", "-", input=configuration(kind, name, name, client, **extra))


def test_a_mutating_webhook_adds_a_label(kubectl: Kubectl, webhook: WebhookServer) -> None:
    setup_hook(kubectl, webhook, "MutatingWebhookConfiguration", "mutate", "/label")
    kubectl.run("create", "configmap", "settings", "-n", "mutate", "--from-literal=a=1")
    labels = kubectl.json("get", "configmap", "settings", "-n", "mutate")["metadata"]["labels"]
    assert labels == {"webhook": "was-here"}
    out = kubectl.run("get", "mutatingwebhookconfigurations").stdout
    assert "mutate" in out


def test_a_validating_webhook_denies_with_its_message(kubectl: Kubectl,
                                                      webhook: WebhookServer) -> None:
    setup_hook(kubectl, webhook, "ValidatingWebhookConfiguration", "deny", "/deny")
    result = kubectl.run("create", "configmap", "creds", "-n", "deny",
                         "--from-literal=password=x", check=False)
    assert result.returncode != 0
    assert result.stderr.strip() == (
        'error: failed to create configmap: admission webhook "deny.example.com" denied the '
        "request: configmaps may not hold a password")
    kubectl.run("create", "configmap", "fine", "-n", "deny", "--from-literal=user=x")


def test_a_timeout_under_ignore_lets_the_request_through(kubectl: Kubectl,
                                                         webhook: WebhookServer) -> None:
    setup_hook(kubectl, webhook, "ValidatingWebhookConfiguration", "slow-ignore", "/hang",
               timeoutSeconds=1, failurePolicy="Ignore")
    kubectl.run("create", "configmap", "through", "-n", "slow-ignore")
    assert kubectl.json("get", "configmap", "through", "-n", "slow-ignore")["metadata"]


def test_a_timeout_under_fail_refuses_with_kubernetes_message(kubectl: Kubectl,
                                                              webhook: WebhookServer) -> None:
    setup_hook(kubectl, webhook, "ValidatingWebhookConfiguration", "slow-fail", "/hang",
               timeoutSeconds=1)
    result = kubectl.run("create", "configmap", "refused", "-n", "slow-fail", check=False)
    assert result.returncode != 0
    assert result.stderr.strip() == (
        'error: failed to create configmap: Internal error occurred: failed calling webhook '
        f'"slow-fail.example.com": failed to call webhook: Post "{webhook.url("/hang")}'
        '?timeout=1s": context deadline exceeded')


def test_match_conditions_skip_the_webhook(kubectl: Kubectl, webhook: WebhookServer) -> None:
    setup_hook(kubectl, webhook, "ValidatingWebhookConfiguration", "conditions", "/never",
               matchConditions=[{"name": "unless-exempt", "expression":
                                 "!has(object.metadata.labels) || "
                                 "!('exempt' in object.metadata.labels)"}])
    kubectl.run("apply", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "exempt", "namespace": "conditions", "labels": {"exempt": "1"}}}))
    result = kubectl.run("create", "configmap", "other", "-n", "conditions", check=False)
    assert 'admission webhook "conditions.example.com" denied the request: called' \
        in result.stderr


def test_a_service_with_local_endpoints_is_called(kubectl: Kubectl,
                                                  webhook: WebhookServer) -> None:
    kubectl.run("create", "namespace", "webhook-svc")
    kubectl.run("apply", "-n", "webhook-svc", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "hooks"},
             "spec": {"ports": [{"name": "https", "port": 443}]}},
            {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "hooks"},
             "subsets": [{"addresses": [{"ip": "127.0.0.1"}],
                          "ports": [{"name": "https", "port": webhook.port}]}]}]}))
    client = {"service": {"namespace": "webhook-svc", "name": "hooks", "path": "/service"},
              "caBundle": webhook.ca_bundle}
    kubectl.run("apply", "-f", "-", input=configuration(
        "ValidatingWebhookConfiguration", "service", "webhook-svc", client))
    result = kubectl.run("create", "configmap", "x", "-n", "webhook-svc", check=False)
    assert 'admission webhook "service.example.com" denied the request: answered through ' \
        "the service" in result.stderr


@pytest.mark.slow
def test_warnings_reach_kubectl_and_annotations_the_audit_log(
        tmp_path: Path, webhook: WebhookServer) -> None:
    log = tmp_path / "audit" / "audit.log"
    serve = start_serve(tmp_path / "data", extra_args=["--audit-log-path", str(log)])
    try:
        kubectl = Kubectl(serve.kubeconfig, tmp_path / "cache", {})
        webhook.handlers["/annotate"] = lambda review: patch_response(
            [{"op": "add", "path": "/data/stamped", "value": "yes"}],
            warnings=["stamped by the webhook"], auditAnnotations={"stamp": "yes"})
        client = {"url": webhook.url("/annotate"), "caBundle": webhook.ca_bundle}
        kubectl.run("apply", "-f", "-", input=configuration(
            "MutatingWebhookConfiguration", "stamp", "default", client))
        broken = {"url": webhook.url("/no-such-path"), "caBundle": webhook.ca_bundle}
        kubectl.run("apply", "-f", "-", input=configuration(
            "ValidatingWebhookConfiguration", "broken", "default", broken,
            failurePolicy="Ignore"))
        result = kubectl.run("create", "configmap", "stamped", "--from-literal=a=1")
        assert "Warning: stamped by the webhook" in result.stderr
        assert kubectl.json("get", "configmap", "stamped")["data"] == {"a": "1",
                                                                      "stamped": "yes"}

        def created() -> dict[str, Any] | None:
            for line in log.read_text().splitlines():
                event = json.loads(line)
                if event["verb"] == "create" and event.get("objectRef", {}).get(
                        "resource") == "configmaps" and event["stage"] == "ResponseComplete" \
                        and "stamp.example.com/stamp" in event.get("annotations", {}):
                    return dict(event)
            return None

        annotations = eventually(created)["annotations"]
        assert annotations["stamp.example.com/stamp"] == "yes"
        assert json.loads(annotations["mutation.webhook.admission.k8s.io/round_0_index_0"]) \
            == {"configuration": "stamp", "webhook": "stamp.example.com", "mutated": True}
        assert annotations["failed-open.validating.webhook.admission.k8s.io/"
                           "round_0_index_0"] == "broken.example.com"
    finally:
        serve.stop()
