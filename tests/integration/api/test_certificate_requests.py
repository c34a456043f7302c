"""certificates.k8s.io/v1 CertificateSigningRequests on a secured server: who asked is the
server's to say, approval and signing need ``approve``/``sign`` on the signer (RBAC, a
non-admin user both ways), and every hostile write is a Kubernetes 4xx."""

from __future__ import annotations

import base64
import copy
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from setpoint.apimachinery import errors
from setpoint.client import Client, PatchType, load_kubeconfig
from setpoint.pki import csr as pkicsr
from setpoint.server.server import Server
from setpoint.testing import waiting
from tests.integration.api.helpers import grant, secured_config, user_client

Obj = dict[str, Any]
CSR = ("certificates.k8s.io/v1", "CertificateSigningRequest")
SIGNER = "example.com/widgets"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[Server]:
    async with Server(secured_config(tmp_path)) as srv:
        yield srv


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def request_pem(cn: str = "widget", hosts: tuple[str, ...] = ("widget.example",)) -> bytes:
    return pkicsr.new_request(cn, hosts)[0]


def csr(name: str, *, signer: str = SIGNER, usages: tuple[str, ...] = ("server auth",),
        request: bytes | None = None, **spec: Any) -> Obj:
    return {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
            "metadata": {"name": name},
            "spec": {"request": b64(request if request is not None else request_pem()),
                     "signerName": signer, "usages": list(usages), **spec}}


def approved(obj: Obj, kind: str = "Approved") -> Obj:
    out = copy.deepcopy(obj)
    out.setdefault("status", {}).setdefault("conditions", []).append(
        {"type": kind, "status": "True", "reason": "Test", "message": "by the test"})
    return out


def invalid(*fragments: str) -> Any:
    return pytest.raises(errors.Invalid, match=".*".join(re.escape(f) for f in fragments))


def forbidden(message: str) -> Any:
    return pytest.raises(errors.Forbidden, match=re.escape(message))


CSR_RULES = [{"apiGroups": ["certificates.k8s.io"], "resources": [
    "certificatesigningrequests", "certificatesigningrequests/approval",
    "certificatesigningrequests/status"], "verbs": ["create", "get", "list", "update",
                                                    "patch"]}]


async def test_the_server_records_who_asks_and_keeps_spec_and_status(
        server: Server, tmp_path: Path) -> None:
    async with Client(load_kubeconfig(tmp_path / "kubeconfig")) as admin, \
            user_client(server, tmp_path, "alice") as alice:
        await grant(admin, "alice", CSR_RULES)
        body = csr("mine", username="system:admin", groups=["system:masters"],
                   extra={"scopes": ["all"]}, expirationSeconds=3600)
        body["status"] = {"conditions": [{"type": "Approved", "status": "True"}]}
        made = await waiting.eventually(lambda: alice.create(body), timeout=10,
                                        retry_on=(errors.Forbidden,))
        spec = made["spec"]
        assert spec["username"] == "alice"
        assert spec["groups"] == ["system:authenticated"]
        assert "extra" not in spec
        assert made["status"] == {}  # nobody creates an approved request
        # an update of the object changes neither spec nor status
        changed = copy.deepcopy(made)
        changed["spec"]["signerName"] = "example.com/other"
        changed["spec"]["username"] = "system:admin"
        changed["metadata"]["labels"] = {"a": "b"}
        changed = approved(changed)
        updated = await alice.update(changed)
        assert updated["spec"] == spec
        assert updated["status"] == {}
        assert updated["metadata"]["labels"] == {"a": "b"}
        # the table kubectl prints
        table = await admin.request("GET", "/apis/certificates.k8s.io/v1/"
                                    "certificatesigningrequests", accept=TABLE)
        names = [c["name"] for c in table["columnDefinitions"]]
        assert names == ["Name", "Age", "SignerName", "Requestor", "RequestedDuration",
                         "Condition"]
        row = table["rows"][0]["cells"]
        assert row[0] == "mine"
        assert row[2:] == [SIGNER, "alice", "60m", "Pending"]


async def test_approval_and_signing_need_the_signer_verbs(server: Server,
                                                          tmp_path: Path) -> None:
    async with Client(load_kubeconfig(tmp_path / "kubeconfig")) as admin, \
            user_client(server, tmp_path, "bob") as bob:
        await grant(admin, "bob", CSR_RULES)
        made = await waiting.eventually(lambda: bob.create(csr("req")), timeout=10,
                                        retry_on=(errors.Forbidden,))
        with forbidden('certificatesigningrequests.certificates.k8s.io "req" is forbidden: '
                       f'user not permitted to approve requests with signerName "{SIGNER}"'):
            await bob.update(approved(made), subresource="approval")
        # a certificate without approval is refused, by anyone
        assert server.secured is not None
        assert server.secured.authority is not None
        cert = server.secured.authority.ca.cert_pem.decode()
        issued = copy.deepcopy(made)
        issued["status"] = {"certificate": b64(cert.encode())}
        with invalid("status.certificate: Forbidden: certificate may only be set on an "
                     "approved request"):
            await admin.update_status(issued)
        # approve through a wildcard on the signer's domain
        await grant(admin, "bob", [{"apiGroups": ["certificates.k8s.io"],
                                    "resources": ["signers"], "verbs": ["approve"],
                                    "resourceNames": ["example.com/*"]}], name="approver")
        ok = await waiting.eventually(
            lambda: bob.update(approved(made), subresource="approval"), timeout=10,
            retry_on=(errors.Forbidden,))
        condition = ok["status"]["conditions"][0]
        assert condition["type"] == "Approved"
        assert condition["lastUpdateTime"]
        # approved once: not again, never denied too, never removed
        with invalid("status.conditions[1].type: Duplicate value"):
            await bob.update(approved(ok), subresource="approval")
        with invalid("Approved and Denied conditions are mutually exclusive"):
            await bob.update(approved(ok, "Denied"), subresource="approval")
        cleared = copy.deepcopy(ok)
        cleared["status"]["conditions"] = []
        with invalid('updates may not remove a condition of type "Approved"'):
            await bob.update(cleared, subresource="approval")
        # through /status the approval cannot change
        with invalid('updates may not add a condition of type "Denied"'):
            await admin.update_status(approved(ok, "Denied"))
        # signing needs ``sign``
        issued = copy.deepcopy(ok)
        issued["status"]["certificate"] = b64(cert.encode())
        with forbidden(f'user not permitted to sign requests with signerName "{SIGNER}"'):
            await bob.update_status(issued)
        signed = await admin.update_status(issued)
        assert signed["status"]["certificate"] == b64(cert.encode())
        other = copy.deepcopy(signed)
        other["status"]["certificate"] = b64(cert.encode() + cert.encode())
        with invalid("status.certificate: Forbidden: updates may not modify existing "
                     "certificate content"):
            await admin.update_status(other)
        # the approval path cannot write a certificate either
        again = await admin.get(CSR, "req")
        again["status"]["certificate"] = ""
        kept = await admin.update(again, subresource="approval")
        assert kept["status"]["certificate"] == b64(cert.encode())


@pytest.mark.parametrize(("spec", "fragments"), [
    ({"request": b64(b"garbage")},
     ("spec.request: Invalid value: PEM block type must be CERTIFICATE REQUEST",)),
    ({"request": b64(b"-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n"
                     b"-----END CERTIFICATE REQUEST-----\n")},
     ("spec.request: Invalid value: x509: malformed certificate request",)),
    ({"request": b64(b"x" * (pkicsr.MAX_REQUEST_BYTES + 1))},
     ("spec.request: Invalid value: must be at most 65536 bytes",)),
    ({"signerName": ""}, ("spec.signerName: Required value",)),
    ({"signerName": "nodomain"}, ("spec.signerName: Invalid value: \"nodomain\": must be a "
                                  "fully qualified domain and path",)),
    ({"signerName": "example/x"}, ("should be a domain with at least two segments",)),
    ({"signerName": "kubernetes.io/legacy-unknown"},
     ("the legacy signerName is not allowed via this API version",)),
    ({"expirationSeconds": 599}, ("spec.expirationSeconds: Invalid value: 599: may not "
                                  "specify a duration less than 600 seconds",)),
    ({"usages": []}, ("spec.usages: Required value",)),
    ({"usages": ["server auth", "teleport"]},
     ('spec.usages[1]: Unsupported value: "teleport"',)),
    ({"usages": ["server auth", "server auth"]},
     ('spec.usages[1]: Duplicate value: "server auth"',)),
])
async def test_invalid_requests_are_422(server: Server, tmp_path: Path, spec: Obj,
                                        fragments: tuple[str, ...]) -> None:
    async with Client(load_kubeconfig(tmp_path / "kubeconfig")) as admin:
        body = csr("bad")
        body["spec"].update(spec)
        with invalid(*fragments):
            await admin.create(body)


async def test_a_tampered_request_and_undecodable_bytes(server: Server,
                                                        tmp_path: Path) -> None:
    pem = request_pem()
    der = bytearray(base64.b64decode(b"".join(pem.splitlines()[1:-1])))
    der[-5] ^= 0xFF  # inside the signature
    tampered = (b"-----BEGIN CERTIFICATE REQUEST-----\n" + base64.encodebytes(bytes(der))
                + b"-----END CERTIFICATE REQUEST-----\n")
    async with Client(load_kubeconfig(tmp_path / "kubeconfig")) as admin:
        with pytest.raises(errors.Invalid, match=r"spec\.request: Invalid value: "):
            await admin.create(csr("tampered", request=tampered))
        body = csr("notbase64")
        body["spec"]["request"] = "%%% not base64 %%%"
        with pytest.raises(errors.BadRequest):
            await admin.create(body)
        # a certificate that is not PEM CERTIFICATE blocks
        made = approved(await admin.create(csr("ok")))
        approved_now = await admin.update(made, subresource="approval")
        approved_now["status"]["certificate"] = b64(pem)
        with invalid("status.certificate: Invalid value: \"<certificate data>\": only "
                     "CERTIFICATE PEM blocks are allowed, found \"CERTIFICATE REQUEST\""):
            await admin.update_status(approved_now)


async def test_approval_by_strategic_merge_patch_and_dry_run(server: Server,
                                                             tmp_path: Path) -> None:
    async with Client(load_kubeconfig(tmp_path / "kubeconfig")) as admin:
        await admin.create(csr("patched"))
        condition = {"type": "Approved", "status": "True", "reason": "Patch"}
        dry = await admin.patch(CSR, "patched", {"status": {"conditions": [condition]}},
                                subresource="approval", dry_run=True,
                                patch_type=PatchType.STRATEGIC)
        assert dry["status"]["conditions"][0]["type"] == "Approved"
        assert (await admin.get(CSR, "patched"))["status"] == {}
        done = await admin.patch(CSR, "patched", {"status": {"conditions": [condition]}},
                                 subresource="approval", patch_type=PatchType.STRATEGIC)
        assert [c["type"] for c in done["status"]["conditions"]] == ["Approved"]
        # a patch through the object itself changes neither approval nor spec
        kept = await admin.patch(CSR, "patched", {"spec": {"signerName": "example.com/x"},
                                                  "status": {"conditions": []}})
        assert kept["spec"]["signerName"] == SIGNER
        assert [c["type"] for c in kept["status"]["conditions"]] == ["Approved"]
