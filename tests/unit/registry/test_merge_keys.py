"""The strategic-merge keys the registry applies are the ones Kubernetes publishes for the
same kinds (kubectl computes its patches from the published ones)."""

from __future__ import annotations

from typing import Any

import pytest

from setpoint.registry import deployments, endpointslices, nodes, pods, replicasets, services
from setpoint.server.openapi.builtins import Definitions

KINDS = {
    "io.k8s.api.core.v1.Pod": pods.PodStrategy,
    "io.k8s.api.core.v1.Node": nodes.NodeStrategy,
    "io.k8s.api.core.v1.Service": services.ServiceStrategy,
    "io.k8s.api.core.v1.Endpoints": services.EndpointsStrategy,
    "io.k8s.api.discovery.v1.EndpointSlice": endpointslices.EndpointSliceStrategy,
    "io.k8s.api.apps.v1.ReplicaSet": replicasets.ReplicaSetStrategy,
    "io.k8s.api.apps.v1.Deployment": deployments.DeploymentStrategy,
}


def _published(defs: Any, name: str, path: str, seen: frozenset[str],
               out: dict[str, str]) -> None:
    if name in seen:
        return
    for prop, schema in (defs[name].get("properties") or {}).items():
        where = f"{path}.{prop}" if path else prop
        if "merge" in (schema.get("x-kubernetes-patch-strategy") or "").split(","):
            out[where] = schema.get("x-kubernetes-patch-merge-key", "")
        ref = schema.get("$ref") or (schema.get("items") or {}).get("$ref") or \
            (schema.get("additionalProperties") or {}).get("$ref")
        if ref:
            _published(defs, ref.rsplit("/", 1)[-1], where, seen | {name}, out)


@pytest.mark.parametrize("definition", sorted(KINDS))
def test_merge_keys_match_the_published_ones(definition: str) -> None:
    defs = Definitions.load().definitions
    published: dict[str, str] = {}
    _published(defs, definition, "", frozenset(), published)
    # metadata's lists are the store's own, and ephemeral volume claim templates are a
    # PersistentVolumeClaim's metadata
    wanted = {k: v for k, v in published.items()
              if not k.startswith("metadata.") and ".metadata." not in k}
    assert dict(KINDS[definition].merge_keys) == wanted
