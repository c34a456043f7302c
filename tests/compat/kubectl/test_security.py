"""Secure by default, with the real kubectl: who gets in, what RBAC lets them do, what they
are told when it does not, and what is kept secret on disk."""

from __future__ import annotations

import base64
import json
import os
import ssl
import stat
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.compat.conftest import Kubectl, eventually
from tests.conftest import ServeProcess

pytestmark = pytest.mark.compat


def kubeconfig_with(kubectl: Kubectl, path: Path, user: dict[str, Any]) -> Kubectl:
    """A kubectl whose kubeconfig names the same server and CA, with ``user``'s credentials."""
    admin = yaml.safe_load(kubectl.kubeconfig.read_text())
    config = {**admin, "users": [{"name": "someone", "user": user}],
              "contexts": [{"name": "setpoint", "context": {
                  "cluster": "setpoint", "user": "someone", "namespace": "default"}}]}
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return Kubectl(path, kubectl.cache_dir.parent / f"cache-{path.stem}", kubectl.env)


@pytest.fixture(scope="module")
def team(kubectl: Kubectl, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    """A ServiceAccount ``reader`` bound to ``view`` in namespace ``team``, through a token."""
    kubectl.run("create", "namespace", "team")
    kubectl.run("create", "namespace", "other")
    kubectl.run("create", "serviceaccount", "reader", "-n", "team")
    kubectl.run("create", "rolebinding", "reader-view", "--clusterrole=view",
                "--serviceaccount=team:reader", "-n", "team")
    for ns in ("team", "other"):
        kubectl.run("create", "configmap", "settings", "--from-literal=a=b", "-n", ns)
    token = kubectl.run("create", "token", "reader", "-n", "team").stdout.strip()
    return kubeconfig_with(kubectl, tmp_path_factory.mktemp("sa") / "reader.yaml",
                           {"token": token})


def test_no_credentials_is_401_on_every_resource_path(kubectl: Kubectl, serve: ServeProcess,
                                                      tmp_path: Path) -> None:
    nobody = kubeconfig_with(kubectl, tmp_path / "nobody.yaml", {"token": "not-a-token"})
    for args in (("get", "configmaps"), ("get", "namespaces"), ("get", "crd"),
                 ("auth", "whoami"), ("create", "configmap", "x")):
        result = nobody.run(*args, check=False)
        assert result.returncode != 0
        assert "You must be logged in to the server" in result.stderr \
            or "Unauthorized" in result.stderr, result.stderr
    context = ssl.create_default_context(cadata=ca_of(kubectl))
    for path in ("/api/v1/namespaces/default/configmaps", "/apis", "/api", "/openapi/v2",
                 "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "/metrics"):
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(serve.url + path, context=context, timeout=10)
        with caught.value as answer:
            assert answer.code == 401, path
            assert json.loads(answer.read())["reason"] == "Unauthorized"
    for path in ("/healthz", "/livez", "/readyz", "/version"):
        with urllib.request.urlopen(serve.url + path, context=context, timeout=10) as r:
            assert r.status == 200


def ca_of(kubectl: Kubectl) -> str:
    config = yaml.safe_load(kubectl.kubeconfig.read_text())
    return base64.b64decode(config["clusters"][0]["cluster"][
        "certificate-authority-data"]).decode()


def test_a_view_service_account_reads_its_namespace_and_nothing_else(team: Kubectl) -> None:
    listed = team.json("get", "configmaps", "-n", "team")
    assert "settings" in [i["metadata"]["name"] for i in listed["items"]]
    denied = team.run("get", "configmaps", "-n", "other", check=False)
    assert denied.returncode != 0
    assert ('configmaps is forbidden: User "system:serviceaccount:team:reader" cannot list '
            'resource "configmaps" in API group "" in the namespace "other"') in denied.stderr
    for args in (("get", "secrets", "-n", "team"), ("delete", "configmap", "settings", "-n",
                                                     "team"),
                 ("create", "configmap", "new", "-n", "team"), ("get", "namespaces")):
        result = team.run(*args, check=False)
        assert result.returncode != 0, args
        assert "forbidden" in result.stderr, result.stderr


def test_auth_whoami_and_can_i_answer_as_kubernetes(kubectl: Kubectl, team: Kubectl) -> None:
    whoami = team.run("auth", "whoami").stdout
    assert "system:serviceaccount:team:reader" in whoami
    assert "system:serviceaccounts:team" in whoami
    admin = kubectl.run("auth", "whoami").stdout
    assert "system:admin" in admin
    assert "system:masters" in admin
    assert team.run("auth", "can-i", "list", "configmaps", "-n", "team").stdout.strip() == "yes"
    result = team.run("auth", "can-i", "list", "configmaps", "-n", "other", check=False)
    assert (result.returncode, result.stdout.strip()) == (1, "no")
    listing = team.run("auth", "can-i", "--list", "-n", "team").stdout
    assert "configmaps" in listing
    assert "secrets" not in listing.split("Non-Resource")[0]
    as_reader = kubectl.run("auth", "can-i", "get", "configmaps", "-n", "team",
                            "--as=system:serviceaccount:team:reader").stdout.strip()
    assert as_reader == "yes"
    result = kubectl.run("auth", "can-i", "get", "secrets", "-n", "team",
                         "--as=system:serviceaccount:team:reader", check=False)
    assert result.stdout.strip() == "no"


def test_impersonation_needs_the_impersonate_verb(team: Kubectl) -> None:
    result = team.run("get", "configmaps", "-n", "team", "--as=system:admin", check=False)
    assert result.returncode != 0
    assert ('users "system:admin" is forbidden: User "system:serviceaccount:team:reader" '
            'cannot impersonate resource "users" in API group "" at the cluster scope'
            ) in result.stderr


def test_create_token_gives_a_token_that_expires_and_dies_with_its_account(
        kubectl: Kubectl, tmp_path: Path) -> None:
    kubectl.run("create", "serviceaccount", "short", "-n", "team")
    token = kubectl.run("create", "token", "short", "-n", "team", "--duration=10m",
                        "--audience=https://kubernetes.default.svc.cluster.local"
                        ).stdout.strip()
    claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
    assert claims["exp"] - claims["iat"] == 600
    assert claims["sub"] == "system:serviceaccount:team:short"
    user = kubeconfig_with(kubectl, tmp_path / "short.yaml", {"token": token})
    assert "system:serviceaccount:team:short" in user.run("auth", "whoami").stdout
    too_short = kubectl.run("create", "token", "short", "-n", "team", "--duration=1m",
                            check=False)
    assert "may not specify a duration less than 10 minutes" in too_short.stderr
    kubectl.run("delete", "serviceaccount", "short", "-n", "team")
    eventually(lambda: user.run("auth", "whoami", check=False).returncode != 0)


def test_nobody_grants_what_they_do_not_hold(kubectl: Kubectl, tmp_path: Path) -> None:
    kubectl.run("create", "serviceaccount", "lead", "-n", "team")
    kubectl.run("create", "role", "role-admin", "-n", "team", "--verb=create,get,update",
                "--resource=roles.rbac.authorization.k8s.io,"
                "rolebindings.rbac.authorization.k8s.io")
    kubectl.run("create", "rolebinding", "lead-roles", "--role=role-admin",
                "--serviceaccount=team:lead", "-n", "team")
    kubectl.run("create", "rolebinding", "lead-view", "--clusterrole=view",
                "--serviceaccount=team:lead", "-n", "team")
    token = kubectl.run("create", "token", "lead", "-n", "team").stdout.strip()
    lead = kubeconfig_with(kubectl, tmp_path / "lead.yaml", {"token": token})
    # within what it holds: fine
    lead.run("create", "role", "cm-reader", "-n", "team", "--verb=get,list",
             "--resource=configmaps")
    escalating = lead.run("create", "role", "secret-reader", "-n", "team", "--verb=get",
                          "--resource=secrets", check=False)
    assert escalating.returncode != 0
    assert ('is attempting to grant RBAC permissions not currently held:\n{APIGroups:[""], '
            'Resources:["secrets"], Verbs:["get"]}') in escalating.stderr
    binding = lead.run("create", "rolebinding", "me-admin", "--clusterrole=admin",
                       "--serviceaccount=team:lead", "-n", "team", check=False)
    assert binding.returncode != 0
    assert "is attempting to grant RBAC permissions not currently held" in binding.stderr


def test_a_secret_is_found_nowhere_on_disk_and_files_are_private(
        kubectl: Kubectl, serve: ServeProcess) -> None:
    value = "correct-horse-battery-staple-4f1c"
    kubectl.run("create", "secret", "generic", "vault", f"--from-literal=password={value}",
                "-n", "default")
    got = kubectl.json("get", "secret", "vault", "-n", "default")
    assert base64.b64decode(got["data"]["password"]).decode() == value
    encoded = base64.b64encode(value.encode())
    for path in serve.data_dir.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert value.encode() not in data, path
            assert encoded not in data, path
    assert stat.S_IMODE(serve.data_dir.stat().st_mode) == 0o700
    for path in serve.data_dir.rglob("*"):
        mode = stat.S_IMODE(path.stat().st_mode)
        if path.is_dir():
            assert mode == 0o700, path
        elif path.name != "serve.log":  # the test's own log of the process output
            assert mode == 0o600, (path, oct(mode))


def test_a_cross_site_request_from_a_browser_is_refused(serve: ServeProcess,
                                                        kubectl: Kubectl) -> None:
    context = ssl.create_default_context(cadata=ca_of(kubectl))
    for content_type, body in (("text/plain", b'{"metadata":{"name":"evil"}}'),
                               ("application/x-www-form-urlencoded", b"a=b"),
                               ("application/json", b'{"metadata":{"name":"evil"}}')):
        request = urllib.request.Request(
            serve.url + "/api/v1/namespaces/default/configmaps", data=body, method="POST",
            headers={"Content-Type": content_type, "Origin": "https://evil.example"})
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(request, context=context, timeout=10)
        with caught.value as answer:
            assert answer.code == 401
    assert kubectl.run("get", "configmap", "evil", check=False).returncode != 0


def test_the_kubeconfig_carries_a_client_certificate_and_is_private(kubectl: Kubectl) -> None:
    config = yaml.safe_load(kubectl.kubeconfig.read_text())
    user = config["users"][0]["user"]
    assert set(user) == {"client-certificate-data", "client-key-data"}
    assert config["clusters"][0]["cluster"]["server"].startswith("https://")
    assert stat.S_IMODE(os.stat(kubectl.kubeconfig).st_mode) == 0o600


def test_setpoint_kubeconfig_gives_an_operator_its_service_account(
        kubectl: Kubectl, team: Kubectl, tmp_path: Path) -> None:
    out = tmp_path / "operator.kubeconfig"
    result = subprocess.run(
        [sys.executable, "-m", "setpoint", "kubeconfig", "--service-account", "team/operator",
         "--create", "--duration", "30m", "--kubeconfig", str(kubectl.kubeconfig),
         "--output", str(out)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    operator = Kubectl(out, tmp_path / "cache", kubectl.env)
    assert "system:serviceaccount:team:operator" in operator.run("auth", "whoami").stdout
    assert operator.run("get", "configmaps", "-n", "team", check=False).returncode != 0
