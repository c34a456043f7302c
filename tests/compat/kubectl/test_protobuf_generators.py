"""kubectl's generators send built-in kinds as protobuf: every one whose kind the server serves
creates what kubectl meant.

``kubectl create <generator> ... --dry-run=client -o json`` prints the object kubectl builds;
the real create sends the same object as ``application/vnd.kubernetes.protobuf`` (kubectl does
not fall back to JSON), and the stored object must hold every field of the printed one. A
generator of a kind this server does not serve is skipped, by what discovery says (its
decoding is covered by the unit tests of ``setpoint.apimachinery.protobuf``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.compat.conftest import Kubectl

pytestmark = pytest.mark.compat

NS = "generated"


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("files")
    (root / "settings.properties").write_text("key1=value1\nkey2: two\n")
    (root / "blob.bin").write_bytes(b"\x00\x01\x02\xff")
    (root / "app.env").write_text("# comment\nKEY_1=value1\nKEY_2=two words\n")
    if shutil.which("openssl"):
        subprocess.run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout",
                        "-out", str(root / "tls.key")], check=True, capture_output=True)
        subprocess.run(["openssl", "req", "-new", "-x509", "-key", str(root / "tls.key"),
                        "-out", str(root / "tls.crt"), "-days", "30", "-subj",
                        "/CN=example.com"], check=True, capture_output=True)
    return root


@pytest.fixture(scope="module")
def served(kubectl: Kubectl) -> Iterator[set[str]]:
    kubectl.run("create", "namespace", NS)
    names = kubectl.run("api-resources", "-o", "name").stdout.split()
    yield set(names)
    kubectl.run("delete", "namespace", NS, "--wait=false", check=False)


# (id, resource as api-resources names it, arguments after "kubectl", namespaced)
GENERATORS: list[tuple[str, str, list[str], bool]] = [
    ("configmap-literal", "configmaps",
     ["create", "configmap", "literal", "--from-literal=a=b", "--from-literal=empty="], True),
    ("configmap-from-file", "configmaps",
     ["create", "configmap", "files", "--from-file={files}/settings.properties",
      "--from-file=blob={files}/blob.bin"], True),
    ("configmap-from-env-file", "configmaps",
     ["create", "configmap", "envs", "--from-env-file={files}/app.env"], True),
    ("secret-generic", "secrets",
     ["create", "secret", "generic", "creds", "--from-literal=password=s3cret",
      "--from-file=blob={files}/blob.bin", "--type=example.com/custom"], True),
    ("secret-tls", "secrets",
     ["create", "secret", "tls", "cert", "--cert={files}/tls.crt", "--key={files}/tls.key"],
     True),
    ("secret-docker-registry", "secrets",
     ["create", "secret", "docker-registry", "pull", "--docker-server=registry.example.com",
      "--docker-username=u", "--docker-password=p", "--docker-email=u@example.com"], True),
    ("serviceaccount", "serviceaccounts", ["create", "serviceaccount", "robot"], True),
    ("role", "roles.rbac.authorization.k8s.io",
     ["create", "role", "reader", "--verb=get,list,watch", "--resource=configmaps,secrets",
      "--resource-name=one"], True),
    ("clusterrole", "clusterroles.rbac.authorization.k8s.io",
     ["create", "clusterrole", "generated-reader", "--verb=get", "--resource=configmaps",
      "--non-resource-url=/healthz"], False),
    ("clusterrole-aggregated", "clusterroles.rbac.authorization.k8s.io",
     ["create", "clusterrole", "generated-monitoring",
      "--aggregation-rule=rbac.example.com/aggregate-to-monitoring=true"], False),
    ("rolebinding", "rolebindings.rbac.authorization.k8s.io",
     ["create", "rolebinding", "readers", "--role=reader", "--user=alice", "--group=devs",
      f"--serviceaccount={NS}:robot"], True),
    ("clusterrolebinding", "clusterrolebindings.rbac.authorization.k8s.io",
     ["create", "clusterrolebinding", "generated-readers", "--clusterrole=generated-reader",
      "--user=bob"], False),
    ("priorityclass", "priorityclasses.scheduling.k8s.io",
     ["create", "priorityclass", "generated-high", "--value=1000", "--description=important",
      "--preemption-policy=Never"], False),
    ("quota", "resourcequotas",
     ["create", "quota", "small", "--hard=cpu=1,memory=1Gi,pods=2"], True),
    ("poddisruptionbudget", "poddisruptionbudgets.policy",
     ["create", "poddisruptionbudget", "pdb", "--selector=app=web", "--max-unavailable=50%"],
     True),
    ("deployment", "deployments.apps",
     ["create", "deployment", "web", "--image=nginx:1.27", "--replicas=2", "--port=80"], True),
    ("service", "services",
     ["create", "service", "clusterip", "web", "--tcp=80:8080"], True),
    ("ingress", "ingresses.networking.k8s.io",
     ["create", "ingress", "web", "--class=nginx", "--rule=foo.com/bar*=web:8080"], True),
]


def expected(kubectl: Kubectl, args: list[str]) -> dict[str, Any]:
    result = kubectl.run(*args, "--dry-run=client", "-o", "json")
    return dict(json.loads(result.stdout))


def missing(stored: Any, wanted: Any, path: str = "") -> list[str]:
    """Where ``stored`` lacks a member of ``wanted`` or holds another value (nulls, which Go
    prints for unset pointers and the zero time, are not members)."""
    if isinstance(wanted, dict):
        if not isinstance(stored, dict):
            return [f"{path}: {stored!r} is not an object"]
        problems = []
        for key, value in wanted.items():
            if value is None:
                continue
            if key not in stored:
                problems.append(f"{path}.{key} is missing")
            else:
                problems += missing(stored[key], value, f"{path}.{key}")
        return problems
    if isinstance(wanted, list):
        if not isinstance(stored, list) or len(stored) != len(wanted):
            return [f"{path}: {stored!r} != {wanted!r}"]
        return [p for i, (s, w) in enumerate(zip(stored, wanted, strict=True))
                for p in missing(s, w, f"{path}[{i}]")]
    return [] if stored == wanted else [f"{path}: {stored!r} != {wanted!r}"]


@pytest.mark.parametrize(("resource", "args", "namespaced"), [g[1:] for g in GENERATORS],
                         ids=[g[0] for g in GENERATORS])
def test_a_generator_creates_what_kubectl_meant(kubectl: Kubectl, served: set[str],
                                                files: Path, resource: str, args: list[str],
                                                namespaced: bool) -> None:
    if resource not in served:
        pytest.skip(f"{resource} is not served")
    args = [a.replace("{files}", str(files)) for a in args]
    if any("tls." in a for a in args) and not (files / "tls.crt").exists():
        pytest.skip("openssl is needed to make a certificate")
    if namespaced:
        args += ["-n", NS]
    wanted = expected(kubectl, args)
    kubectl.run(*args)  # protobuf, as kubectl sends it
    name = wanted["metadata"]["name"]
    stored = kubectl.json("get", resource, name, "--show-managed-fields",
                          *(["-n", NS] if namespaced else []))
    wanted["metadata"] = {k: v for k, v in wanted["metadata"].items()
                          if k in ("name", "labels", "annotations")}
    wanted.pop("status", None)  # the server owns status
    assert missing(stored, wanted) == []
    if resource == "serviceaccounts":
        # nothing but a name, which field management does not track: as in Kubernetes, an
        # empty set of fields leaves no manager entry
        assert "managedFields" not in stored["metadata"]
    else:
        assert stored["metadata"]["managedFields"][0]["manager"] == "kubectl-create"

