"""certificates.k8s.io ClusterTrustBundles on a secured server: Kubernetes' validation (CA
certificates only, names tied to the signer, the signer immutable), ``attest`` on the signer
to publish for it (RBAC, a non-admin user both ways), the ``spec.signerName`` field selector,
kubectl's columns, and every hostile write a Kubernetes 4xx."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from setpoint.apimachinery import errors
from setpoint.client import Client, load_kubeconfig
from setpoint.pki import certs
from setpoint.server.server import Server
from setpoint.testing import waiting
from tests.integration.api.helpers import grant, secured_config, user_client

Obj = dict[str, Any]
CTB = ("certificates.k8s.io/v1beta1", "ClusterTrustBundle")
CTB_ALPHA = ("certificates.k8s.io/v1alpha1", "ClusterTrustBundle")
SIGNER = "example.com/widgets"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
NOW = dt.datetime.now(dt.UTC)
CA = certs.new_ca("widgets-ca", now=NOW)
OTHER_CA = certs.new_ca("other-ca", now=NOW)


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[Server]:
    async with Server(secured_config(tmp_path)) as srv:
        yield srv


def bundle(name: str, pem: bytes | str = CA.cert_pem, *, signer: str | None = SIGNER,
           version: str = CTB[0]) -> Obj:
    spec: Obj = {"trustBundle": pem if isinstance(pem, str) else pem.decode()}
    if signer is not None:
        spec["signerName"] = signer
    return {"apiVersion": version, "kind": "ClusterTrustBundle", "metadata": {"name": name},
            "spec": spec}


def invalid(*fragments: str) -> Any:
    return pytest.raises(errors.Invalid, match=".*".join(re.escape(f) for f in fragments))


CTB_RULES: list[Obj] = [{"apiGroups": ["certificates.k8s.io"],
                         "resources": ["clustertrustbundles"],
                         "verbs": ["create", "get", "list", "update", "patch"]}]


async def test_bundles_are_served_in_both_versions_and_selected_by_signer(
        server: Server, tmp_path: Path) -> None:
    async with Client(load_kubeconfig(tmp_path / "kubeconfig")) as admin:
        await admin.create(bundle("example.com:widgets:one"))
        await admin.create(bundle("example.com:widgets:two", OTHER_CA.cert_pem,
                                  version=CTB_ALPHA[0]))
        await admin.create(bundle("plain", OTHER_CA.cert_pem, signer=None))
        alpha = await admin.get(CTB_ALPHA, "example.com:widgets:one")
        assert alpha["apiVersion"] == CTB_ALPHA[0]
        assert alpha["spec"] == {"signerName": SIGNER, "trustBundle": CA.cert_pem.decode()}
        found = await admin.list(CTB, field_selector=f"spec.signerName={SIGNER}")
        assert sorted(o["metadata"]["name"] for o in found["items"]) == [
            "example.com:widgets:one", "example.com:widgets:two"]
        unsigned = await admin.list(CTB_ALPHA, field_selector="spec.signerName=")
        assert [o["metadata"]["name"] for o in unsigned["items"]] == ["plain"]
        with pytest.raises(errors.BadRequest, match=r"spec\.trustBundle"):
            await admin.list(CTB, field_selector="spec.trustBundle=x")
        table = await admin.request("GET", "/apis/certificates.k8s.io/v1alpha1/"
                                    "clustertrustbundles", accept=TABLE)
        assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "SignerName"]
        rows = {r["cells"][0]: r["cells"][1] for r in table["rows"]}
        assert rows == {"example.com:widgets:one": SIGNER, "example.com:widgets:two": SIGNER,
                        "plain": "<none>"}
        discovery = await admin.request("GET", "/apis/certificates.k8s.io")
        assert discovery["preferredVersion"]["version"] == "v1"
        assert {v["version"] for v in discovery["versions"]} >= {"v1", "v1beta1", "v1alpha1"}
        resources = await admin.request("GET", "/apis/certificates.k8s.io/v1beta1")
        entry = next(r for r in resources["resources"] if r["name"] == "clustertrustbundles")
        assert entry["namespaced"] is False
        assert entry["kind"] == "ClusterTrustBundle"


async def test_publishing_for_a_signer_needs_attest(server: Server, tmp_path: Path) -> None:
    async with Client(load_kubeconfig(tmp_path / "kubeconfig")) as admin, \
            user_client(server, tmp_path, "carol") as carol:
        await grant(admin, "carol", CTB_RULES)
        # a bundle without a signer needs only create
        await waiting.eventually(lambda: carol.create(bundle("mine", signer=None)),
                                 timeout=10, retry_on=(errors.Forbidden,))
        with pytest.raises(errors.Forbidden, match=re.escape(
                'clustertrustbundles.certificates.k8s.io "example.com:widgets:a" is '
                'forbidden: user not permitted to attest for signerName '
                '"example.com/widgets"')):
            await carol.create(bundle("example.com:widgets:a"))
        # attest on <domain>/* covers every signer of the domain
        await grant(admin, "carol", [{"apiGroups": ["certificates.k8s.io"],
                                      "resources": ["signers"], "verbs": ["attest"],
                                      "resourceNames": ["example.com/*"]}], name="attest")
        made = await waiting.eventually(lambda: carol.create(bundle("example.com:widgets:a")),
                                        timeout=10, retry_on=(errors.Forbidden,))
        # other domains stay forbidden
        with pytest.raises(errors.Forbidden, match="attest for signerName"):
            await carol.create(bundle("example.org:x:a", signer="example.org/x"))
        # changing only finalizers (owner references) of someone else's bundle needs no
        # attest, as the garbage collector does it
        admin_made = await admin.create(bundle("example.org:x:b", signer="example.org/x"))
        admin_made["metadata"]["finalizers"] = ["example.com/keep"]
        updated = await carol.update(admin_made)
        assert updated["metadata"]["finalizers"] == ["example.com/keep"]
        # any other change does: labels, the certificates
        updated["metadata"]["labels"] = {"a": "b"}
        with pytest.raises(errors.Forbidden, match="attest for signerName"):
            await carol.update(updated)
        updated["metadata"].pop("labels")
        updated["spec"]["trustBundle"] = OTHER_CA.cert_pem.decode()
        with pytest.raises(errors.Forbidden, match="attest for signerName"):
            await carol.update(updated)
        updated["metadata"]["finalizers"] = []
        updated["spec"]["trustBundle"] = CA.cert_pem.decode()
        await carol.update(updated)
        made["spec"]["trustBundle"] = OTHER_CA.cert_pem.decode()
        assert (await carol.update(made))["spec"]["trustBundle"] == OTHER_CA.cert_pem.decode()


KEY_PEM = certs.key_pem(certs.new_key()).decode()
LEAF = certs.issue(CA, common_name="leaf", usage="server", now=NOW, hosts=("a.example",))
CERT = CA.cert_pem.decode()
HEADERS = CERT.replace("-----BEGIN CERTIFICATE-----\n",
                       "-----BEGIN CERTIFICATE-----\nProc-Type: 4,ENCRYPTED\n\n")


@pytest.mark.parametrize(("name", "spec", "fragments"), [
    ("example.com:widgets:x", {"signerName": SIGNER},
     ("spec.trustBundle", "at least one trust anchor must be provided")),
    ("example.com:widgets:x", {"signerName": SIGNER, "trustBundle": "garbage"},
     ("spec.trustBundle", "at least one trust anchor must be provided")),
    ("example.com:widgets:x", {"signerName": SIGNER, "trustBundle": KEY_PEM},
     ("spec.trustBundle", "entry 0 has bad block type: PRIVATE KEY")),
    ("example.com:widgets:x", {"signerName": SIGNER, "trustBundle": CERT + KEY_PEM},
     ("entry 1 has bad block type")),
    ("example.com:widgets:x", {"signerName": SIGNER,
                               "trustBundle": LEAF.cert_pem.decode()},
     ("entry 0 does not have the CA bit set",)),
    ("example.com:widgets:x", {"signerName": SIGNER, "trustBundle": HEADERS},
     ("entry 0 has PEM block headers",)),
    ("example.com:widgets:x", {"signerName": SIGNER, "trustBundle": CERT + CERT},
     ("duplicate trust anchor (indices [0 1])",)),
    ("example.com:widgets:x", {"signerName": SIGNER, "trustBundle": CERT + "x" * (1 << 20)},
     ("spec.trustBundle", "may not be more than 1048576 bytes")),
    ("widgets", {"signerName": SIGNER, "trustBundle": CERT},
     ("metadata.name", "ClusterTrustBundle for signerName example.com/widgets must be named "
                       "with prefix example.com:widgets:")),
    ("a:b", {"trustBundle": CERT},
     ("metadata.name", 'ClusterTrustBundle without signer name must not have ":" in its '
                       "name")),
    ("nodots:x", {"signerName": "nodots", "trustBundle": CERT}, ("spec.signerName",)),
])
async def test_invalid_bundles_are_422(server: Server, tmp_path: Path, name: str, spec: Obj,
                                       fragments: tuple[str, ...]) -> None:
    async with Client(load_kubeconfig(tmp_path / "kubeconfig")) as admin:
        body = {"apiVersion": CTB[0], "kind": CTB[1], "metadata": {"name": name},
                "spec": spec}
        with invalid(*fragments):
            await admin.create(body)


async def test_the_signer_is_immutable_and_wrong_types_are_400(server: Server,
                                                               tmp_path: Path) -> None:
    async with Client(load_kubeconfig(tmp_path / "kubeconfig")) as admin:
        made = await admin.create(bundle("plain", signer=None))
        made["spec"]["signerName"] = SIGNER
        with invalid("spec.signerName", "field is immutable"):
            await admin.update(made)
        body = bundle("typed", signer=None)
        body["spec"]["trustBundle"] = 42
        with pytest.raises(errors.BadRequest):
            await admin.create(body)


async def test_generated_names_follow_the_signer_prefix(server: Server, tmp_path: Path) -> None:
    async with Client(load_kubeconfig(tmp_path / "kubeconfig")) as admin:
        body = bundle("", signer=SIGNER)
        body["metadata"] = {"generateName": "example.com:widgets:ca-"}
        made = await admin.create(body)
        assert made["metadata"]["name"].startswith("example.com:widgets:ca-")
        # as in Kubernetes, the part after the prefix is a DNS subdomain even in a prefix
        body["metadata"] = {"generateName": "example.com:widgets:"}
        with invalid("metadata.generateName", "RFC 1123 subdomain"):
            await admin.create(body)
        body["metadata"] = {"generateName": "widgets-"}
        with invalid("metadata.name", "must be named with prefix example.com:widgets:"):
            await admin.create(body)
