"""What a Service's endpoints are, from the pods it selects: Endpoints and EndpointSlices.

Pure functions over API dicts; the controllers (:mod:`setpoint.controllers.endpointcontrollers`)
feed them the Service and the pods of its namespace and write what they return.

Which pods count (Kubernetes' ``ShouldPodBeInEndpoints``): those the Service's
``spec.selector`` selects (a Service without a selector, or with an empty one, is not
managed: its Endpoints are whatever its owner writes), that have a ``status.podIP`` and are
not ``Succeeded``/``Failed``. A pod being deleted is left out of Endpoints and appears in
EndpointSlices as ``terminating`` (not ready). A pod is *ready* when its ``Ready``
condition is ``True``, or always when the Service has ``publishNotReadyAddresses``.

Ports: each Service port's ``targetPort`` is resolved per pod (Kubernetes' ``FindPort``): a
number is taken as is; a name is looked up among the pod's containers' ports of the same
protocol, and a pod without it has no endpoint for that port. Pods are grouped by the ports
they resolve to.

**Endpoints** (:func:`endpoints_for`): one object named as the Service, with the Service's
labels (and ``service.kubernetes.io/headless`` for a headless Service), subsets grouping
addresses with identical ports, ``addresses`` (ready) and ``notReadyAddresses``, each with
``ip``, ``nodeName``, ``targetRef`` and, when the pod's ``subdomain`` is the Service's name,
``hostname``. At most :data:`MAX_ENDPOINTS_ADDRESSES` addresses (ready ones first); beyond,
the object is annotated ``endpoints.kubernetes.io/over-capacity: truncated``.

**EndpointSlices** (:func:`plan_slices`): slices of at most ``max_per_slice`` (100)
endpoints, one address family and one port list each, labelled
``kubernetes.io/service-name`` and ``endpointslice.kubernetes.io/managed-by:
endpointslice-controller.k8s.io``, owned by the Service. Each endpoint has
``conditions.ready``/``serving``/``terminating``, ``nodeName``, ``targetRef``, ``hostname``.
A Service that selects no pod still gets one empty slice (Kubernetes' placeholder).

Invariants: the output depends only on the input (pods are ordered by IP, then name), so a
reconcile that changes nothing writes nothing; an endpoint stays in the slice it is in while
that slice keeps its port list and room (little churn as pods come and go).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from setpoint.controllers.taints import items

Obj = Mapping[str, Any]

SERVICE_NAME_LABEL: Final = "kubernetes.io/service-name"
MANAGED_BY_LABEL: Final = "endpointslice.kubernetes.io/managed-by"
MANAGED_BY: Final = "endpointslice-controller.k8s.io"
HEADLESS_LABEL: Final = "service.kubernetes.io/headless"
OVER_CAPACITY: Final = "endpoints.kubernetes.io/over-capacity"
#: Kubernetes truncates an Endpoints object to this many addresses
MAX_ENDPOINTS_ADDRESSES: Final = 1000
#: Kubernetes' --max-endpoints-per-slice default (and the API's limit is 1000)
DEFAULT_MAX_PER_SLICE: Final = 100
MAX_PER_SLICE_LIMIT: Final = 1000
#: labels of the Service that are not copied onto its slices
_RESERVED_LABELS: Final = frozenset({SERVICE_NAME_LABEL, MANAGED_BY_LABEL})


def _meta(obj: Obj) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _spec(obj: Obj) -> Mapping[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _status(obj: Obj) -> Mapping[str, Any]:
    status = obj.get("status")
    return status if isinstance(status, Mapping) else {}


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def selector(service: Obj) -> dict[str, str] | None:
    """The Service's selector, or None when the controllers leave it alone."""
    chosen = _spec(service).get("selector")
    if not isinstance(chosen, Mapping) or not chosen:
        return None
    return {str(k): _str(v) for k, v in chosen.items()}


def selects(chosen: Mapping[str, str], pod: Obj) -> bool:
    labels = _meta(pod).get("labels")
    if not isinstance(labels, Mapping):
        return False
    return all(labels.get(k) == v for k, v in chosen.items())


def pod_ready(pod: Obj) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in items(_status(pod).get("conditions")))


def eligible(pod: Obj) -> bool:
    """Has an IP and is not finished (terminating pods are eligible: see the docstring)."""
    return bool(_str(_status(pod).get("podIP"))) and _status(pod).get("phase") not in (
        "Succeeded", "Failed")


def terminating(pod: Obj) -> bool:
    return bool(_meta(pod).get("deletionTimestamp"))


def resolve_target_port(service_port: Obj, pod: Obj) -> int | None:
    """The pod's port for one Service port, or None when the pod has no such port."""
    target = service_port.get("targetPort")
    if target is None:
        target = service_port.get("port")
    if isinstance(target, bool):
        return None
    if isinstance(target, int):
        return target if 0 < target < 65536 else None
    if isinstance(target, str):
        if target.isdigit():
            number = int(target)
            return number if 0 < number < 65536 else None
        protocol = _str(service_port.get("protocol")) or "TCP"
        for container in items(_spec(pod).get("containers")):
            for port in items(container.get("ports")):
                if port.get("name") == target and (
                        _str(port.get("protocol")) or "TCP") == protocol:
                    container_port = port.get("containerPort")
                    if isinstance(container_port, int) and not isinstance(container_port,
                                                                          bool):
                        return container_port
    return None


def _endpoint_port(service_port: Obj, number: int) -> dict[str, Any]:
    port: dict[str, Any] = {"port": number,
                            "protocol": _str(service_port.get("protocol")) or "TCP"}
    if _str(service_port.get("name")):
        port["name"] = service_port["name"]
    if _str(service_port.get("appProtocol")):
        port["appProtocol"] = service_port["appProtocol"]
    return port


def pod_ports(service: Obj, pod: Obj) -> list[dict[str, Any]]:
    """The Service's ports as ``pod`` resolves them (those it cannot resolve left out)."""
    ports = []
    for service_port in items(_spec(service).get("ports")):
        number = resolve_target_port(service_port, pod)
        if number is not None:
            ports.append(_endpoint_port(service_port, number))
    return ports


def _target_ref(pod: Obj) -> dict[str, Any]:
    meta = _meta(pod)
    ref = {"kind": "Pod", "namespace": _str(meta.get("namespace")),
           "name": _str(meta.get("name"))}
    if _str(meta.get("uid")):
        ref["uid"] = meta["uid"]
    return ref


def _hostname(service: Obj, pod: Obj) -> str:
    spec = _spec(pod)
    hostname = _str(spec.get("hostname"))
    if hostname and _str(spec.get("subdomain")) == _str(_meta(service).get("name")) and \
            _meta(service).get("namespace") == _meta(pod).get("namespace"):
        return hostname
    return ""


def selected_pods(service: Obj, pods: Iterable[Obj]) -> list[Obj]:
    """The eligible pods the Service selects, ordered by IP then name."""
    chosen = selector(service)
    if chosen is None:
        return []
    namespace = _meta(service).get("namespace")
    picked = [p for p in pods if _meta(p).get("namespace") == namespace
              and selects(chosen, p) and eligible(p)]
    return sorted(picked, key=lambda p: (_ip_key(_str(_status(p).get("podIP"))),
                                         _str(_meta(p).get("name"))))


def _ip_key(ip: str) -> tuple[int, int, str]:
    try:
        address = ipaddress.ip_address(ip)
    except ValueError:
        return (9, 0, ip)
    return (address.version, int(address), ip)


def _labels_for(service: Obj) -> dict[str, str]:
    labels = _meta(service).get("labels")
    out = {str(k): _str(v) for k, v in labels.items()} if isinstance(labels, Mapping) else {}
    if _spec(service).get("clusterIP") == "None":
        out[HEADLESS_LABEL] = ""
    return out


def _ports_key(ports: Sequence[Mapping[str, Any]]) -> tuple[tuple[str, int, str, str], ...]:
    return tuple(sorted((_str(p.get("name")), int(p.get("port") or 0), _str(p.get("protocol")),
                         _str(p.get("appProtocol"))) for p in ports))


def endpoints_for(service: Obj, pods: Iterable[Obj]) -> dict[str, Any]:
    """The Endpoints object the Service should have (see the module docstring)."""
    meta = _meta(service)
    publish = _spec(service).get("publishNotReadyAddresses") is True
    has_ports = bool(items(_spec(service).get("ports")))
    groups: dict[tuple[Any, ...], dict[str, Any]] = {}
    order: list[tuple[Any, ...]] = []
    chosen = [p for p in selected_pods(service, pods) if not terminating(p)]
    # ready addresses first, so that truncation keeps them
    chosen.sort(key=lambda p: not (publish or pod_ready(p)))
    kept = 0
    for pod in chosen:
        ports = pod_ports(service, pod)
        if has_ports and not ports:
            continue
        if kept >= MAX_ENDPOINTS_ADDRESSES:
            break
        kept += 1
        address: dict[str, Any] = {"ip": _status(pod)["podIP"]}
        hostname = _hostname(service, pod)
        if hostname:
            address["hostname"] = hostname
        if _str(_spec(pod).get("nodeName")):
            address["nodeName"] = _spec(pod)["nodeName"]
        address["targetRef"] = _target_ref(pod)
        key = _ports_key(ports)
        group = groups.get(key)
        if group is None:
            group = groups[key] = {"addresses": [], "notReadyAddresses": [],
                                   "ports": sorted(ports, key=lambda p: _ports_key([p]))}
            order.append(key)
        group["addresses" if publish or pod_ready(pod) else "notReadyAddresses"].append(
            address)
    subsets = []
    for key in sorted(order):
        group = groups[key]
        subset: dict[str, Any] = {}
        for field_name in ("addresses", "notReadyAddresses"):
            if group[field_name]:
                subset[field_name] = sorted(group[field_name],
                                            key=lambda a: (_ip_key(a["ip"]),
                                                           a["targetRef"]["name"]))
        if group["ports"]:
            subset["ports"] = group["ports"]
        subsets.append(subset)
    body: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Endpoints",
        "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace")},
        "subsets": subsets}
    labels = _labels_for(service)
    if labels:
        body["metadata"]["labels"] = labels
    total = sum(1 for p in chosen if not (has_ports and not pod_ports(service, p)))
    if total > MAX_ENDPOINTS_ADDRESSES:
        body["metadata"]["annotations"] = {OVER_CAPACITY: "truncated"}
    return body


def same_endpoints(current: Obj, desired: Obj) -> bool:
    """Whether an existing Endpoints object already says what ``desired`` says."""
    meta, want = _meta(current), _meta(desired)
    return ((current.get("subsets") or []) == desired.get("subsets")
            and (meta.get("labels") or {}) == (want.get("labels") or {})
            and (meta.get("annotations") or {}).get(OVER_CAPACITY)
            == (want.get("annotations") or {}).get(OVER_CAPACITY))


# EndpointSlices


def address_type(ip: str) -> str:
    try:
        return "IPv6" if ipaddress.ip_address(ip).version == 6 else "IPv4"
    except ValueError:
        return "IPv4"


def slice_endpoint(service: Obj, pod: Obj) -> dict[str, Any]:
    publish = _spec(service).get("publishNotReadyAddresses") is True
    ready = pod_ready(pod)
    ending = terminating(pod)
    endpoint: dict[str, Any] = {
        "addresses": [_status(pod)["podIP"]],
        "conditions": {"ready": publish or (ready and not ending),
                       "serving": publish or ready, "terminating": ending}}
    hostname = _hostname(service, pod)
    if hostname:
        endpoint["hostname"] = hostname
    if _str(_spec(pod).get("nodeName")):
        endpoint["nodeName"] = _spec(pod)["nodeName"]
    endpoint["targetRef"] = _target_ref(pod)
    return endpoint


def _endpoint_id(endpoint: Mapping[str, Any]) -> str:
    ref = endpoint.get("targetRef")
    if isinstance(ref, Mapping) and ref.get("uid"):
        return f"uid:{ref['uid']}"
    addresses = endpoint.get("addresses") or [""]
    return f"ip:{addresses[0]}"


SliceKey = tuple[str, tuple[tuple[str, int, str, str], ...]]


def _slice_key(obj: Obj) -> SliceKey:
    return (_str(obj.get("addressType")) or "IPv4", _ports_key(items(obj.get("ports"))))


def desired_groups(service: Obj, pods: Iterable[Obj]
                   ) -> dict[SliceKey, tuple[list[dict[str, Any]], list[dict[str, Any]]]]:
    """(address type, ports) -> (ports, endpoints) of the pods the Service selects."""
    has_ports = bool(items(_spec(service).get("ports")))
    groups: dict[SliceKey, tuple[list[dict[str, Any]], list[dict[str, Any]]]] = {}
    for pod in selected_pods(service, pods):
        ports = pod_ports(service, pod)
        if has_ports and not ports:
            continue
        ports = sorted(ports, key=lambda p: _ports_key([p]))
        key = (address_type(_str(_status(pod).get("podIP"))), _ports_key(ports))
        groups.setdefault(key, (ports, []))[1].append(slice_endpoint(service, pod))
    return groups


def slice_labels(service: Obj) -> dict[str, str]:
    labels = {k: v for k, v in _labels_for(service).items() if k not in _RESERVED_LABELS}
    labels[SERVICE_NAME_LABEL] = _str(_meta(service).get("name"))
    labels[MANAGED_BY_LABEL] = MANAGED_BY
    return labels


def owner_reference(service: Obj) -> dict[str, Any]:
    meta = _meta(service)
    return {"apiVersion": "v1", "kind": "Service", "name": meta.get("name"),
            "uid": meta.get("uid"), "controller": True, "blockOwnerDeletion": True}


@dataclass(slots=True)
class SlicePlan:
    """What to write: new slices, changed ones (with the resourceVersion read), and the
    names of slices to delete."""

    create: list[dict[str, Any]] = field(default_factory=list)
    update: list[dict[str, Any]] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.create or self.update or self.delete)


def _new_slice(service: Obj, address: str, ports: list[dict[str, Any]],
               endpoints: list[dict[str, Any]]) -> dict[str, Any]:
    meta = _meta(service)
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"generateName": f"{_str(meta.get('name'))[:57]}-",
                         "namespace": meta.get("namespace"), "labels": slice_labels(service),
                         "ownerReferences": [owner_reference(service)]},
            "addressType": address, "endpoints": endpoints, "ports": ports}


def _changed(existing: Obj, service: Obj, ports: list[dict[str, Any]],
             endpoints: list[dict[str, Any]]) -> dict[str, Any] | None:
    meta = dict(_meta(existing))
    labels = slice_labels(service)
    owners = [owner_reference(service)]
    if (list(existing.get("endpoints") or []) == endpoints
            and list(existing.get("ports") or []) == ports
            and meta.get("labels") == labels and meta.get("ownerReferences") == owners):
        return None
    meta["labels"] = labels
    meta["ownerReferences"] = owners
    return {**existing, "metadata": meta, "endpoints": endpoints, "ports": ports}


def plan_slices(service: Obj, pods: Iterable[Obj], existing: Iterable[Obj], *,
                max_per_slice: int = DEFAULT_MAX_PER_SLICE) -> SlicePlan:
    """The writes that make ``existing`` (the slices this controller manages for the
    Service) hold the Service's endpoints; see the module docstring."""
    if not 1 <= max_per_slice <= MAX_PER_SLICE_LIMIT:
        raise ValueError(f"max_per_slice must be between 1 and {MAX_PER_SLICE_LIMIT}")
    plan = SlicePlan()
    groups = desired_groups(service, pods)
    current: dict[SliceKey, list[Obj]] = {}
    for obj in sorted(existing, key=lambda o: _str(_meta(o).get("name"))):
        current.setdefault(_slice_key(obj), []).append(obj)
    if not groups:
        # the placeholder: one empty slice, whatever the Service's ports
        placeholder = ("IPv4", ())
        groups = {placeholder: ([], [])}
        current = {placeholder: [o for objs in current.values() for o in objs]}
    for key, objs in current.items():
        if key not in groups:
            plan.delete.extend(_str(_meta(o).get("name")) for o in objs)
    for key, (ports, endpoints) in groups.items():
        _plan_group(plan, service, key[0], ports, endpoints, current.get(key, []),
                    max_per_slice)
    return plan


def _plan_group(plan: SlicePlan, service: Obj, address: str, ports: list[dict[str, Any]],
                endpoints: list[dict[str, Any]], slices: list[Obj], max_per_slice: int
                ) -> None:
    wanted = {_endpoint_id(e): e for e in endpoints}
    # keep each endpoint in the slice it is in, while that slice has room
    filling: list[list[dict[str, Any]]] = []
    placed: set[str] = set()
    for obj in slices:
        kept: list[dict[str, Any]] = []
        for endpoint in items(obj.get("endpoints")):
            ident = _endpoint_id(endpoint)
            if ident in wanted and ident not in placed and len(kept) < max_per_slice:
                kept.append(wanted[ident])
                placed.add(ident)
        filling.append(kept)
    rest = [e for ident, e in wanted.items() if ident not in placed]
    for kept in filling:
        while rest and len(kept) < max_per_slice:
            kept.append(rest.pop(0))
    new_chunks = [rest[i:i + max_per_slice] for i in range(0, len(rest), max_per_slice)]
    for obj, kept in zip(slices, filling, strict=True):
        if not kept and (endpoints or obj is not slices[0]):
            plan.delete.append(_str(_meta(obj).get("name")))
            continue
        kept.sort(key=lambda e: (_ip_key(_str((e.get("addresses") or [""])[0])),
                                 _str((e.get("targetRef") or {}).get("name"))))
        changed = _changed(obj, service, ports, kept)
        if changed is not None:
            plan.update.append(changed)
    if not slices and not endpoints:
        new_chunks = [[]]
    for chunk in new_chunks:
        plan.create.append(_new_slice(service, address, ports, chunk))
