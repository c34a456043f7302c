"""The BitcoinNetwork operator: a StatefulSet of peer-to-peer nodes, peered by the operator.

A ``BitcoinNetwork`` (``bitcoin.example.com/v1``) named ``demo`` with ``spec.nodes: 3`` and
``spec.version: v1`` becomes, in its namespace, all owned by it (controller references, so
the garbage collector deletes them with it):

- a ConfigMap ``demo-node-program`` holding ``node.py`` (the node program beside this file),
  unless ``spec.image`` names an image that carries the program itself (the Dockerfile
  beside this file builds one);
- a headless Service ``demo`` (the StatefulSet's ``serviceName``, port 8333 ``p2p``);
- a StatefulSet ``demo`` of ``spec.nodes`` pods ``demo-0``, ``demo-1``, ... each running
  ``python3 /opt/bitcoinnode/node.py --host $(POD_IP) --port 8333 --version VERSION``
  with a readiness probe on ``/healthz``. Changing ``spec.version`` changes the pod template:
  the StatefulSet replaces the pods one at a time (its rolling update).

The operator watches the pods (by the label ``bitcoin.example.com/network``) and, whenever
one becomes Ready (or goes, or moves to another address), brings every Ready node's peer list
to "every other Ready node" through the nodes' HTTP API (``PUT``/``DELETE /peers/NAME``),
reaching each node at its ``status.podIP`` and port 8333. The operator therefore has to run
where pod IPs are reachable: on setpoint, on the machine of the node agent (pods' addresses
are local to it: loopback addresses, or a bridge with namespaces); on another cluster, as a
pod in it. Status lists every node (Ready or not, its address, peer count, version and
chain height), ``readyNodes``, ``observedGeneration`` and a ``Ready`` condition that is true
once every node runs the wanted version, is Ready and lists all the others. Until then the
operator looks again every ``converge_every`` seconds (nothing in the cluster says when a
node's peer list changes), and every ``resync_every`` seconds afterwards, to repair a node
that restarted and forgot its peers.

Deleting the network runs the finalizer ``bitcoin.example.com/detach``: every reachable node
drops all its peers (``DELETE /peers``), so no node keeps talking to nodes being stopped;
then the finalizer goes and the garbage collector removes the StatefulSet, its pods (whose
processes the node agent stops), the Service and the ConfigMap.

The code uses only ``setpoint.runtime``, ``setpoint.client`` and aiohttp::

    setpoint run examples/bitcoinnetwork/operator.py --kubeconfig .setpoint/kubeconfig
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp

from setpoint.apimachinery import errors
from setpoint.runtime import (
    Condition,
    Context,
    Registry,
    Request,
    Result,
    set_condition,
    set_controller_reference,
    with_finalizer,
)

NETWORK = ("bitcoin.example.com/v1", "BitcoinNetwork")
STATEFULSET = ("apps/v1", "StatefulSet")
SERVICE = ("v1", "Service")
CONFIGMAP = ("v1", "ConfigMap")
POD = ("v1", "Pod")

NETWORK_LABEL = "bitcoin.example.com/network"
TEMPLATE_HASH = "bitcoin.example.com/template-hash"
FINALIZER = "bitcoin.example.com/detach"
PORT = 8333
PROGRAM_DIR = "/opt/bitcoinnode"
DEFAULT_IMAGE = "python:3.12-alpine"
MAX_ANSWER = 1024 * 1024  # a node's /status: peers are bounded by the node program
NODE_PROGRAM = (Path(__file__).parent / "node.py").read_text()


def program_name(network: str) -> str:
    return f"{network}-node-program"


def labels_of(network: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": "bitcoin-node", NETWORK_LABEL: network}


def pod_template(network: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    """The StatefulSet's pod template for ``spec``."""
    container: dict[str, Any] = {
        "name": "node",
        "image": spec.get("image") or DEFAULT_IMAGE,
        "command": ["python3", f"{PROGRAM_DIR}/node.py"],
        "args": ["--host", "$(POD_IP)", "--port", str(PORT), "--name", "$(POD_NAME)",
                 "--version", str(spec["version"])],
        "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                {"name": "POD_NAME",
                 "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        "ports": [{"name": "p2p", "containerPort": PORT}],
        "readinessProbe": {"httpGet": {"path": "/healthz", "port": PORT},
                           "periodSeconds": 1, "failureThreshold": 3},
    }
    pod_spec: dict[str, Any] = {"containers": [container], "terminationGracePeriodSeconds": 5}
    if not spec.get("image"):  # the stock image gets the program from the ConfigMap
        container["volumeMounts"] = [{"name": "program", "mountPath": PROGRAM_DIR,
                                      "readOnly": True}]
        pod_spec["volumes"] = [{"name": "program",
                                "configMap": {"name": program_name(network)}}]
    return {"metadata": {"labels": labels_of(network)}, "spec": pod_spec}


def template_hash(template: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:16]


def owned(network: Mapping[str, Any], obj: dict[str, Any]) -> dict[str, Any]:
    set_controller_reference(network, obj)
    return obj


def pods_to_network(pod: Mapping[str, Any]) -> Iterable[Request]:
    metadata = pod.get("metadata") or {}
    network = (metadata.get("labels") or {}).get(NETWORK_LABEL)
    if network:
        yield Request(metadata.get("namespace") or "", network)


def ordinal(name: str) -> int:
    tail = name.rpartition("-")[2]
    return int(tail) if tail.isdigit() else -1


def pod_ready(pod: Mapping[str, Any]) -> bool:
    status = pod.get("status") or {}
    return (not pod["metadata"].get("deletionTimestamp") and bool(status.get("podIP"))
            and any(c.get("type") == "Ready" and c.get("status") == "True"
                    for c in status.get("conditions") or ()))


def address_of(pod: Mapping[str, Any]) -> str:
    ip = str(pod["status"]["podIP"])
    return f"[{ip}]:{PORT}" if ":" in ip else f"{ip}:{PORT}"


class NodeAPI:
    """The nodes' HTTP API, with a short timeout: a node that does not answer is reported
    as unreachable and tried again at the next reconcile."""

    def __init__(self, session: aiohttp.ClientSession) -> None:
        self.session = session

    async def call(self, method: str, address: str, path: str,
                   body: Any = None) -> Any:
        """One call; the answer's JSON (at most ``MAX_ANSWER`` bytes read)."""
        async with self.session.request(method, f"http://{address}{path}",
                                        json=body) as response:
            raw = await response.content.read(MAX_ANSWER + 1)
            if response.status >= 400:
                raise aiohttp.ClientResponseError(
                    response.request_info, (), status=response.status,
                    message=raw[:200].decode(errors="replace"))
            if len(raw) > MAX_ANSWER:
                raise ValueError(f"the answer is over {MAX_ANSWER} bytes")
            return json.loads(raw)

    async def status(self, address: str) -> dict[str, Any] | None:
        try:
            answer = await self.call("GET", address, "/status")
        except (aiohttp.ClientError, OSError, TimeoutError, ValueError):
            return None
        if not isinstance(answer, dict):
            return None
        peers = answer.get("peers")
        height = answer.get("height")
        return {"peers": {str(k): str(v) for k, v in peers.items()}
                if isinstance(peers, dict) else {},
                "version": str(answer.get("version", ""))[:64],
                "height": height if isinstance(height, int) and height >= 0 else 0}


async def peer_node(api: NodeAPI, name: str, address: str,
                    wanted: dict[str, str]) -> tuple[dict[str, Any] | None, list[str]]:
    """Bring one node's peer list to ``wanted``; its status after, and the peers added."""
    status = await api.status(address)
    if status is None:
        return None, []
    have = status.get("peers") or {}
    added: list[str] = []
    try:
        for peer, peer_address in sorted(wanted.items()):
            if have.get(peer) != peer_address:
                await api.call("PUT", address, f"/peers/{peer}", {"address": peer_address})
                added.append(peer)
        for peer in sorted(set(have) - set(wanted)):
            try:
                await api.call("DELETE", address, f"/peers/{peer}")
            except aiohttp.ClientResponseError as e:
                if e.status != 404:
                    raise
    except (aiohttp.ClientError, OSError, TimeoutError, ValueError):
        pass  # reported with the status read below; tried again at the next reconcile
    return await api.status(address), added


def build(*, converge_every: float = 1.0, resync_every: float = 30.0,
          http_timeout: float = 3.0) -> Registry:
    """The controller: look again every ``converge_every`` seconds until the network is
    Ready, every ``resync_every`` seconds after."""
    registry = Registry()

    @registry.controller(for_=NETWORK, owns=[STATEFULSET, SERVICE, CONFIGMAP],
                         watches=[(POD, pods_to_network)])
    async def reconcile(request: Request, ctx: Context) -> Result:
        network = ctx.get(request)
        if network is None:
            return Result.done()  # the garbage collector follows the owner references
        timeout = aiohttp.ClientTimeout(total=http_timeout)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            api = NodeAPI(session)

            async def apply(obj: Mapping[str, Any]) -> Result:
                await ensure_children(ctx, obj)
                converged = await peer_and_report(ctx, api, obj)
                return Result.after(resync_every if converged else converge_every)

            async def cleanup(obj: Mapping[str, Any]) -> None:
                detached = []
                for pod in ready_pods(ctx, request):
                    try:
                        await api.call("DELETE", address_of(pod), "/peers")
                        detached.append(pod["metadata"]["name"])
                    except (aiohttp.ClientError, OSError, TimeoutError, ValueError):
                        pass  # a node that does not answer is being stopped anyway
                await ctx.recorder.normal(obj, "Detached", "peer lists emptied on "
                                          f"{len(detached)} node(s): {', '.join(detached)}")

            return await with_finalizer(network, FINALIZER, ctx.client, apply=apply,
                                        cleanup=cleanup)

    return registry


def ready_pods(ctx: Context, request: Request) -> list[Mapping[str, Any]]:
    return [p for p in network_pods(ctx, request) if pod_ready(p)]


def network_pods(ctx: Context, request: Request) -> list[Mapping[str, Any]]:
    pods = ctx.cache_for(POD).by_index("namespace", request.namespace)
    return sorted((p for p in pods
                   if (p["metadata"].get("labels") or {}).get(NETWORK_LABEL) == request.name),
                  key=lambda p: ordinal(p["metadata"]["name"]))


async def ensure(ctx: Context, network: Mapping[str, Any], resource: tuple[str, str],
                 wanted: dict[str, Any], differs: Any) -> None:
    """Create ``wanted`` if missing; patch it with ``differs(current)`` when that returns
    a patch."""
    metadata = wanted["metadata"]
    current = ctx.cache_for(resource).get(f"{metadata['namespace']}/{metadata['name']}")
    if current is None:
        try:
            await ctx.client.create(owned(network, wanted))
        except errors.AlreadyExists:
            return  # the cache is behind; the watch brings it and reconciles again
        await ctx.recorder.normal(network, "Created", f"created {resource[1]} "
                                  f"{metadata['name']}")
        return
    patch = differs(current)
    if patch:
        await ctx.client.patch(resource, metadata["name"], patch,
                               namespace=metadata["namespace"])
        await ctx.recorder.normal(network, "Updated", f"updated {resource[1]} "
                                  f"{metadata['name']}")


async def ensure_children(ctx: Context, network: Mapping[str, Any]) -> None:
    meta, spec = network["metadata"], network["spec"]
    name, namespace = meta["name"], meta["namespace"]
    labels = labels_of(name)
    if not spec.get("image"):
        await ensure(ctx, network, CONFIGMAP, {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": program_name(name), "namespace": namespace,
                         "labels": labels},
            "data": {"node.py": NODE_PROGRAM}},
            lambda cm: None if (cm.get("data") or {}).get("node.py") == NODE_PROGRAM
            else {"data": {"node.py": NODE_PROGRAM}})
    await ensure(ctx, network, SERVICE, {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"clusterIP": "None", "selector": labels, "publishNotReadyAddresses": True,
                 "ports": [{"name": "p2p", "port": PORT, "targetPort": PORT}]}},
        lambda _svc: None)
    template = pod_template(name, spec)
    digest = template_hash(template)
    replicas = int(spec["nodes"])
    annotations = {TEMPLATE_HASH: digest}

    def sts_patch(sts: Mapping[str, Any]) -> dict[str, Any] | None:
        patch: dict[str, Any] = {}
        if (sts.get("spec") or {}).get("replicas") != replicas:
            patch["spec"] = {"replicas": replicas}
        if (sts["metadata"].get("annotations") or {}).get(TEMPLATE_HASH) != digest:
            # a merge patch: fields the new template drops must be nulled to go
            replacement = {**template, "spec": {"volumes": None, **template["spec"]}}
            patch.setdefault("spec", {})["template"] = replacement
            patch["metadata"] = {"annotations": annotations}
        return patch or None

    await ensure(ctx, network, STATEFULSET, {
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": namespace, "labels": labels,
                     "annotations": annotations},
        "spec": {"serviceName": name, "replicas": replicas,
                 "podManagementPolicy": "Parallel",
                 "updateStrategy": {"type": "RollingUpdate"},
                 "selector": {"matchLabels": labels}, "template": template}},
        sts_patch)


async def peer_and_report(ctx: Context, api: NodeAPI, network: Mapping[str, Any]) -> bool:
    """Peer every Ready node with every other one, write the status; whether the network
    is Ready."""
    meta, spec = network["metadata"], network["spec"]
    request = Request(meta["namespace"], meta["name"])
    pods = network_pods(ctx, request)
    ready = {p["metadata"]["name"]: address_of(p) for p in pods if pod_ready(p)}
    results = await asyncio.gather(*(
        peer_node(api, name, address, {n: a for n, a in ready.items() if n != name})
        for name, address in ready.items()))
    seen = dict(zip(ready, results, strict=True))
    joined = sorted({peer for _status, added in results for peer in added})
    if joined:
        await ctx.recorder.normal(network, "Peered",
                                  f"added {', '.join(joined)} to the other nodes' peer lists")
    nodes = []
    for pod in pods:
        name = pod["metadata"]["name"]
        node_status = seen.get(name, (None, []))[0]
        entry: dict[str, Any] = {"name": name, "ready": name in ready
                                 and node_status is not None}
        if name in ready:
            entry["address"] = ready[name]
        if node_status is not None:
            entry["peers"] = len(node_status["peers"])
            entry["version"] = node_status["version"]
            entry["height"] = node_status["height"]
        nodes.append(entry)
    wanted = int(spec["nodes"])
    ready_nodes = sum(1 for n in nodes if n["ready"])
    if ready_nodes < wanted or len(nodes) != wanted:
        condition = Condition(type="Ready", status=False, reason="NodesNotReady",
                              message=f"{ready_nodes} of {wanted} nodes ready")
    elif any(n.get("version") != spec["version"] for n in nodes):
        condition = Condition(type="Ready", status=False, reason="Updating",
                              message=f"not every node runs {spec['version']} yet")
    elif any(n.get("peers") != wanted - 1 for n in nodes):
        condition = Condition(type="Ready", status=False, reason="Peering",
                              message="not every node lists all the others yet")
    else:
        condition = Condition(type="Ready", status=True, reason="NetworkReady",
                              message=f"{wanted} nodes, each peered with all the others")
    condition = dataclasses.replace(condition, observed_generation=meta.get("generation"))
    await write_status(ctx, network, {"nodes": nodes, "readyNodes": ready_nodes,
                                      "observedGeneration": meta.get("generation")}, condition)
    return condition.status == "True"  # Condition keeps the status as Kubernetes' string


async def write_status(ctx: Context, network: Mapping[str, Any], fields: dict[str, Any],
                       condition: Condition) -> None:
    status = network.get("status") or {}
    wanted = {**fields, "conditions": set_condition(status.get("conditions") or [],
                                                    condition, now=datetime.now(UTC))}
    if any(status.get(k) != v for k, v in wanted.items()):
        meta = network["metadata"]
        try:
            await ctx.client.patch_status(NETWORK, meta["name"], {"status": wanted},
                                          namespace=meta["namespace"])
        except errors.NotFound:
            pass  # deleted meanwhile


registry = build()
