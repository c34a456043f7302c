"""The signing controller publishes one ClusterTrustBundle per signer it runs, holding the
cluster CA (the one in ``kube-root-ca.crt``), and keeps it: deleted, it is created again;
edited, it is written back."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from setpoint.controllers import csrsigning, trustbundles
from setpoint.pki import certs
from setpoint.testing import control_plane

Obj = dict[str, Any]
CTB = trustbundles.CTB
CONFIG_MAP = ("v1", "ConfigMap")
CONTROLLERS = ("csrsigning", "root-ca-cert-publisher", "namespace", "serviceaccount")


async def test_each_signer_publishes_the_cluster_ca_and_keeps_it(tmp_path: Path) -> None:
    async with control_plane(tmp_path, controllers=CONTROLLERS, secure=True) as cp:
        client = cp.client
        root = await cp.wait_for(CONFIG_MAP, "kube-root-ca.crt", namespace="default")
        ca_pem = root["data"]["ca.crt"]
        names = {trustbundles.bundle_name(s): s for s in csrsigning.SIGNERS}
        assert "setpoint.dev:serving:cluster-ca" in names
        for name, signer in names.items():
            bundle = await cp.wait_for(CTB, name)
            assert bundle["spec"] == {"signerName": signer, "trustBundle": ca_pem}
        found = await client.list(CTB, field_selector=f"spec.signerName={csrsigning.SERVING}")
        assert [o["metadata"]["name"] for o in found["items"]] == [
            "setpoint.dev:serving:cluster-ca"]

        # deleted: created again (a new uid)
        gone = await client.get(CTB, "setpoint.dev:serving:cluster-ca")
        await client.delete(CTB, "setpoint.dev:serving:cluster-ca")
        again = await cp.wait_for(CTB, "setpoint.dev:serving:cluster-ca",
                                  lambda o: o["metadata"]["uid"] != gone["metadata"]["uid"])
        assert again["spec"]["trustBundle"] == ca_pem

        # edited: written back, the labels someone added kept
        other = certs.new_ca("impostor", now=dt.datetime.now(dt.UTC)).cert_pem.decode()
        again["spec"]["trustBundle"] = other
        again["metadata"].setdefault("labels", {})["team"] = "a"
        edited = await client.update(again)
        restored = await cp.wait_for(
            CTB, "setpoint.dev:serving:cluster-ca",
            lambda o: o["metadata"]["resourceVersion"] != edited["metadata"]["resourceVersion"])
        assert restored["spec"]["trustBundle"] == ca_pem
        assert restored["metadata"]["labels"]["team"] == "a"
